"""The per-message cost meter: Python calls and held memory blocks per message, counted.

Wall-clock rates on a shared 2-core machine move by 10-30 % from run to run, so they can
not guard anything. This meter counts instead, in one process, with the engines fed
bytes and no sockets:

* **calls**: Python function calls per message, counted by a profile hook
  (``sys.setprofile``): its ``'call'`` events only (Python functions, generator resumes
  included; builtins and C functions, the ``'c_call'`` events, are not counted). The
  hook is on only while the gateway side works (each engine driven as the edge drives
  it: per read ``tick``, ``receive_data``, ``tick``, ``data_to_send``; a flush when an
  engine asks; the store's commit reports; the ledger's take): the
  clients that drive the paths (pre-encoded 0-9-1 frames, a proton client transport for
  1.0) are outside it.
* **bytecodes**: Python bytecodes run per message (a trace hook with ``f_trace_opcodes``,
  in a batch of its own after the others). Why beside the calls: a call inlined, or a
  ledger row written out at its call site, lowers the calls and not the work; a path can
  make fewer calls and run more code (issue 43: W4 through a backlog, 21 % fewer calls
  than 446005f and 12 % more bytecodes, and 5-11 % slower in the bench). The figure
  depends on the interpreter's version, as the calls do.
* **blocks**: memory blocks held per message in flight, from ``tracemalloc``: at the
  point of a measured batch where its messages are all inside the gateway (published,
  and delivered but not yet settled; queued in an outbox for forwarding), the blocks
  allocated since the batch began and still alive whose traceback passes through the
  gateway's packages (``gateway/``, ``translators/``, ``addressing/``), divided by the
  batch's messages. (``tracemalloc`` sees live blocks, not freed ones, so a block
  allocated and dropped within a message shows in ``calls``, not here.)

Counts are deterministic: each path runs in a process of its own, forked before any
path ran (so module-level caches start the same whatever ran before), and is warmed up
(caches, first-use allocations) with the same traffic first; the cyclic collector is off
while counting, the hash seed is fixed (the script re-executes itself with
``PYTHONHASHSEED=0``), and each measured batch is the same sequence of bytes. A path's figure is its batch's count divided by the
batch's messages.

Paths (each message 100 B or 4 KiB of body; the 0-9-1 consumer has prefetch 300 and acks
with ``multiple`` every 10; the 1.0 receiver has credit 300, tops it up below half and
accepts each delivery; input arrives 10 messages per read):

=========  ==========================================================================
W1         0-9-1 publish -> queue -> 1.0 receiver
W1c        the same with publisher confirms
W2         1.0 sender (pre-settled) -> queue -> 0-9-1 consumer
W2u        the same, the sender's transfers unsettled (accepted by the gateway)
W1-backlog, W4-backlog  W1 and W4 (and W4u) as the bench's unpaced runs meet them: the queue holds
           a backlog, so a publish goes to the ready list and a delivery leaves from it
           when the receiver gives credit (``BacklogPath``); the rows above count a
           consumer with credit waiting for each message
W3         0-9-1 -> 0-9-1
W4         1.0 (pre-settled) -> 1.0
W4u        the same, the sender's transfers unsettled: the gateway's dispositions go back
           to it, and it settles each transfer on its outcome, as the C load generator's
           ``--unsettled`` sender does (100 B, and through a backlog: ``W4u-100B-backlog``)
durable    0-9-1 persistent publish with confirms -> durable queue (SQLite store) ->
           0-9-1 consumer; the confirms wait for the store's commit
fwd-send   the sending gateway of a forwarded message: 0-9-1 persistent publish with
           confirms to ``fwd@org-b`` -> outbox -> the outbound 1.0 link -> settled
fwd-send-091  the same with org-b as a remote of ``kind: amqp091``: the outbox -> our
           0-9-1 client publishing with confirms to org-b's 0-9-1 engine -> confirmed
fwd-recv   the receiving gateway: ``amqp$transfer`` takes the forwarded transfer ->
           durable queue ``fwd`` -> 0-9-1 consumer
mgmt       one ``GET /api/queues`` of the management API over 1,000 queues (per queue)
=========  ==========================================================================

Run: ``.venv/bin/python bench/hotpath.py [--paths W3-100B,W4-100B] [--json FILE]
[--tree DIR] [--functions N]``. ``--functions N`` lists each path's N most called
functions and the N that run the most bytecodes. ``--tree`` measures another checkout (e.g. a worktree of an older
commit): its packages come first on ``sys.path``, and ``bench/hotpath_builds.py``
bridges the few constructor differences. ``tests/bench/test_hotpath_budget.py`` checks
the counts against ``bench/hotpath_budget.json``.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: the measured batch of every message path, and the warm-up before it
BATCH = 50
WARMUP_BATCHES = 1
CHUNK = 10           # messages per read of input, and per multiple-ack
PREFETCH = 300       # 0-9-1 prefetch and 1.0 credit of the consumers
BACKLOG = 300        # messages a backlog path's queue holds before each batch
MGMT_QUEUES = 1000
SIZES = {"100B": 100, "4KiB": 4096}
GATEWAY_PARTS = ("*/gateway/*", "*/translators/*", "*/addressing/*")
COMMIT_THREAD = "*/gateway/store/commit_thread.py"
TRACE_DEPTH = 16


# --------------------------------------------------------------------------- the meter
def _function_name(code: Any) -> str:
    """``file:line qualname`` of a code object, the file relative to the checkout."""
    return f"{code.co_filename.replace(str(ROOT) + '/', '')}:{code.co_firstlineno} {code.co_qualname}"


class Meter:
    """Counts profile events while on; ``tracemalloc`` blocks at ``snapshot_held``."""

    def __init__(self) -> None:
        self.calls = 0
        self.c_calls = 0
        self.on = False
        #: Python bytecodes run, counted instead of calls while ``counting_bytecodes``
        self.bytecodes = 0
        self.counting_bytecodes = False
        self._held_base: Optional[int] = None
        self.held = 0
        #: calls by function (``--functions``; None: not counted)
        self.functions: Optional[Counter] = None
        #: bytecodes by function (``--functions``; None: not counted)
        self.function_bytecodes: Optional[Counter] = None

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            self.calls += 1
            if self.functions is not None:
                self.functions[_function_name(frame.f_code)] += 1
        elif event == "c_call":
            self.c_calls += 1

    def _trace(self, frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        return self._opcode if self.function_bytecodes is None else self._opcode_by_function

    def _opcode(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode":
            self.bytecodes += 1
        return self._opcode

    def _opcode_by_function(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode":
            self.bytecodes += 1
            self.function_bytecodes[_function_name(frame.f_code)] += 1
        return self._opcode_by_function

    def start(self) -> None:
        if self.counting_bytecodes:
            sys.settrace(self._trace)
        else:
            sys.setprofile(self._hook)
        self.on = True

    def stop(self) -> None:
        sys.setprofile(None)
        sys.settrace(None)
        self.on = False

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with the meter on while it runs (nested calls stay counted once)."""
        def metered(*args: Any, **kwargs: Any) -> Any:
            if self.on:
                return fn(*args, **kwargs)
            self.start()
            try:
                return fn(*args, **kwargs)
            finally:
                sys.setprofile(None)  # (not self.stop: its call would be counted)
                sys.settrace(None)
                self.on = False
        return metered

    def reset(self) -> None:
        self.calls = self.c_calls = self.bytecodes = 0
        if self.functions is not None:
            self.functions.clear()
        if self.function_bytecodes is not None:
            self.function_bytecodes.clear()

    # -- memory held in flight ------------------------------------------------------------
    def begin_batch(self, tracing: bool) -> None:
        self.held = 0
        self._held_base = None
        if tracing:
            tracemalloc.clear_traces()
            self._held_base = 0

    def snapshot_held(self) -> None:
        """Count the gateway's blocks allocated since the batch began and still alive."""
        if self._held_base is None:
            return
        # the store's commit thread runs beside the meter: its blocks are not a message's
        filters = [tracemalloc.Filter(True, part, all_frames=True) for part in GATEWAY_PARTS]
        filters.append(tracemalloc.Filter(False, COMMIT_THREAD, all_frames=True))
        snap = tracemalloc.take_snapshot().filter_traces(filters)
        self.held = sum(stat.count for stat in snap.statistics("filename"))



