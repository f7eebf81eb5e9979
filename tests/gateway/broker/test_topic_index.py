"""TopicIndex: the REQUIREMENTS 5.2 table, edge cases, removal, and a reference check."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.broker.topic_index import TopicIndex, split_words
from tests.support.example_counts import examples


def reference_match(pattern: str, key: str) -> bool:
    """Obvious recursive matcher used as the oracle."""

    def rec(p: list[str], k: list[str]) -> bool:
        if not p:
            return not k
        head, rest = p[0], p[1:]
        if head == "#":
            return any(rec(rest, k[i:]) for i in range(len(k) + 1))
        if not k:
            return False
        if head == "*" or head == k[0]:
            return rec(rest, k[1:])
        return False

    return rec(split_words(pattern), split_words(key))


TABLE = [
    # seed examples
    ("*.stock.#", "usd.stock", True),
    ("*.stock.#", "eur.stock.db", True),
    ("*.stock.#", "stock.nasdaq", False),
    ("STOCK.USD.*", "STOCK.USD.NYSE", True),
    ("STOCK.USD.*", "STOCK.USD.IBM", True),
    ("STOCK.USD.*", "stock.usd.ibm", False),
    # derived edge cases
    ("#", "", True),
    ("#", "a", True),
    ("#", "a.b.c", True),
    ("a.#", "a", True),
    ("a.#", "a.b.c", True),
    ("a.#", "b", False),
    ("*", "", False),
    ("*", "a", True),
    ("*", "a.b", False),
    ("#.#", "", True),
    ("#.#", "a.b", True),
    ("a.*.#", "a", False),
    ("a.*.#", "a.b", True),
    ("a.#.b", "a.b", True),
    ("a.#.b", "a.x.y.b", True),
    ("a.#.b", "a.x.y.c", False),
    ("#.b", "b", True),
    ("#.b", "a.b", True),
    ("#.b", "a.b.c", False),
    ("", "", True),
    ("", "a", False),
    ("a", "", False),
    ("a..b", "a..b", True),
    ("a.*.b", "a..b", True),
    ("a.b", "a..b", False),
    ("a.", "a.", True),
    ("a.", "a", False),
    ("*.*", ".", True),
    ("a-b_c.#", "a-b_c.x", True),
    ("*", "*", True),
    ("a", "*", False),
]


@pytest.mark.parametrize(("pattern", "key", "expected"), TABLE)
def test_table(pattern: str, key: str, expected: bool) -> None:
    index = TopicIndex()
    index.add(pattern, "q")
    assert ("q" in index.match(key)) is expected
    assert reference_match(pattern, key) is expected


def test_split_words_empty_key_has_no_words() -> None:
    assert split_words("") == []
    assert split_words("a..b") == ["a", "", "b"]


def test_registrations_are_counted_and_removal_prunes() -> None:
    index = TopicIndex()
    index.add("a.*", "q")
    index.add("a.*", "q")
    index.add("a.#", "r")
    assert len(index) == 3
    assert index.remove("a.*", "q")
    assert "q" in index.match("a.b")
    assert index.remove("a.*", "q")
    assert "q" not in index.match("a.b")
    assert not index.remove("a.*", "q")
    assert not index.remove("x.y", "q")
    assert index.remove("a.#", "r")
    assert len(index) == 0
    assert index.pruned


def test_match_returns_each_destination_once() -> None:
    index = TopicIndex()
    for pattern in ("#", "a.#", "*.b", "a.b", "#.#", "#.b"):
        index.add(pattern, "q")
    assert list(index.match("a.b")) == ["q"]


def test_patterns_lists_registrations() -> None:
    index = TopicIndex()
    index.add("a.*.#", "q")
    index.add("", "r")
    assert sorted(index.patterns()) == [("", "r", 1), ("a.*.#", "q", 1)]


def test_many_hashes_do_not_explode() -> None:
    index = TopicIndex()
    index.add(".".join(["#"] * 30), "q")
    index.add(".".join(["#", "x"] * 10), "r")
    key = ".".join(["x"] * 60)
    assert set(index.match(key)) == {"q", "r"}


def test_ten_thousand_bindings_route_correctly() -> None:
    rnd = random.Random(7)
    words = ["a", "b", "c", "d", "e", "*", "#"]
    index = TopicIndex()
    patterns = []
    for i in range(10_000):
        pattern = ".".join(rnd.choice(words) for _ in range(rnd.randint(1, 4)))
        patterns.append((pattern, i))
        index.add(pattern, i)
    # the oracle is asked once per distinct pattern (at most 2,800 of the 10,000)
    bound_by: dict[str, set[int]] = {}
    for pattern, i in patterns:
        bound_by.setdefault(pattern, set()).add(i)
    for _ in range(200):
        key = ".".join(rnd.choice("abcdef") for _ in range(rnd.randint(0, 5)))
        expected = set().union(*(ids for pattern, ids in bound_by.items() if reference_match(pattern, key)))
        assert set(index.match(key)) == expected


def test_matching_does_not_scan_every_binding() -> None:
    """With 10 000 literal bindings a lookup visits only the matching path."""
    index = TopicIndex()
    for i in range(10_000):
        index.add(f"orders.{i}.created", i)
    visited = 0
    original = dict.get

    class CountingDict(dict):
        def get(self, key, default=None):  # type: ignore[override]
            nonlocal visited
            visited += 1
            return original(self, key, default)

    def convert(node) -> None:
        node.children = CountingDict(node.children)
        for child in list(node.children.values()):
            convert(child)

    convert(index._root)
    assert set(index.match("orders.4242.created")) == {4242}
    assert visited <= 5


word = st.sampled_from(["a", "b", "", "*", "#"])
key_word = st.sampled_from(["a", "b", "", "c"])


@settings(max_examples=examples(300), deadline=None)
@given(
    patterns=st.lists(st.lists(word, min_size=0, max_size=5).map(".".join), min_size=1, max_size=8),
    key=st.lists(key_word, min_size=0, max_size=5).map(".".join),
)
def test_agrees_with_reference(patterns: list[str], key: str) -> None:
    index = TopicIndex()
    for i, pattern in enumerate(patterns):
        index.add(pattern, i)
    expected = {i for i, pattern in enumerate(patterns) if reference_match(pattern, key)}
    assert set(index.match(key)) == expected


# -- the routing-key cache ---------------------------------------------------------------

def test_destinations_equal_match_in_order() -> None:
    index = TopicIndex()
    for pattern, dest in (("a.*", "q1"), ("#", "q2"), ("a.b", "q3"), ("x", "q4")):
        index.add(pattern, dest)
    assert index.destinations("a.b") == tuple(index.match("a.b"))
    assert set(index.destinations("a.b")) == {"q1", "q2", "q3"}
    assert index.destinations("a.b") == tuple(index.match("a.b"))  # cached: same answer


def test_destinations_never_stale_after_add_or_remove() -> None:
    index = TopicIndex()
    index.add("a.*", "q1")
    assert index.destinations("a.b") == ("q1",)
    index.add("a.b", "q2")
    assert index.destinations("a.b") == ("q1", "q2")
    index.remove("a.*", "q1")
    assert index.destinations("a.b") == ("q2",)
    index.remove("a.b", "q2")
    assert index.destinations("a.b") == ()


def test_destinations_cache_is_bounded(monkeypatch) -> None:
    import gateway.broker.topic_index as module
    monkeypatch.setattr(module, "CACHE_KEYS", 4)
    index = TopicIndex()
    index.add("#", "q")
    for i in range(10):
        assert index.destinations(f"k{i}") == ("q",)
    assert index.cached_keys <= 4
