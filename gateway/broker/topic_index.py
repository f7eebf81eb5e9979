"""TopicIndex: a trie over the words of topic binding patterns.

A routing key and a pattern are split on ``.`` into words; the empty string has zero
words and empty words are words (``a..b`` is ``a``, ``""``, ``b``). In a pattern ``*``
matches exactly one word and ``#`` zero or more words; in a routing key they are plain
words.

Theory of operation: every pattern is a path from the root; a node has literal children,
one ``*`` child and one ``#`` child, and holds the destinations whose pattern ends there
(a count per destination, because the same destination may be bound with the same pattern
several times, e.g. with different arguments). Matching walks states ``(node, i)`` (``i``
= words consumed) with a visited set, so the cost depends on the words and the trie paths
that match, never on the number of bindings, and ``#.#`` cannot explode. At a ``#`` node
the walk may consume one more word (stay) or stop there (continue with its children).

:meth:`TopicIndex.destinations` (the routing path) keeps each routing key's result, as
RabbitMQ's routing-key cache does: publishers reuse a few keys, so most publishes cost
one dict lookup whatever the bindings. Every :meth:`~TopicIndex.add` and
:meth:`~TopicIndex.remove` empties the cache, so a result can never be stale; it holds at
most ``CACHE_KEYS`` keys and starts over when full.
"""
from __future__ import annotations

from typing import Hashable, Iterator, Optional

__all__ = ["CACHE_KEYS", "TopicIndex", "split_words"]

#: Routing keys whose match result one index keeps (a bound on its memory).
CACHE_KEYS = 16_384


def split_words(key: str) -> list[str]:
    """Words of a routing key or pattern; ``""`` has zero words."""
    return key.split(".") if key else []


class _Node:
    __slots__ = ("children", "star", "hash", "destinations")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.star: Optional[_Node] = None
        self.hash: Optional[_Node] = None
        self.destinations: dict[Hashable, int] = {}

    def empty(self) -> bool:
        return not (self.children or self.star or self.hash or self.destinations)


class TopicIndex:
    """Patterns -> destinations, with :meth:`match` that never scans all bindings."""

    __slots__ = ("_root", "_count", "_cache")

    def __init__(self) -> None:
        self._root = _Node()
        self._count = 0
        self._cache: dict[str, tuple[Hashable, ...]] = {}

    def __len__(self) -> int:
        """Number of (pattern, destination) registrations, counting duplicates."""
        return self._count

    @property
    def pruned(self) -> bool:
        """The trie holds nothing (no node below the root, no destination at it): true
        once every pattern is removed, since ``remove`` prunes the branches it empties
        (bindings that come and go leave no memory behind)."""
        return self._root.empty()

    @property
    def cached_keys(self) -> int:
        """Routing keys whose destinations are cached: at most ``CACHE_KEYS`` (a key per
        message must not grow the cache)."""
        return len(self._cache)

    def add(self, pattern: str, destination: Hashable) -> None:
        """Register ``destination`` for ``pattern`` (registrations are counted)."""
        if self._cache:
            self._cache.clear()
        node = self._root
        for word in split_words(pattern):
            if word == "*":
                if node.star is None:
                    node.star = _Node()
                node = node.star
            elif word == "#":
                if node.hash is None:
                    node.hash = _Node()
                node = node.hash
            else:
                nxt = node.children.get(word)
                if nxt is None:
                    nxt = node.children[word] = _Node()
                node = nxt
        node.destinations[destination] = node.destinations.get(destination, 0) + 1
        self._count += 1

    def remove(self, pattern: str, destination: Hashable) -> bool:
        """Remove one registration; returns False if there was none. Empty nodes are pruned."""
        if self._cache:
            self._cache.clear()
        path: list[tuple[_Node, str]] = []
        node = self._root
        for word in split_words(pattern):
            if word == "*":
                nxt = node.star
            elif word == "#":
                nxt = node.hash
            else:
                nxt = node.children.get(word)
            if nxt is None:
                return False
            path.append((node, word))
            node = nxt
        count = node.destinations.get(destination)
        if not count:
            return False
        if count == 1:
            del node.destinations[destination]
        else:
            node.destinations[destination] = count - 1
        self._count -= 1
        # prune from the leaf upwards
        while path and node.empty():
            parent, word = path.pop()
            if word == "*":
                parent.star = None
            elif word == "#":
                parent.hash = None
            else:
                del parent.children[word]
            node = parent
        return True

    def destinations(self, routing_key: str) -> tuple[Hashable, ...]:
        """What :meth:`match` returns, as a tuple in the same order, from the cache when
        this key was routed since the last add/remove."""
        cache = self._cache
        try:
            return cache[routing_key]
        except KeyError:
            pass
        result = tuple(self.match(routing_key))
        if len(cache) >= CACHE_KEYS:
            cache.clear()
        cache[routing_key] = result
        return result

    def match(self, routing_key: str) -> dict[Hashable, None]:
        """Destinations whose pattern matches ``routing_key``, as an ordered set (dict)."""
        words = split_words(routing_key)
        n = len(words)
        out: dict[Hashable, None] = {}
        stack: list[tuple[_Node, int, bool]] = [(self._root, 0, False)]
        seen: set[tuple[int, int]] = set()
        while stack:
            node, i, is_hash = stack.pop()
            key = (id(node), i)
            if key in seen:
                continue
            seen.add(key)
            if is_hash and i < n:
                stack.append((node, i + 1, True))  # '#' swallows one more word
            if i == n:
                if node.destinations:
                    for dest in node.destinations:
                        out[dest] = None
            else:
                child = node.children.get(words[i])
                if child is not None:
                    stack.append((child, i + 1, False))
                if node.star is not None:
                    stack.append((node.star, i + 1, False))
            if node.hash is not None:
                stack.append((node.hash, i, True))  # '#' matching zero words so far
        return out

    def patterns(self) -> Iterator[tuple[str, Hashable, int]]:
        """Every ``(pattern, destination, count)``; for inspection and tests."""
        stack: list[tuple[_Node, list[str]]] = [(self._root, [])]
        while stack:
            node, words = stack.pop()
            for dest, count in node.destinations.items():
                yield ".".join(words), dest, count
            for word, child in node.children.items():
                stack.append((child, words + [word]))
            if node.star is not None:
                stack.append((node.star, words + ["*"]))
            if node.hash is not None:
                stack.append((node.hash, words + ["#"]))