class Edge:
    """What ``gateway/edge/engine_protocol.py`` does with an engine, without Twisted, the
    meter on: each read is ``tick``, ``receive_data``, ``tick``, ``data_to_send``; output
    that appears outside a read (``on_output``: another connection's publish delivered
    here) asks for a flush, ``tick`` and ``data_to_send`` on the loop's next turn."""

    def __init__(self, engine: Any, meter: Meter) -> None:
        self.engine = engine
        self.meter = meter
        self.flush_wanted = False
        engine.on_output = self._request_flush

    def _request_flush(self) -> None:
        self.flush_wanted = True

    def data_received(self, data: bytes) -> bytes:
        engine, meter = self.engine, self.meter
        meter.start()
        try:
            engine.tick(0.0)
            engine.receive_data(data)
            engine.tick(0.0)
            return engine.data_to_send()
        finally:
            sys.setprofile(None)
            sys.settrace(None)
            meter.on = False

    def flush(self) -> bytes:
        self.flush_wanted = False
        engine, meter = self.engine, self.meter
        meter.start()
        try:
            engine.tick(0.0)
            return engine.data_to_send()
        finally:
            sys.setprofile(None)
            sys.settrace(None)
            meter.on = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


def edge_pump(factory: Callable[[bytes], Any], meter: Meter, **options: Any) -> Any:
    """A proton client (``tests/support/amqp10_pump``) whose engine is driven as the edge
    drives it (:class:`Edge`): a round moves the client's output in as one read, or
    flushes the engine when it asked; until nothing moves."""
    from tests.support.amqp10_pump import Amqp10Pump  # noqa: PLC0415

    class EdgePump(Amqp10Pump):
        def pump(self, max_rounds: int = 10000) -> None:
            for _ in range(max_rounds):
                out = self._client_output()
                if out and self.engine is None:
                    self.engine = Edge(self.engine_factory(out[:8]), meter)
                    out = out[8:]
                    back = self.engine.flush() if not out else b""
                elif self.engine is None:
                    return
                else:
                    back = b""
                if out:
                    back += self.engine.data_received(out)
                elif self.engine.flush_wanted or self._backlog:
                    back += self.engine.flush()
                back = self._backlog + back
                self._backlog = self._push_client(back) if back else b""
                self._drain_events()
                if not out and not back:
                    return
            raise AssertionError("pump did not settle")

    return EdgePump(factory, **options)


