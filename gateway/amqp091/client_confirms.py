"""The publishes a 0-9-1 client channel sent in confirm mode and has not seen settled.

Why a module of its own: a broker says what became of a publish in three ways that do not
name it alike. ``basic.ack``/``basic.nack`` carry the publish sequence number (with
``multiple``, every lower one too). ``basic.return`` (a ``mandatory`` publish nobody
could take) carries no number at all: RabbitMQ sends it while routing the message, before
that message's ack, so it is matched here to the oldest unsettled, not yet returned
publish with the same exchange, routing key and body, and that publish counts as refused
when its ack comes. A ``channel.close`` caused by a publish (404 no such exchange, 403 no
write permission, 406 a property the broker refuses) also names no number: the publishes
after the faulty one were dropped, the ones before it were taken, so the faulty one is the
oldest unsettled publish the reply text points at (the exchange it names), else the
oldest unsettled one.

What one ``basic.ack`` settles comes out as one ``PublishesConfirmed`` (the tokens it
accepted, oldest first) and a ``PublishRefused`` for each returned publish among them;
a ``basic.nack`` or a channel error, one ``PublishRefused`` per publish. Why one
record for an ack: RabbitMQ confirms with ``multiple`` dozens of publishes at a time, and
a record per publish, read one by one by the forwarder's connection, cost more than the
rest of reading the ack (issue 45).
"""
from __future__ import annotations

import re
from bisect import bisect_right
from collections import OrderedDict
from itertools import islice
from operator import itemgetter
from dataclasses import dataclass
from typing import Any, Optional, Sequence

__all__ = ["PublishRefused", "PublishesConfirmed", "UnconfirmedPublishes"]

#: RabbitMQ's text for a publish to a missing exchange: "NOT_FOUND - no exchange 'x' in vhost '/'"
_NAMED_EXCHANGE = re.compile(r"exchange '((?:[^'\\]|\\.)*)'")


@dataclass(frozen=True, slots=True)
class PublishRefused:
    """The broker refused the publish sent with ``token``: ``error`` says how (a nack, a
    return, or the channel error it caused)."""

    token: Any
    error: str


@dataclass(frozen=True, slots=True)
class PublishesConfirmed:
    """The broker accepted the publishes sent with ``tokens`` (oldest first): a confirm."""

    tokens: tuple


#: one unsettled publish: (token, exchange, routing key, properties, body), the tuple the
#: publisher gave (``add_many`` keeps it as it is: nothing is made per publish)
_TOKEN, _EXCHANGE, _KEY, _PROPERTIES, _BODY = range(5)
_token_of = itemgetter(_TOKEN)


class UnconfirmedPublishes:
    """Sequence number -> publish, for one channel in confirm mode (numbers from 1)."""

    __slots__ = ("_sent", "_next", "_refusals")

    def __init__(self) -> None:
        self._sent: OrderedDict[int, tuple] = OrderedDict()
        self._next = 1
        #: sequence number -> why, for publishes a ``basic.return`` refused (reported at their ack)
        self._refusals: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self._sent)

    def add(self, token: Any, exchange: str, routing_key: str, body: bytes) -> int:
        """Record one publish; return its sequence number."""
        return self.add_many(((token, exchange, routing_key, b"", body),))

    def add_many(self, publishes: Sequence[tuple]) -> int:
        """Record ``publishes``, each (token, exchange, routing key, properties, body), in
        order; return the sequence number of the first."""
        first = self._next
        self._next = first + len(publishes)
        self._sent.update(zip(range(first, self._next), publishes))
        return first

    def acked(self, tag: int, multiple: bool) -> list:
        """What ``basic.ack`` ``tag`` settles: a ``PublishesConfirmed`` of the accepted ones
        (if any), then a ``PublishRefused`` for each returned one."""
        seqs, records = self._take(tag, multiple)
        if not records:
            return []
        if not self._refusals:
            return [PublishesConfirmed(tuple(map(_token_of, records)))]
        pop = self._refusals.pop
        refused = []
        accepted = []
        for seq, s in zip(seqs, records):
            refusal = pop(seq, None)
            if refusal is None:
                accepted.append(s[_TOKEN])
            else:
                refused.append(PublishRefused(s[_TOKEN], refusal))
        return [PublishesConfirmed(tuple(accepted))] + refused if accepted else refused

    def nacked(self, tag: int, multiple: bool) -> list[PublishRefused]:
        pop = self._refusals.pop
        return [PublishRefused(s[_TOKEN], pop(seq, None) or
                               "basic.nack: the broker could not take the message (a queue "
                               "refused it, e.g. x-overflow reject-publish, or failed)")
                for seq, s in zip(*self._take(tag, multiple))]

    def _take(self, tag: int, multiple: bool) -> tuple[list[int], list[tuple]]:
        """The sequence numbers an ack or nack of ``tag`` settles and their records,
        removed. A multiple one is taken as a range, with no step per publish (issue 45):
        numbers are added in order, so those up to ``tag`` are the oldest ones, at most
        ``tag - oldest + 1`` of them (fewer where single acks took some)."""
        sent = self._sent
        if not multiple:
            one = sent.pop(tag, None)
            return ([tag], [one]) if one is not None else ([], [])
        if not sent:
            return [], []
        if tag == 0 or next(reversed(sent)) <= tag:  # every outstanding one
            seqs, records = list(sent), list(sent.values())
            sent.clear()
            return seqs, records
        seqs = list(islice(sent, max(0, tag - next(iter(sent)) + 1)))
        if seqs and seqs[-1] > tag:
            del seqs[bisect_right(seqs, tag):]
        return seqs, list(map(sent.pop, seqs))

    def returned(self, exchange: str, routing_key: str, body: bytes, error: str) -> bool:
        """Mark the publish a ``basic.return`` stands for; False when none matches."""
        refusals = self._refusals
        for seq, s in self._sent.items():
            if seq not in refusals and s[_EXCHANGE] == exchange and s[_KEY] == routing_key \
                    and s[_BODY] == body:
                refusals[seq] = error
                return True
        return False

    def channel_failed(self, reply_text: str, error: str) -> Optional[PublishRefused]:
        """The publish a channel error caused by ``basic.publish`` stands for (refused
        with ``error``), removed; None when nothing is outstanding."""
        if not self._sent:
            return None
        named = _NAMED_EXCHANGE.search(reply_text)
        seq = next(iter(self._sent))
        if named is not None:
            exchange = named.group(1)
            for candidate, s in self._sent.items():
                if s[_EXCHANGE] == exchange and candidate not in self._refusals:
                    seq = candidate
                    break
        s = self._sent.pop(seq)
        self._refusals.pop(seq, None)
        return PublishRefused(s[_TOKEN], error)

    def drop_all(self) -> list[Any]:
        """Forget every outstanding publish (the channel is gone); return their tokens."""
        tokens = [s[_TOKEN] for s in self._sent.values()]
        self._sent.clear()
        self._refusals.clear()
        return tokens
