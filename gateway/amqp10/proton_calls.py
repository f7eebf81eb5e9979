"""Proton's C-level calls: the one module that reaches under python-qpid-proton's API.

Why they exist: on the per-message path proton's public wrappers cost more than the work
they wrap. Each use below replaced a wrapper after a measurement (A/B in one run, commit
messages of the figures):

* events: ``Event.wrap`` wraps the delivery, link, session, connection and transport of
  every event, and nearly every event under load is a transfer or a disposition. The
  engine reads the event type and the delivery's C link (``pn_event_*``,
  ``pn_delivery_link``) and finds the link's handler by that pointer (``c_pointer``):
  W1 4 KiB 35.7k -> 38.3k msgs/s (73ec033); a link's flow the same way, 25.7 -> 24.3 us a
  message (f063fa5);
* incoming transfers: ``Receiver.recv`` makes two wrappers and copies the read; the link
  reads into one buffer (``pn_link_recv`` through ``lib``/``ffi``) and checks credit with
  ``pn_link_credit``: W2 100 B 49.1k -> 50.6k msgs/s (96c03d1);
* deliveries and dispositions: a Python ``Delivery`` per transfer or settlement; the
  links work on the C delivery (``pn_delivery_*``) (237ecf8);
* timers: ``Transport.tick`` converts seconds to milliseconds and back in two more
  Python calls, on every tick (the edge ticks after every read): :func:`transport_tick`;
* outgoing deliveries: ``Sender.delivery``/``Sender.stream`` convert the tag and the
  buffer, about a microsecond a message (f850916); ``lib.pn_delivery`` and
  :func:`send_parts` send from the message's own buffer, its header replaced without a copy
  (a body of at most ``JOIN_MAX`` octets is copied behind its header and sent in one call);
* transport input and output: ``Transport.capacity``/``push``/``pending``/``peek``/``pop``
  are a Python call each around their C call (``peek`` copies its output twice more), two
  to five of them per read and per flush: ``ProtonTransport`` calls the C functions
  (:func:`transport_push`, :func:`transport_drain`) (``bench/hotpath.py`` W4-100B-backlog);
* every C call drops and retakes the interpreter lock, two mutex locks and unlocks: cheap
  in a process that never had a second thread (glibc skips their atomic instructions:
  about 47 against 59 ns a call), which is why the store starts its threads only when first
  needed (``gateway/store/commit_thread.py``).

What is private, and so why the proton version is bounded in ``pyproject.toml``: the
``cproton`` module (the cffi binding behind the wrappers since 0.39, whose ``pn_*`` names
are the C API's), ``cproton_ffi``'s ``ffi`` and ``lib`` (raw cffi), a wrapper's ``_impl``
(its C pointer: :func:`c_pointer`) and ``Link._check`` (proton's exception for a negative
result: :func:`raise_proton_error`). ``tests/gateway/amqp10/test_proton_calls.py`` checks each
against the installed proton.
"""
from __future__ import annotations

from typing import Any, NoReturn

from cproton import (PN_DELIVERY, PN_EOS, PN_LINK_FLOW, PN_TRANSPORT, pn_collector_peek, pn_collector_pop,
                     pn_delivery_aborted, pn_delivery_link, pn_delivery_partial,
                     pn_delivery_pending, pn_delivery_remote_state, pn_delivery_settle,
                     pn_delivery_settled, pn_delivery_tag, pn_delivery_update, pn_delivery_updated,
                     pn_event_delivery, pn_event_link, pn_event_type, pn_link_advance,
                     pn_link_credit, pn_transport_tick)
from cproton_ffi import ffi, lib

__all__ = [
    "NULL", "PN_DELIVERY", "PN_EOS", "PN_LINK_FLOW", "PN_TRANSPORT", "c_pointer", "ffi", "lib",
    "pn_collector_peek", "pn_collector_pop", "pn_delivery_aborted", "pn_delivery_link",
    "pn_delivery_partial", "pn_delivery_pending", "pn_delivery_remote_state",
    "pn_delivery_settle", "pn_delivery_settled", "pn_delivery_tag", "pn_delivery_update",
    "pn_delivery_updated",
    "pn_event_delivery", "pn_event_link", "pn_event_type", "pn_link_advance", "pn_link_credit",
    "raise_proton_error", "send_parts", "transport_capacity", "transport_drain",
    "transport_push", "transport_tick",
]

#: cffi's null pointer: ``pn_collector_peek`` returns it when no event is left (compared
#: with ``==``, without ``cproton.isnull``'s call)
NULL = ffi.NULL