# --------------------------------------------------------------------------- the paths
class Path_:
    """One metered path: ``setup()``, then ``batch(n, meter)`` runs ``n`` messages."""

    name = ""
    messages = BATCH

    def setup(self, meter: Meter) -> None:
        raise NotImplementedError

    def batch(self, n: int, meter: Meter) -> None:
        raise NotImplementedError

    def directory(self, prefix: str) -> str:
        """A temporary directory (a store's), removed by :meth:`close`."""
        import tempfile  # noqa: PLC0415
        made = tempfile.TemporaryDirectory(prefix=prefix)
        self.__dict__.setdefault("_dirs", []).append(made)
        return made.name

    def gateway(self, meter: Meter, *args: Any, **kwargs: Any) -> "Gateway":
        """A gateway whose store :meth:`close` closes."""
        made = Gateway(meter, *args, **kwargs)
        self.__dict__.setdefault("_gateways", []).append(made)
        return made

    def close(self) -> None:
        for made in self.__dict__.get("_gateways", ()):
            made.close_store()
        for made in self.__dict__.get("_dirs", ()):
            made.cleanup()


def _compat() -> Any:
    import hotpath_builds  # noqa: PLC0415 - bench/ is on sys.path when run as a script
    return hotpath_builds


class Gateway:
    """One gateway's model in this process: broker, users, ledger, engines' factories,
    optionally a SQLite store and ``amqp$transfer``."""

    def __init__(self, meter: Meter, container: str = "hotpath", store_dir: Optional[str] = None,
                 remotes: tuple = (), kind: str = "gateway") -> None:
        compat = _compat()
        self.meter = meter
        self.container = container
        self.ledger, self.take_ledger = compat.make_ledger(container)
        self.loop = compat.Loop()
        self.store = compat.make_store(store_dir, self.loop) if store_dir else None
        self.broker = compat.make_broker(container, self.ledger, self.store)
        self.auth = compat.make_authenticator()
        self.transfer = compat.make_transfer(self.broker, remotes, self.loop, kind)
        self.channel_factory = compat.channel_factory(self.broker)
        self.amqp10_factory = compat.amqp10_factory(self.broker, self.auth, container)

    def amqp091(self, frames: bytes = b"") -> Any:
        from gateway.amqp091 import methods as m  # noqa: PLC0415
        from gateway.amqp091.frames import encode_method_frame  # noqa: PLC0415
        conn = _compat().amqp091_connection(self.broker, self.auth, self.channel_factory)
        caps = {"consumer_cancel_notify": True, "connection.blocked": True, "publisher_confirms": True}
        conn.receive_data(encode_method_frame(0, m.ConnectionStartOk(
            client_properties={"capabilities": caps}, mechanism="PLAIN", response=b"\0guest\0guest")))
        conn.receive_data(encode_method_frame(0, m.ConnectionTuneOk(channel_max=2047, frame_max=131072,
                                                                    heartbeat=0))
                          + encode_method_frame(0, m.ConnectionOpen(virtual_host="/"))
                          + encode_method_frame(1, m.ChannelOpen()) + frames)
        conn.data_to_send()
        return Edge(conn, self.meter)

    def amqp10(self, **options: Any) -> Any:
        return edge_pump(self.amqp10_factory, self.meter, **options).open()

    def settle_store(self) -> None:
        """What the store driver does on the next reactor turn: hand the open generation to
        the commit thread, then run its reports (the wait for them is not counted)."""
        if self.store is None:
            return
        self.meter.wrap(self.store.flush)(0.0)
        self.loop.run_reports(self.meter)

    def drain_ledger(self) -> None:
        self.meter.wrap(self.take_ledger)()

    def close_store(self) -> None:
        _compat().close_store(self.store)


