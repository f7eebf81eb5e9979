"""A 0-9-1 publisher with confirms and a window (aio-pika), that keeps count of what the
broker confirmed, nacked, and left unanswered when the connection died.

pika's ``BlockingChannel`` waits for each confirm before the next publish; this one keeps
``window`` publishes in flight, as a real high-throughput publisher does, so a crash
finds many unconfirmed messages and a commit covers many confirms.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Iterable, Optional

import aio_pika

__all__ = ["ConfirmLedger", "publish_confirmed"]


@dataclass
class ConfirmLedger:
    """Bodies by outcome: ``confirmed`` (basic.ack), ``nacked`` (basic.nack), and
    ``unanswered`` (sent, or about to be, when the connection went away)."""

    confirmed: list[bytes] = field(default_factory=list)
    nacked: list[bytes] = field(default_factory=list)
    unanswered: list[bytes] = field(default_factory=list)


async def publish_confirmed(url: str, routing_key: str, bodies: Iterable[bytes], *,
                            exchange: str = "", window: int = 64, persistent: bool = True,
                            ledger: Optional[ConfirmLedger] = None,
                            stop: Optional[asyncio.Event] = None) -> ConfirmLedger:
    """Publish ``bodies`` with confirms, ``window`` at a time, until done, ``stop`` is set,
    or the connection fails (not raised: what was sent and not answered is in
    ``unanswered``; bodies never taken from the iterable are in no list)."""
    ledger = ledger if ledger is not None else ConfirmLedger()
    mode = aio_pika.DeliveryMode.PERSISTENT if persistent else aio_pika.DeliveryMode.NOT_PERSISTENT
    bodies = iter(bodies)
    try:
        connection = await aio_pika.connect(url, timeout=10)
    except Exception:  # noqa: BLE001 - the gateway may already be gone
        return ledger
    in_flight: dict[asyncio.Future, bytes] = {}
    try:
        channel = await connection.channel(publisher_confirms=True)
        target = channel.default_exchange if not exchange else await channel.get_exchange(exchange)

        async def one(body: bytes) -> None:
            await target.publish(aio_pika.Message(body, delivery_mode=mode), routing_key=routing_key)

        for body in bodies:
            if stop is not None and stop.is_set():
                ledger.unanswered.append(body)
                break
            while len(in_flight) >= window:
                await _settle(in_flight, ledger, asyncio.FIRST_COMPLETED)
            in_flight[asyncio.ensure_future(one(body))] = body
        while in_flight:
            await _settle(in_flight, ledger, asyncio.ALL_COMPLETED)
    except Exception:  # noqa: BLE001 - a dead connection: sort what is known
        pass
    finally:
        for future, body in list(in_flight.items()):
            if future.done() and not future.cancelled() and future.exception() is None:
                ledger.confirmed.append(body)
            else:
                future.cancel()
                ledger.unanswered.append(body)
        in_flight.clear()
        try:
            await asyncio.wait_for(connection.close(), 2)
        except Exception:  # noqa: BLE001
            pass
    return ledger


async def _settle(in_flight: dict, ledger: ConfirmLedger, when: str) -> None:
    done, _ = await asyncio.wait(list(in_flight), return_when=when, timeout=15)
    if not done:
        raise TimeoutError("no confirm within 15 s")
    for future in done:
        body = in_flight.pop(future)
        exc = future.exception()
        if exc is None:
            ledger.confirmed.append(body)
        elif isinstance(exc, aio_pika.exceptions.DeliveryError):
            ledger.nacked.append(body)
        else:
            ledger.unanswered.append(body)
            raise exc