def c_pointer(wrapper: Any) -> Any:
    """The C object behind a proton wrapper (``Link``, ``Collector``, ``Delivery`` ...).
    cffi pointers hash and compare by address, so they key dicts."""
    return wrapper._impl


def transport_tick(transport: Any, now: float) -> float:
    """``Transport.tick(now)`` (seconds in, the next deadline in seconds out, 0.0 for
    none) in one Python call, not three: the engine ticks after every read."""
    return pn_transport_tick(transport._impl, int(now * 1000)) / 1000.0


def transport_push(transport: Any, data: bytes, at: int) -> int:
    """Push ``data[at:]`` into ``transport`` (a proton ``Transport``), as much as proton
    has room for: the offset up to which it went in (``len(data)``: all of it), or -1 when
    the transport takes no more input (the rest is dropped). ``Transport.push`` with its
    ``capacity``, without their wrappers and without copying the input.
    Raises proton's exception for any other error."""
    impl = transport._impl
    size = len(data)
    buffer = None
    while at < size:
        capacity = lib.pn_transport_capacity(impl)
        if capacity <= 0:
            if capacity < PN_EOS:
                raise_proton_error(transport, capacity)
            return -1 if capacity else at
        if buffer is None:
            buffer = ffi.from_buffer(data)
        n = size - at if size - at < capacity else capacity
        pushed = lib.pn_transport_push(impl, buffer + at, n)
        if pushed != n:
            if pushed < 0:
                raise_proton_error(transport, pushed)
            raise OverflowError(f"unable to process all bytes: {pushed}, {n}")
        at += n
    return at


def transport_drain(transport: Any, out: bytearray) -> int:
    """Append all of ``transport``'s pending output to ``out``; then its ``pending()``:
    0 when it has no more for now, negative once its head is closed (``Transport.pending``,
    ``peek`` and ``pop``, without their wrappers and with one copy of the output less).
    Raises proton's exception for an error other than end of stream."""
    impl = transport._impl
    pending = lib.pn_transport_pending(impl)
    while pending > 0:
        chunk = bytearray(pending)
        got = lib.pn_transport_peek(impl, ffi.from_buffer(chunk), pending)
        if got < 0:
            raise_proton_error(transport, got)
        out += chunk
        lib.pn_transport_pop(impl, pending)
        pending = lib.pn_transport_pending(impl)
    if pending < PN_EOS:
        raise_proton_error(transport, pending)
    return pending


def transport_capacity(transport: Any) -> int:
    """``Transport.capacity()``: room for input in octets, negative once it takes no more."""
    capacity = lib.pn_transport_capacity(transport._impl)
    if capacity < PN_EOS:
        raise_proton_error(transport, capacity)
    return capacity


def raise_proton_error(endpoint: Any, code: int) -> NoReturn:
    """Raise proton's own exception for the negative result ``code`` of a C call on
    ``endpoint`` (a ``Link``: ``LinkException`` naming the error; a ``Transport``:
    ``TransportException`` or the one its number names)."""
    endpoint._check(code)
    raise AssertionError(f"proton accepted {code} as a result")  # not negative: a caller bug


#: octets of body up to which ``send_parts`` copies it behind its header: one
#: ``pn_link_send`` instead of two (a send, advance and settle measured 1.42 -> 1.16 us
#: at 100 B, 1.51 -> 1.32 at 4 KiB, 1.50 -> 1.45 at 8 KiB; 1.55 -> 1.66 at 16 KiB)
JOIN_MAX = 8192


def send_parts(link_impl: Any, header: bytes, data: bytes, rest: int) -> int:
    """Send ``header`` then ``data[rest:]`` (``payloads.delivery_parts``) on the C link
    ``link_impl``, into its current delivery; the octets sent, or proton's negative error
    code. A second part longer than ``JOIN_MAX`` is a pointer into ``data``, never a copy; a
    shorter one is copied behind ``header`` and sent in the same call (a second
    ``pn_link_send`` costs more than the copy)."""
    if not header:
        return lib.pn_link_send(link_impl, ffi.from_buffer(data), len(data))
    if len(data) - rest <= JOIN_MAX:
        joined = header + data[rest:]
        return lib.pn_link_send(link_impl, ffi.from_buffer(joined), len(joined))
    sent = lib.pn_link_send(link_impl, ffi.from_buffer(header), len(header))
    if sent < 0:
        return sent
    body = lib.pn_link_send(link_impl, ffi.from_buffer(data) + rest, len(data) - rest)
    return body if body < 0 else sent + body