def _methods() -> tuple[Any, Any, Any, Any]:
    from gateway.amqp091 import methods as m  # noqa: PLC0415
    from gateway.amqp091.content import encode_properties  # noqa: PLC0415
    from gateway.amqp091.frames import encode_content_frames, encode_method_frame  # noqa: PLC0415
    from translators.basic_properties import BasicProperties  # noqa: PLC0415
    return m, encode_properties, encode_content_frames, encode_method_frame


def _publishes(exchange: str, key: str, size: int, count: int, persistent: bool = False) -> bytes:
    m, encode_properties, encode_content_frames, encode_method_frame = _methods()
    props = encode_properties(_compat().basic_properties(
        content_type="application/octet-stream", delivery_mode=2 if persistent else 1,
        message_id="m", headers={"k": "v"}))
    one = encode_method_frame(1, m.BasicPublish(exchange=exchange, routing_key=key)) + \
        encode_content_frames(1, 60, props, b"x" * size, 131072)
    return one * count


def _ack(tag: int) -> bytes:
    m, _, _, encode_method_frame = _methods()
    return encode_method_frame(1, m.BasicAck(delivery_tag=tag, multiple=True))


def _declare(queue: str, durable: bool = False) -> bytes:
    m, _, _, encode_method_frame = _methods()
    return encode_method_frame(1, m.QueueDeclare(queue=queue, durable=durable))


def _consume(queue: str) -> bytes:
    m, _, _, encode_method_frame = _methods()
    return (encode_method_frame(1, m.BasicQos(prefetch_count=PREFETCH))
            + encode_method_frame(1, m.BasicConsume(queue=queue, consumer_tag="c")))


def _confirm_select() -> bytes:
    m, _, _, encode_method_frame = _methods()
    return encode_method_frame(1, m.ConfirmSelect())


