"""Cost of the message ledger per message, and the encodings it was chosen among.

1. The ledger's calls for one 0-9-1 message (the message record with its routing
   verdict, a delivery, a settlement: what the hot path pays), ``take_frame`` (msgpack
   frames: what the event loop pays to ship them to the writer process), and the
   writer process's share: a ``FrameReader`` turning the frames into JSON Lines, and
   ``LedgerWriter.add`` + ``flush``, in microseconds a message.
2. ``--formats``: the same records (each message's three, made beforehand) encoded by
   each candidate: a msgpack frame (what the gateway ships), JSON Lines of arrays (the
   segments' format: what the gateway encoded itself before), JSON objects with field
   names, marshal (what the v1 gateway shipped, its writer then encoding them again in
   Python), and pyarrow's Arrow IPC stream (columns per record kind; needs the
   ``pipeline`` extra). Microseconds and bytes a message.

The in-memory 0-9-1 loop with the ledger off and on is ``bench/amqp091_bench.py --ledger``.
Run: ``.venv/bin/python bench/ledger_bench.py [--messages N] [--formats]``
"""
from __future__ import annotations

import argparse
import gc
import io
import marshal
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.ledger import EventKind, Ledger, LedgerWriter  # noqa: E402
from gateway.ledger.encoding import FrameReader  # noqa: E402

T0 = 1_700_000_000.0
_ROUTED = EventKind.ROUTED


def _best(fn: Callable[[], Any], repeat: int = 5) -> tuple[float, Any]:
    """The fastest of ``repeat`` runs (seconds) and the last result: a busy machine only
    ever makes a run slower."""
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def _messages(n: int) -> list[tuple[SimpleNamespace, SimpleNamespace]]:
    queue = SimpleNamespace(name="bench", routed_to=("bench",), storage=None)
    out = []
    for i in range(n):
        m = SimpleNamespace(gateway_id=1_000_000 + i, exchange="", routing_key="bench",
                            message_id=None, correlation_id=None, size=100, headers=None, durable=False,
                            created_at=T0 + i * 1e-4)
        out.append((m, SimpleNamespace(message=m, delivery_count=0, queue=queue)))
    return out


def _record(ledger: Ledger, messages: list, pub: int, sub: int) -> None:
    received, delivered, settled = ledger.received, ledger.delivered, ledger.settled
    for m, entry in messages:
        now = m.created_at
        received(now, pub, m, _ROUTED, (entry.queue,))
        delivered(now, sub, entry, "bench")
        settled(now + 0.001, sub, entry, "bench", "accepted")


def per_message_cost(directory: str, n: int) -> dict[str, float]:
    messages = _messages(n)
    ledger = Ledger(container_id="bench")
    pub = ledger.context(T0, "/", "guest", "0-9-1", "c1", 1)
    sub = ledger.context(T0, "/", "guest", "0-9-1", "c2", 1)

    def record() -> None:
        ledger.records.clear()
        _record(ledger, messages, pub, sub)

    def take() -> bytes:
        _record(ledger, messages, pub, sub)
        t = time.perf_counter()
        out = b"".join(iter(ledger.take_frame, b""))
        take.seconds = time.perf_counter() - t  # type: ignore[attr-defined]
        return out

    recorded, _ = _best(record)
    ledger.records.clear()
    best_take, data = float("inf"), b""
    for _ in range(5):
        data = take()
        best_take = min(best_take, take.seconds)  # type: ignore[attr-defined]
    read, lines = _best(lambda: b"".join(FrameReader().feed(data)))
    writer = LedgerWriter(directory, container_id="bench")

    def write() -> None:
        writer.add(lines)
        writer.flush(T0)

    written, _ = _best(write)
    writer.close(T0)
    return {"record": recorded / n * 1e6, "take_frame": best_take / n * 1e6,
            "read": read / n * 1e6, "add+flush": written / n * 1e6, "bytes": len(data) / n,
            "line bytes": len(lines) / n}


def formats(n: int) -> dict[str, tuple[float, float]]:
    """(us to encode, bytes) a message, per candidate."""
    import msgspec

    from gateway.ledger.encoding import frame, json_lines
    from gateway.ledger.records import RECORDS

    messages = _messages(n)
    ledger = Ledger(container_id="bench")
    _record(ledger, messages, 1, 2)
    structs = list(ledger.records)
    rows = [(type(x).__struct_config__.tag,) + msgspec.structs.astuple(x) for x in structs]
    out: dict[str, tuple[float, float]] = {}
    seconds, data = _best(lambda: frame(structs))
    out["msgpack frame (shipped to the writer process)"] = (seconds / n * 1e6, len(data) / n)
    seconds, data = _best(lambda: json_lines(structs))
    out["JSON Lines of arrays (the segments' lines)"] = (seconds / n * 1e6, len(data) / n)
    objects = [{"k": x[0], **{f: v for (f, _), v in zip(RECORDS[x[0]], x[1:]) if v is not None}}
               for x in rows]
    seconds, data = _best(lambda: json_lines(objects))
    out["JSON objects with field names"] = (seconds / n * 1e6, len(data) / n)
    seconds, data = _best(lambda: marshal.dumps(rows, 4))
    out["marshal of tuples (v1's pipe, before its writer's JSON)"] = (seconds / n * 1e6, len(data) / n)
    try:
        import pyarrow as pa
    except ImportError:
        return out

    def arrow() -> bytes:
        sink = io.BytesIO()
        for tag in dict.fromkeys(r[0] for r in rows):
            columns = list(zip(*(r[1:] for r in rows if r[0] == tag)))
            arrays_ = [pa.array(c) for c in columns]
            batch = pa.RecordBatch.from_arrays(arrays_, names=[f"f{i}" for i in range(len(arrays_))])
            with pa.ipc.new_stream(sink, batch.schema) as stream:
                stream.write_batch(batch)
        return sink.getvalue()

    seconds, data = _best(arrow)
    out["pyarrow Arrow IPC (columns per kind)"] = (seconds / n * 1e6, len(data) / n)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=20_000)
    p.add_argument("--formats", action="store_true", help="compare the candidate encodings")
    args = p.parse_args(argv)
    directory = tempfile.mkdtemp(prefix="ledger-bench-")
    try:
        cost = per_message_cost(directory, args.messages)
        sys.stdout.write(
            f"a 0-9-1 message's records (message+routed, delivered, settled), us a message: "
            f"record {cost['record']:.2f}, take_frame {cost['take_frame']:.2f} "
            f"({cost['bytes']:.0f} bytes); writer process: frames to lines {cost['read']:.2f}, "
            f"add+flush {cost['add+flush']:.2f} ({cost['line bytes']:.0f} bytes)\n")
        if args.formats:
            for name, (us, size) in formats(args.messages).items():
                sys.stdout.write(f"  {name:58s} {us:6.2f} us  {size:6.0f} bytes a message\n")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
