"""One measured run of a workload against one target: the load generators' command lines,
a producer/consumer run (msgs/s, latency, CPU) and the idle-connection memory rows (W6).
"""
from __future__ import annotations

import json
import resource
import subprocess
import time
from typing import Optional

from bench.load_generators import GEN10, GEN091, GenProcess
from bench.report import Measurement
from bench.targets import Target
from bench.workloads import ACK_EVERY, CONFIRM_WINDOW, PREFETCH, ClientProtocol, Kind, Workload

SILENCE_TIMEOUT = 15.0   # a receiver gives up after this many seconds without a message


def _conn_args(target: Target, proto: ClientProtocol) -> list[str]:
    port = target.port091 if proto is ClientProtocol.AMQP091 else target.port10
    return ["--host", target.host, "--port", str(port), "--user", target.user,
            "--password", target.password]


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _queue_cmd(target: Target, mode: str, queue_name: str, durable: bool = False) -> Optional[dict]:
    if not target.port091:
        return None
    out = subprocess.run([GEN091, mode, *_conn_args(target, ClientProtocol.AMQP091), "--queue", queue_name,
                          *(["--durable"] if durable else [])],
                         capture_output=True, text=True, timeout=60)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"ok": False, "error": out.stderr.strip()[-300:]}


def _amqp10_address(w: Workload, queue_name: str) -> str:
    """``/queue/Q``; for a durable queue ``/amq/queue/Q``, which names the queue ``setup``
    declared (RabbitMQ's ``/queue/Q`` declares it again, non-durable: 406)."""
    return f"/amq/queue/{queue_name}" if w.durable else f"/queue/{queue_name}"


def _consumer_argv(target: Target, w: Workload, count: int, queue_name: str, prefix: str) -> list[str]:
    if w.consumer is ClientProtocol.AMQP10:
        return [GEN10, "recv", *_conn_args(target, w.consumer), "--address", _amqp10_address(w, queue_name),
                "--count", str(count), "--credit", str(PREFETCH), "--size", str(w.size),
                "--timeout", str(SILENCE_TIMEOUT)]
    argv = [GEN091, "recv", *_conn_args(target, w.consumer), "--count", str(count),
            "--prefetch", str(PREFETCH), "--ack-every", str(ACK_EVERY), "--timeout", str(SILENCE_TIMEOUT)]
    if w.kind is Kind.TOPIC:
        return argv + ["--exchange", "amq.topic", "--topics", str(w.topics), "--key-prefix", prefix,
                       "--subscribers", str(w.subscribers)]
    return argv + ["--queue", queue_name]


def producer_argv(target: Target, w: Workload, count: int, queue_name: str, prefix: str) -> list[str]:
    """The load generator's command line for ``w``'s producer of ``count`` messages (its
    rate, window and confirms as the workload row says: what the bench's tests check)."""
    if w.producer is ClientProtocol.AMQP10:
        argv = [GEN10, "send", *_conn_args(target, w.producer), "--address", _amqp10_address(w, queue_name),
                "--count", str(count), "--size", str(w.size)]
        argv += ["--durable"] if w.durable else []
        if w.unsettled:
            argv += ["--unsettled"] + (["--window", str(w.window)] if w.window else [])
        return argv + (["--rate", str(w.rate)] if w.rate else [])
    argv = [GEN091, "send", *_conn_args(target, w.producer), "--count", str(count), "--size", str(w.size)]
    if w.durable:
        argv += ["--durable"]
    if w.confirms:
        argv += ["--confirms", "--confirm-window", str(w.window or CONFIRM_WINDOW)]
    if w.rate:
        argv += ["--rate", str(w.rate)]
    if w.kind is Kind.TOPIC:
        return argv + ["--exchange", "amq.topic", "--topics", str(w.topics), "--key-prefix", prefix,
                       "--hot-topics", str(w.hot_topics), "--hot-share", str(w.hot_share)]
    return argv + ["--queue", queue_name]


def run_messages(target: Target, w: Workload, count: int, tag: str, round_no: int,
                 expected_seconds: float) -> Measurement:
    """One producer/consumer run; value = received / (last receipt - producer start)."""
    queue_name, prefix = f"bench-{tag}", f"{tag}."
    if w.kind is Kind.FLOW:
        setup = _queue_cmd(target, "setup", queue_name, w.durable)
        if setup is not None and not setup.get("ok"):
            return Measurement(w.key, target.name, round_no, 0.0, errors=1,
                               error=f"queue setup: {setup.get('error')}")
    cpu0, t0 = _children_cpu(), time.monotonic()
    consumer = GenProcess(_consumer_argv(target, w, count, queue_name, prefix))
    if consumer.wait_event("ready", 120) is None:
        rec = consumer.result(5)
        return Measurement(w.key, target.name, round_no, 0.0, errors=1,
                           error=f"consumer not ready: {rec.get('error', '')}")
    producer = GenProcess(producer_argv(target, w, count, queue_name, prefix))
    limit = max(120.0, 5 * expected_seconds)
    sent = producer.result(limit)
    got = consumer.result(limit)
    wall = time.monotonic() - t0
    cpu = _children_cpu() - cpu0
    if w.kind is Kind.FLOW:
        _queue_cmd(target, "delete", queue_name)
    received = int(got.get("received", 0))
    span = (got.get("t_last_ns", 0) - sent.get("t_start_ns", 0)) / 1e9
    rate = received / span if received and span > 0 else 0.0
    error = sent.get("error") or got.get("error") or ""
    return Measurement(w.key, target.name, round_no, rate, "msgs/s", got.get("p50_us"),
                       got.get("p99_us"), int(sent.get("sent", 0)), received,
                       int(sent.get("errors", 0)) + int(got.get("errors", 0)), error,
                       cpu / wall if wall > 0 else None, span)


def _vm_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def run_idle(target: Target, w: Workload, round_no: int, holders: list[GenProcess],
             settle: float = 3.0) -> Measurement:
    """Open w.connections more idle connections; value = VmRSS growth / connections, KiB.

    The generator holding them is appended to ``holders`` and left running: connections
    of earlier rounds stay open, so every round measures memory the broker has to take
    anew instead of reusing what the previous round freed.  The caller closes them.
    """
    assert target.pid is not None
    gen = GEN091 if w.producer is ClientProtocol.AMQP091 else GEN10
    before = _vm_rss_kib(target.pid)
    proc = GenProcess([gen, "idle", *_conn_args(target, w.producer), "--connections",
                       str(w.connections)], keep_stdin=True)
    holders.append(proc)
    ready = proc.wait_event("ready", 300)
    opened = int(ready.get("opened", 0)) if ready else 0
    error = (ready or {}).get("error", "") if opened == w.connections else \
        f"opened {opened} of {w.connections} {(ready or {}).get('error', '')}".strip()
    time.sleep(settle)
    after = _vm_rss_kib(target.pid)
    per_conn = (after - before) / opened if opened else 0.0
    return Measurement(w.key, target.name, round_no, per_conn, "KiB/conn", sent=opened,
                       received=opened, errors=0 if opened == w.connections else 1, error=error)


def close_idle(holders: list[GenProcess]) -> None:
    for proc in holders:
        proc.close_stdin()
    for proc in holders:
        proc.result(60)
    holders.clear()