class _Amqp091Consumer:
    """A 0-9-1 consumer connection: reads its output, acks every ``CHUNK``."""

    def __init__(self, gateway: Gateway, queue: str, durable: bool = False) -> None:
        self.conn = gateway.amqp091(_declare(queue, durable) + _consume(queue))
        self.tag = 0

    def take(self, n: int) -> None:
        out = self.conn.flush() if self.conn.flush_wanted else b""
        assert out, "no deliveries"
        acks = b""
        for _ in range(n // CHUNK):
            self.tag += CHUNK
            acks += _ack(self.tag)
        self.conn.data_received(acks)


class _Amqp10Receiver:
    """A 1.0 receiving client: credit 300, topped up below half, accepts each delivery."""

    def __init__(self, gateway: Gateway, address: str, credit: int = PREFETCH) -> None:
        self.pump = gateway.amqp10()
        self.link = self.pump.receiver(address, credit=credit)
        self.received = 0

    def take(self, n: int, credit_each: int = 0) -> None:
        """Accept ``n`` deliveries; with ``credit_each``, give that much credit before each
        read instead of topping it up to ``PREFETCH`` below half."""
        from proton import Delivery  # noqa: PLC0415
        got = 0
        while got < n:
            if credit_each:
                self.link.flow(credit_each)
            self.pump.pump()
            taken = self.pump.take(self.link)
            if not taken:
                raise AssertionError(f"1.0 receiver got {got} of {n}")
            for delivery, _data in taken:
                delivery.update(Delivery.ACCEPTED)
                delivery.settle()
                got += 1
            if not credit_each and self.link.credit < PREFETCH // 2:
                self.link.flow(PREFETCH - self.link.credit)
        self.pump.pump()
        self.received += got


class _Amqp10Sender:
    """A 1.0 sending client: ``CHUNK`` transfers per pump, pre-settled or unsettled."""

    def __init__(self, gateway: Gateway, address: str, settled: bool) -> None:
        from tests.support.amqp10_pump import encode_message  # noqa: PLC0415
        self.pump = gateway.amqp10()
        self.link = self.pump.sender(address, settled=settled)
        self.settled = settled
        self.encode = encode_message
        self.payload = b""
        self.sent = 0
        self.unsettled: list = []

    def body(self, size: int) -> None:
        self.payload = self.encode(b"x" * size, inferred=True, id="m", properties={"k": "v"},
                                   durable=False)

    def send(self, n: int) -> None:
        if self.link.credit < n:
            self.pump.pump()
        assert self.link.credit >= n, f"the gateway gave {self.link.credit} credit, {n} wanted"
        for _ in range(n):
            delivery = self.link.delivery(b"%d" % self.sent)
            self.link.send(self.payload)
            self.link.advance()
            if self.settled:
                delivery.settle()
            else:
                self.unsettled.append(delivery)
            self.sent += 1
        self.pump.pump()

    def settle_outcomes(self) -> None:
        keep = []
        for delivery in self.unsettled:
            if delivery.remote_state:
                delivery.settle()
            else:
                keep.append(delivery)
        self.unsettled = keep
        self.pump.pump()


class FlowPath(Path_):
    """W1..W4, W1c, W2u."""

    def __init__(self, name: str, producer: str, consumer: str, size: int, *,
                 confirms: bool = False, settled: bool = True) -> None:
        self.name = name
        self.producer_kind, self.consumer_kind = producer, consumer
        self.size = size
        self.confirms = confirms
        self.settled = settled

    def setup(self, meter: Meter) -> None:
        self.g = g = self.gateway(meter)
        admin = g.amqp091(_declare("q"))
        self.consumer = (_Amqp091Consumer(g, "q") if self.consumer_kind == "091"
                         else _Amqp10Receiver(g, "/queue/q"))
        if self.producer_kind == "091":
            self.producer = g.amqp091(_confirm_select() if self.confirms else b"")
            self.frames = _publishes("", "q", self.size, CHUNK)
        else:
            self.producer = _Amqp10Sender(g, "/queue/q", self.settled)
            self.producer.body(self.size)

    def batch(self, n: int, meter: Meter) -> None:
        held_at = n - CHUNK  # the last chunk stays unsettled until the snapshot
        done = 0
        while done < n:
            if self.producer_kind == "091":
                self.producer.data_received(self.frames)
            else:
                self.producer.send(CHUNK)
            done += CHUNK
            if done > held_at:
                meter.snapshot_held()
            self.consumer.take(CHUNK)
            if self.producer_kind == "10" and not self.settled:
                self.producer.settle_outcomes()
        self.g.drain_ledger()


class BacklogPath(Path_):
    """W1 or W4 as the bench's unpaced runs meet them: the queue holds a backlog (tens of
    thousands of messages there), so a publish goes to the ready list (the consumer has
    no credit left) and a delivery leaves from it when the receiver's credit comes.
    ``FlowPath`` counts the other way, a consumer with credit waiting for each message.
    The receiver keeps ``BACKLOG`` messages behind: each batch publishes its messages,
    then gives credit ``CHUNK`` at a time and accepts what comes, the oldest first."""

    def __init__(self, name: str, producer: str, size: int, *, settled: bool = True) -> None:
        self.name = name
        self.producer_kind = producer
        self.size = size
        self.settled = settled

    def setup(self, meter: Meter) -> None:
        self.g = g = self.gateway(meter)
        g.amqp091(_declare("q"))
        self.consumer = _Amqp10Receiver(g, "/queue/q", credit=0)
        self.consumer.pump.pump()
        if self.producer_kind == "091":
            producer = g.amqp091(b"")
            frames = _publishes("", "q", self.size, CHUNK)
            self.publish = lambda: producer.data_received(frames)
        else:
            sender = _Amqp10Sender(g, "/queue/q", settled=self.settled)
            sender.body(self.size)

            def publish() -> None:
                sender.send(CHUNK)
                if not self.settled:  # as the C sender: settle each transfer on its outcome
                    sender.settle_outcomes()
            self.publish = publish
        for _ in range(BACKLOG // CHUNK):
            self.publish()

    def batch(self, n: int, meter: Meter) -> None:
        done = 0
        while done < n:
            self.publish()
            done += CHUNK
        meter.snapshot_held()
        self.consumer.take(n, credit_each=CHUNK)
        self.g.drain_ledger()


class DurablePath(Path_):
    """A persistent publish with confirms to a durable queue, consumed over 0-9-1."""

    name = "durable"

    def __init__(self, size: int) -> None:
        self.size = size

    def setup(self, meter: Meter) -> None:
        self.g = g = self.gateway(meter, store_dir=self.directory("hotpath-"))
        self.consumer = _Amqp091Consumer(g, "dq", durable=True)
        g.settle_store()
        self.producer = g.amqp091(_confirm_select())
        self.frames = _publishes("", "dq", self.size, CHUNK, persistent=True)

    def batch(self, n: int, meter: Meter) -> None:
        done = 0
        while done < n:
            self.producer.data_received(self.frames)
            self.g.settle_store()          # the commit, then the confirms
            self.producer.flush()
            done += CHUNK
            if done == n:
                meter.snapshot_held()
            self.consumer.take(CHUNK)
            self.g.settle_store()          # the acks' deletes
        self.g.drain_ledger()


class ForwardPaths(Path_):
    """org-a forwards to org-b over an in-memory 1.0 connection; ``side`` says which
    gateway the meter counts."""

    def __init__(self, side: str, size: int, kind: str = "gateway") -> None:
        self.side = side
        self.kind = kind
        self.name = f"fwd-{side}" + ("-091" if kind == "amqp091" else "")
        self.size = size

    def setup(self, meter: Meter) -> None:
        compat = _compat()
        idle = Meter()  # the other gateway runs unmetered
        a_meter, b_meter = (meter, idle) if self.side == "send" else (idle, meter)
        self.a = self.gateway(a_meter, "org-a", self.directory("hotpath-a-"), remotes=("org-b",),
                              kind=self.kind)
        self.b = self.gateway(b_meter, "org-b", self.directory("hotpath-b-"))
        self.consumer = _Amqp091Consumer(self.b, "fwd", durable=True)
        self.b.settle_store()
        self.link = compat.Link(self.a, self.b, "org-b")
        self.producer = self.a.amqp091(_confirm_select())
        self.frames = _publishes("", "fwd@org-b", self.size, CHUNK, persistent=True)
        self.link.pump()

    def batch(self, n: int, meter: Meter) -> None:
        done = 0
        while done < n:
            self.producer.data_received(self.frames)
            self.a.settle_store()      # the outbox rows committed: confirms, then sending
            self.producer.flush()
            self.link.pump()           # the transfers reach org-b
            self.b.settle_store()      # org-b's queue writes committed: accepted
            self.link.pump()           # the outcomes reach org-a
            self.a.settle_store()      # org-a's outbox deletes
            done += CHUNK
            if done == n:
                meter.snapshot_held()
            self.consumer.take(CHUNK)
            self.b.settle_store()
        self.a.drain_ledger()
        self.b.drain_ledger()


class ManagementScrape(Path_):
    """``GET /api/queues`` over ``MGMT_QUEUES`` queues; counted per queue."""

    name = "mgmt"
    messages = MGMT_QUEUES

    def setup(self, meter: Meter) -> None:
        g = self.gateway(meter)
        vhost = g.broker.vhost("/")
        for i in range(MGMT_QUEUES):
            vhost.declare_queue(f"q{i:04d}")
        self.scrape = _compat().management_scrape(g.broker, g.auth)

    def batch(self, n: int, meter: Meter) -> None:
        body = meter.wrap(self.scrape)()
        meter.snapshot_held()
        assert len(body) == MGMT_QUEUES, len(body)


def all_paths() -> list[Path_]:
    out: list[Path_] = []
    for label, size in SIZES.items():
        out += [
            FlowPath(f"W1-{label}", "091", "10", size),
            FlowPath(f"W2-{label}", "10", "091", size),
            FlowPath(f"W3-{label}", "091", "091", size),
            FlowPath(f"W4-{label}", "10", "10", size),
            FlowPath(f"W1c-{label}", "091", "10", size, confirms=True),
            FlowPath(f"W2u-{label}", "10", "091", size, settled=False),
        ]
    out += [FlowPath("W4u-100B", "10", "10", 100, settled=False)]
    out += [BacklogPath("W1-100B-backlog", "091", 100), BacklogPath("W4-100B-backlog", "10", 100),
            BacklogPath("W4u-100B-backlog", "10", 100, settled=False)]
    out += [DurablePath(100), ForwardPaths("send", 100), ForwardPaths("recv", 100),
            ForwardPaths("send", 100, kind="amqp091"), ManagementScrape()]
    return out


# --------------------------------------------------------------------------- running
def measure(path: Path_, functions: bool = False) -> dict[str, Any]:
    """Warm ``path`` up, then count one batch; ``{"calls", "c_calls", "blocks"}`` per message
    (with ``functions``, also ``"functions"``: calls per message by function)."""
    meter = Meter()
    gc.collect()
    gc.disable()
    try:
        path.setup(meter)
        for _ in range(WARMUP_BATCHES):
            meter.begin_batch(tracing=False)
            path.batch(path.messages, meter)
        gc.collect()
        # first the memory held (tracing slows every allocation), then the calls
        tracemalloc.start(TRACE_DEPTH)
        try:
            meter.begin_batch(tracing=True)
            path.batch(path.messages, meter)
        finally:
            tracemalloc.stop()
        held = meter.held
        gc.collect()
        if functions:
            meter.functions = Counter()
        meter.reset()
        meter.begin_batch(tracing=False)
        path.batch(path.messages, meter)
        n = path.messages
        result: dict[str, Any] = {"calls": round(meter.calls / n, 2),
                                  "c_calls": round(meter.c_calls / n, 2), "blocks": round(held / n, 2)}
        if functions:
            result["functions"] = {name: round(count / n, 2)
                                   for name, count in meter.functions.most_common()}
        # last, the bytecodes (the passes before are as they were without this one)
        meter.functions = None
        if functions:
            meter.function_bytecodes = Counter()
        meter.reset()
        meter.counting_bytecodes = True
        meter.begin_batch(tracing=False)
        path.batch(path.messages, meter)
        result["bytecodes"] = round(meter.bytecodes / n, 1)
        if functions:
            result["function_bytecodes"] = {name: round(count / n, 1)
                                            for name, count in meter.function_bytecodes.most_common()}
        return result
    finally:
        sys.setprofile(None)
        sys.settrace(None)
        path.close()
        gc.enable()


def select(names: Optional[str]) -> list[Path_]:
    paths = all_paths()
    if not names:
        return paths
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    known = {p.name: p for p in paths}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise SystemExit(f"unknown path(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in wanted]


def run(names: Optional[str] = None, functions: bool = False) -> dict[str, dict[str, Any]]:
    """Each path measured in a child process forked from this one before any path ran.
    Why: module-level caches (decoded 1.0 summaries, basic.publish methods, property
    lists ...) that one path fills and clears changed another path's count with the order
    of the run (``fwd-recv`` read 313.52 alone and 276.52 after ``fwd-send``); a fork
    gives every path the same starting state."""
    results = {}
    for path in select(names):
        results[path.name] = _in_child(path, functions)
    return results


def _in_child(path: Path_, functions: bool) -> dict[str, Any]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: measure, hand the result back, leave at once
        code = 0
        try:
            os.close(read_end)
            try:
                result = measure(path, functions)
            except _compat().NotInThisTree as exc:
                result = {"missing": str(exc)}
            with os.fdopen(write_end, "w") as out:
                json.dump(result, out)
        except BaseException:  # noqa: BLE001 - reported through the exit status
            import traceback  # noqa: PLC0415
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as src:
        text = src.read()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0 or not text:
        raise SystemExit(f"measuring {path.name} failed (see above)")
    return json.loads(text)


def _reexec_with_fixed_hash_seed(argv: list[str]) -> None:
    """Sets and dicts of strings iterate in hash order: fix the seed so every run is the
    same sequence of calls."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = dict(os.environ, PYTHONHASHSEED="0")
        os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *argv], env)


def _use_tree(tree: Optional[str]) -> None:
    root = str(Path(tree).resolve()) if tree else str(ROOT)
    sys.path[:0] = [root, str(HERE)]


def format_table(results: dict[str, dict[str, Any]], budget: Optional[dict] = None) -> str:
    lines = [f"{'path':<16} {'calls/msg':>10} {'c_calls/msg':>12} {'blocks/msg':>11} {'bytecodes/msg':>14}"
             + ("  budget calls/blocks" if budget else "")]
    for name, r in results.items():
        if "missing" in r:
            lines.append(f"{name:<16} {'-':>10} {'-':>12} {'-':>11} {'-':>14}  ({r['missing']})")
            continue
        line = (f"{name:<16} {r['calls']:>10.2f} {r['c_calls']:>12.2f} {r['blocks']:>11.2f}"
                f" {r.get('bytecodes', 0):>14.1f}")
        if budget and name in budget:
            b = budget[name]
            line += f"  {b.get('calls', '-')}/{b.get('blocks', '-')}"
        lines.append(line)
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", help="comma-separated path names (default: all)")
    parser.add_argument("--json", help="write the counts here as JSON")
    parser.add_argument("--tree", help="measure this checkout instead of the one holding bench/")
    parser.add_argument("--functions", type=int, default=0, metavar="N",
                        help="also list each path's N most called functions (calls per message)")
    args = parser.parse_args(argv)
    _reexec_with_fixed_hash_seed(argv)
    _use_tree(args.tree)
    results = run(args.paths, functions=bool(args.functions))
    print(format_table(results))
    for name, r in results.items():
        if "functions" in r:
            print(f"\n{name}: calls per message by function")
            for function, count in list(r.pop("functions").items())[:args.functions]:
                print(f"{count:>8.2f}  {function}")
        if "function_bytecodes" in r:
            print(f"\n{name}: bytecodes per message by function")
            for function, count in list(r.pop("function_bytecodes").items())[:args.functions]:
                print(f"{count:>8.1f}  {function}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
