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

``PublishSettled`` items come out in the order the broker settled them.
"""
from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Optional

__all__ = ["PublishSettled", "UnconfirmedPublishes"]

#: RabbitMQ's text for a publish to a missing exchange: "NOT_FOUND - no exchange 'x' in vhost '/'"
_NAMED_EXCHANGE = re.compile(r"exchange '((?:[^'\\]|\\.)*)'")


@dataclass(frozen=True, slots=True)
class PublishSettled:
    """The broker settled the publish sent with ``token``: accepted (a confirm), or
    refused with ``error`` (a nack, a return, or the channel error it caused)."""

    token: Any
    accepted: bool
    error: Optional[str] = None


@dataclass(slots=True)
class _Sent:
    token: Any
    exchange: str
    routing_key: str
    body: bytes
    refusal: Optional[str] = None   # set by basic.return; reported when the ack comes


class UnconfirmedPublishes:
    """Sequence number -> publish, for one channel in confirm mode (numbers from 1)."""

    __slots__ = ("_sent", "_next")

    def __init__(self) -> None:
        self._sent: OrderedDict[int, _Sent] = OrderedDict()
        self._next = 1

    def __len__(self) -> int:
        return len(self._sent)

    def add(self, token: Any, exchange: str, routing_key: str, body: bytes) -> int:
        """Record one publish; return its sequence number."""
        seq = self._next
        self._next += 1
        self._sent[seq] = _Sent(token, exchange, routing_key, body)
        return seq

    def acked(self, tag: int, multiple: bool) -> list[PublishSettled]:
        return [PublishSettled(s.token, s.refusal is None, s.refusal) for s in self._take(tag, multiple)]

    def nacked(self, tag: int, multiple: bool) -> list[PublishSettled]:
        return [PublishSettled(s.token, False, s.refusal or
                               "basic.nack: the broker could not take the message (a queue "
                               "refused it, e.g. x-overflow reject-publish, or failed)")
                for s in self._take(tag, multiple)]

    def _take(self, tag: int, multiple: bool) -> list[_Sent]:
        sent = self._sent
        if not multiple:
            one = sent.pop(tag, None)
            return [one] if one is not None else []
        if tag == 0:  # every outstanding one
            taken = list(sent.values())
            sent.clear()
            return taken
        taken = []
        while sent:
            seq = next(iter(sent))
            if seq > tag:
                break
            taken.append(sent.popitem(last=False)[1])
        return taken

    def returned(self, exchange: str, routing_key: str, body: bytes, error: str) -> bool:
        """Mark the publish a ``basic.return`` stands for; False when none matches."""
        for s in self._sent.values():
            if s.refusal is None and s.exchange == exchange and s.routing_key == routing_key and s.body == body:
                s.refusal = error
                return True
        return False

    def channel_failed(self, reply_text: str, error: str) -> Optional[PublishSettled]:
        """The publish a channel error caused by ``basic.publish`` stands for (refused
        with ``error``), removed; None when nothing is outstanding."""
        if not self._sent:
            return None
        named = _NAMED_EXCHANGE.search(reply_text)
        seq = next(iter(self._sent))
        if named is not None:
            exchange = named.group(1)
            for candidate, s in self._sent.items():
                if s.exchange == exchange and s.refusal is None:
                    seq = candidate
                    break
        s = self._sent.pop(seq)
        return PublishSettled(s.token, False, error)

    def drop_all(self) -> list[Any]:
        """Forget every outstanding publish (the channel is gone); return their tokens."""
        tokens = [s.token for s in self._sent.values()]
        self._sent.clear()
        return tokens
