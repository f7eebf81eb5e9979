"""The message ledger end to end (issue 8): a real gateway, real clients of both protocols,
then the PySpark report over the gateway's ledger directory in local Spark.

1. Known numbers of messages through every protocol pair, some rejected (0-9-1
   basic.reject requeue=False, 1.0 rejected outcome, one of them dead-lettered), some
   unroutable (mandatory: returned; not mandatory: dropped; 1.0: accepted and dropped), some
   expired (dropped, or dead-lettered), some left in queues (never delivered; given back by
   a 0-9-1 requeue, a 1.0 modified outcome, a channel closed with a delivery unacked), one
   refused; the gateway is stopped with SIGTERM (the ledger is flushed and closed) and
   every count of the report is asserted exactly, down to where each message that was not
   finally settled is.
2. kill -9 while a publisher is running: the report reads every complete line.
3. kill -9 of the gateway alone (its ledger writer process survives it): every event the
   gateway had shipped is written, and a message confirmed more than one flush interval
   before the kill is in the ledger.
"""
from __future__ import annotations

import glob
import json
import os
import threading
import time

import pika
import pytest
from proton import Delivery, Message
from proton.utils import SendException

from tests.support.cross_protocol_clients import TIMEOUT, pika_channel, proton_connection, unique
from tests.support.gateway_process import default_config
from tests.support.ledger_files import read_events, segment_lines

# Spark in local mode: its JVM start and jobs take minutes on 2 loaded cores
pytestmark = [pytest.mark.integration, pytest.mark.pipeline, pytest.mark.timeout(600)]


def ledger_config(directory: str) -> str:
    return default_config(extra=f"ledger:\n  directory: {directory}\n  flush_interval: 0.2\n")


def report(spark, ledger_dir: str, out_dir: str):
    from pipeline.report import run_report
    from pipeline.progress import Progress

    return run_report([ledger_dir], out_dir, spark=spark, progress=Progress(6, stream=_Null()))


class _Null:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def test_extra_config_lands_at_the_top_level(tmp_path):
    import yaml

    loaded = yaml.safe_load(ledger_config(str(tmp_path)))
    assert loaded["ledger"] == {"directory": str(tmp_path), "flush_interval": 0.2}


# ------------------------------------------------------------------ the exact counts

def _pika_publish(channel, exchange: str, key: str, count: int, *, mandatory: bool = False,
                  expect_return: bool = False) -> int:
    """Publish ``count`` bodies ``m0``, ``m1`` ...; returns their total ledger ``size``: a 0-9-1
    message's size is its body's length (``container_from_publish``)."""
    size = 0
    for i in range(count):
        body = f"m{i}".encode()
        size += len(body)
        try:
            channel.basic_publish(exchange, key, body, mandatory=mandatory)
        except pika.exceptions.UnroutableError:
            assert expect_return
        else:
            assert not expect_return
    return size


def _amqp_value_size(body: str) -> int:
    """The ledger ``size`` of a 1.0 message whose body is a short string: the length of its
    encoded body section (``inspect_amqp10``'s ``body_size``), an amqp-value section:
    descriptor 0x00 0x53 0x77, str8-utf8 constructor 0xa1, a one-octet length, the text."""
    text = body.encode()
    section = b"\x00\x53\x77\xa1" + bytes([len(text)]) + text
    # proton puts the body section last (no footer here)
    assert Message(body=body).encode().endswith(section)
    return len(section)


def _proton_publish(connection, address: str, count: int, *, outcome: int = Delivery.ACCEPTED,
                    **properties) -> int:
    """Send ``count`` string bodies ``m0``, ``m1`` ...; returns their total ledger ``size``."""
    sender = connection.create_sender(address)
    size = 0
    for i in range(count):
        message = Message(body=f"m{i}", **properties)
        size += _amqp_value_size(f"m{i}")
        if outcome == Delivery.ACCEPTED:
            sender.send(message, timeout=TIMEOUT)
        else:
            with pytest.raises(SendException) as raised:
                sender.send(message, timeout=TIMEOUT)
            assert raised.value.state == outcome
    sender.close()
    return size


def _pika_take(channel, queue: str, count: int, reject: int) -> None:
    """basic.get ``count`` messages; ack all but the last ``reject`` (basic.reject, no requeue)."""
    for i in range(count):
        method, _props, _body = channel.basic_get(queue, auto_ack=False)
        assert method is not None, f"message {i} missing from {queue}"
        if i >= count - reject:
            channel.basic_reject(method.delivery_tag, requeue=False)
        else:
            channel.basic_ack(method.delivery_tag)


def _proton_take(connection, queue: str, count: int, reject: int) -> None:
    receiver = connection.create_receiver(f"/queue/{queue}", credit=count)
    for i in range(count):
        receiver.receive(timeout=TIMEOUT)
        if i >= count - reject:
            receiver.reject()
        else:
            receiver.accept()
    receiver.close()


def _wait_empty(channel, queue: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while channel.queue_declare(queue, passive=True).method.message_count:
        assert time.monotonic() < deadline, f"{queue} did not expire"
        channel.connection.sleep(0.05)


def _totals(spark, path: str, keys: tuple[str, ...], values: tuple[str, ...]) -> dict:
    """A report table (Parquet) summed over ``keys``: {key tuple: value tuple}."""
    from pyspark.sql import functions as F

    rows = spark.read.parquet(path).groupBy(*keys).agg(*(F.sum(v).alias(v) for v in values)).collect()
    return {tuple(r[k] for k in keys): tuple(r[v] for v in values) for r in rows}


def test_report_counts_every_event_exactly(fresh_gateway, spark, tmp_path):
    ledger_dir = str(tmp_path / "ledger")
    gw = fresh_gateway(config_text=ledger_config(ledger_dir))
    # 0-9-1 as guest, 1.0 as alice: the per-user figures tell the two apart
    pika_conn, ch = pika_channel(gw)
    ch.confirm_delivery()  # every publish is routed before the next step
    amqp10 = proton_connection(gw, user="alice", password="secret")

    qa, qb, qc, qd = (unique(p) for p in ("la", "lb", "lc", "ld"))
    dead, ttl, ttl_dl = unique("ldead"), unique("lttl"), unique("lttldl")
    left, requeued, modified, unacked = (unique(p) for p in ("lleft", "lrequeue", "lmodified", "lunacked"))
    for name in (qa, qc, qd, dead, left, requeued, modified, unacked):
        ch.queue_declare(name)
    ch.queue_declare(qb, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead})
    ch.queue_declare(ttl, arguments={"x-message-ttl": 100})
    ch.queue_declare(ttl_dl, arguments={"x-message-ttl": 100, "x-dead-letter-exchange": "",
                                        "x-dead-letter-routing-key": dead})

    nowhere1, nowhere2, nowhere3 = (unique("nowhere") for _ in range(3))
    size = {}  # ledger bytes published, per publish step
    # 0-9-1 -> 0-9-1: 5 published, 4 acked, 1 rejected
    size[qa] = _pika_publish(ch, "", qa, 5)
    _pika_take(ch, qa, 5, reject=1)
    # 0-9-1 -> 1.0: 4 published, 3 accepted, 1 rejected (dead-lettered to `dead`)
    size[qb] = _pika_publish(ch, "", qb, 4)
    _proton_take(amqp10, qb, 4, reject=1)
    # 1.0 -> 0-9-1: 3 published, 3 acked
    size[qc] = _proton_publish(amqp10, f"/queue/{qc}", 3)
    _pika_take(ch, qc, 3, reject=0)
    # 1.0 -> 1.0: 4 published, 3 accepted, 1 rejected
    size[qd] = _proton_publish(amqp10, f"/queue/{qd}", 4)
    _proton_take(amqp10, qd, 4, reject=1)
    # unroutable: 2 dropped and 1 returned (0-9-1), 1 accepted and dropped (1.0)
    size[nowhere1] = _pika_publish(ch, "amq.direct", nowhere1, 2)
    size[nowhere2] = _pika_publish(ch, "amq.direct", nowhere2, 1, mandatory=True, expect_return=True)
    size[nowhere3] = _proton_publish(amqp10, f"/exchange/amq.direct/{nowhere3}", 1)
    # expired: 3 + 2 into a queue with a 100 ms TTL and no consumer
    size[ttl, "0-9-1"] = _pika_publish(ch, "", ttl, 3)
    size[ttl, "1.0"] = _proton_publish(amqp10, f"/queue/{ttl}", 2)
    _wait_empty(ch, ttl)
    # expired and dead-lettered: 2 into a 100 ms TTL queue whose dead letters go to `dead`
    size[ttl_dl] = _pika_publish(ch, "", ttl_dl, 2)
    _wait_empty(ch, ttl_dl)
    # refused before receipt: a 1.0 user-id that is not the login
    _proton_publish(amqp10, f"/queue/{qd}", 1, outcome=Delivery.REJECTED, user_id=b"mallory")
    assert ch.queue_declare(dead, passive=True).method.message_count == 1 + 2
    # left in queues at the stop: 3 never delivered; 2 taken and requeued (0-9-1 reject
    # requeue=True); 1 given back by a 1.0 consumer (modified, delivery failed); 1 held
    # unacknowledged by a channel that then closes (the gateway releases it)
    size[left] = _pika_publish(ch, "", left, 3)
    size[requeued] = _pika_publish(ch, "", requeued, 2)
    held = [ch.basic_get(requeued, auto_ack=False)[0] for _ in range(2)]
    for method in held:
        ch.basic_reject(method.delivery_tag, requeue=True)
    size[modified] = _proton_publish(amqp10, f"/queue/{modified}", 1)
    receiver = amqp10.create_receiver(f"/queue/{modified}", credit=1)
    receiver.receive(timeout=TIMEOUT)
    receiver.release()  # delivered=True: the modified outcome
    receiver.close()
    size[unacked] = _pika_publish(ch, "", unacked, 1)
    closing = pika_conn.channel()
    assert closing.basic_get(unacked, auto_ack=False)[0] is not None
    closing.close()
    for name, count in ((left, 3), (requeued, 2), (modified, 1), (unacked, 1)):
        assert ch.queue_declare(name, passive=True).method.message_count == count, name

    amqp10.close()
    pika_conn.close()
    assert gw.stop() == 0  # SIGTERM: the ledger is flushed and closed

    segments = glob.glob(os.path.join(ledger_dir, "*.jsonl*"))
    assert segments and all(s.endswith(".jsonl") for s in segments), segments
    summary = report(spark, ledger_dir, str(tmp_path / "report"))

    assert summary.malformed == 0
    assert summary.by_event == {
        "received": 34,        # 5 + 4 + 3 + 4 delivered, 3 + 1 unroutable, 5 + 2 expired, 3 + 2 + 1 + 1 left
        "routed": 33,          # 30 publishes that reached a queue + 3 dead-lettered copies
        "unroutable": 3,
        "returned": 1,
        "refused": 1,
        "delivered": 20,       # 16 settled finally, 4 given back
        "settled": 20,
        "expired": 7,
        "dead_lettered": 3,    # 1 rejected, 2 expired
        "dropped": 10,         # left in transient queues at the stop: 3 + 2 + 1 + 1 + 3 dead letters
        "started": 1,
    }
    assert summary.settled_by_outcome == {"accepted": 13, "rejected": 3, "released": 3, "modified": 1}
    assert summary.protocol_pairs == {
        "0-9-1->0-9-1": 5 + 2 + 1, "0-9-1->1.0": 4, "1.0->0-9-1": 3, "1.0->1.0": 4 + 1,
    }
    assert summary.events == 133
    [(node, latency)] = summary.latency_us.items()
    assert node in summary.containers and latency["settled"] == 20

    # where each message that was not finally settled is when the ledger ends: what was
    # left in a queue went with it at the stop (every queue here is transient)
    dropped = ("dropped", "by the queue: transient queue")
    assert summary.unsettled == {
        (node, "/", left, *dropped): 3,
        (node, "/", requeued, *dropped): 2,
        (node, "/", modified, *dropped): 1,
        (node, "/", unacked, *dropped): 1,
        (node, "/", ttl, "expired", "TTL ran out, no dead-letter exchange"): 5,
        (node, "/", qb, "dead-lettered", "reason rejected, to exchange ''"): 1,
        (node, "/", ttl_dl, "dead-lettered", "reason expired, to exchange ''"): 2,
        (node, "/", dead, *dropped): 3,  # the dead-letter copies
    }
    assert summary.unsettled_by_state == {"dropped": 10, "expired": 5, "dead-lettered": 3}
    # and the final state of every message: 16 settled for good, less the rejected one
    # dead-lettered; dropped: the 10 above and the 3 unroutable and 1 returned publishes
    assert summary.final_by_state == {"delivered": 15, "dropped": 10 + 4, "expired": 5,
                                      "dead-lettered": 3}
    assert summary.refusals == {("unroutable", None): 3, ("returned", "NO_ROUTE"): 1,
                                ("refused", "user-id 'mallory' does not match the authenticated user 'alice'"): 1}
    html = open(summary.html_path, encoding="utf-8").read()
    assert "Not finally settled at the end of the ledger: 18 messages (dead-lettered 3, expired 5, dropped 10)." in html
    assert ("Final state of every message: delivered 15, expired 5, dead-lettered 3, dropped 14; "
            "none lost.") in html
    assert 0 <= latency["p50"] <= latency["max"] < 60_000_000
    assert os.path.exists(summary.html_path)

    # bytes per protocol pair: every delivery counts the size its message came in with
    assert summary.protocol_pair_bytes == {
        "0-9-1->0-9-1": size[qa] + size[requeued] + size[unacked], "0-9-1->1.0": size[qb],
        "1.0->0-9-1": size[qc], "1.0->1.0": size[qd] + size[modified],
    }
    assert size[qa] == 5 * 2 and size[qc] == 3 * 7  # b"m0" ...; an amqp-value "m0" section

    # latency per AMQP node: one row per queue that had settlements
    per_queue = {key: figures["settled"] for key, figures in summary.latency_by_queue.items()}
    assert per_queue == {(node, "/", qa): 5, (node, "/", qb): 4, (node, "/", qc): 3, (node, "/", qd): 4,
                         (node, "/", requeued): 2, (node, "/", modified): 1, (node, "/", unacked): 1}
    for figures in summary.latency_by_queue.values():
        assert 0 <= figures["p50"] <= figures["p95"] <= figures["p99"] <= figures["max"] < 60_000_000

    # outcomes and refusals by target address and user (0-9-1 settlements name the queue,
    # 1.0 ones the consumer's source address; publishes their exchange + key or 1.0 target)
    outcomes = _totals(spark, summary.tables["outcomes"], ("target", "user", "result"), ("messages",))
    assert outcomes == {
        (f"/queues/{qa}", "guest", "accepted"): (4,), (f"/queues/{qa}", "guest", "rejected"): (1,),
        (f"/queue/{qb}", "alice", "accepted"): (3,), (f"/queue/{qb}", "alice", "rejected"): (1,),
        (f"/queues/{qc}", "guest", "accepted"): (3,),
        (f"/queue/{qd}", "alice", "accepted"): (3,), (f"/queue/{qd}", "alice", "rejected"): (1,),
        (f"/exchanges/amq.direct/{nowhere1}", "guest", "unroutable"): (2,),
        (f"/exchanges/amq.direct/{nowhere2}", "guest", "returned"): (1,),
        (f"/exchange/amq.direct/{nowhere3}", "alice", "unroutable"): (1,),
        (f"/queues/{ttl}", None, "expired"): (5,),
        (f"/queues/{qb}", None, "dead_lettered"): (1,),
        (f"/queues/{ttl_dl}", None, "expired"): (2,),
        (f"/queues/{ttl_dl}", None, "dead_lettered"): (2,),
        (f"/queue/{qd}", "alice", "refused"): (1,),   # the user-id that is not the login
        (f"/queues/{requeued}", "guest", "released"): (2,),
        (f"/queue/{modified}", "alice", "modified"): (1,),
        (f"/queues/{unacked}", "guest", "released"): (1,),
    }

    # traffic per minute, summed over the minutes: by AMQP node (receipts on their target,
    # deliveries on their queue) and by user
    traffic = summary.tables["traffic_per_minute"]
    assert _totals(spark, traffic, ("node", "event"), ("messages", "bytes")) == {
        (f"/exchanges//{qa}", "received"): (5, size[qa]),
        (f"/exchanges//{qb}", "received"): (4, size[qb]),
        (f"/queue/{qc}", "received"): (3, size[qc]),
        (f"/queue/{qd}", "received"): (4, size[qd]),
        (f"/exchanges/amq.direct/{nowhere1}", "received"): (2, size[nowhere1]),
        (f"/exchanges/amq.direct/{nowhere2}", "received"): (1, size[nowhere2]),
        (f"/exchange/amq.direct/{nowhere3}", "received"): (1, size[nowhere3]),
        (f"/exchanges//{ttl}", "received"): (3, size[ttl, "0-9-1"]),
        (f"/queue/{ttl}", "received"): (2, size[ttl, "1.0"]),
        (f"/exchanges//{ttl_dl}", "received"): (2, size[ttl_dl]),
        (f"/exchanges//{left}", "received"): (3, size[left]),
        (f"/exchanges//{requeued}", "received"): (2, size[requeued]),
        (f"/queue/{modified}", "received"): (1, size[modified]),
        (f"/exchanges//{unacked}", "received"): (1, size[unacked]),
        (f"/queues/{qa}", "delivered"): (5, size[qa]),
        (f"/queues/{qb}", "delivered"): (4, size[qb]),
        (f"/queues/{qc}", "delivered"): (3, size[qc]),
        (f"/queues/{qd}", "delivered"): (4, size[qd]),
        (f"/queues/{requeued}", "delivered"): (2, size[requeued]),
        (f"/queues/{modified}", "delivered"): (1, size[modified]),
        (f"/queues/{unacked}", "delivered"): (1, size[unacked]),
    }
    published_by = {
        "guest": size[qa] + size[qb] + size[nowhere1] + size[nowhere2] + size[ttl, "0-9-1"]
        + size[ttl_dl] + size[left] + size[requeued] + size[unacked],
        "alice": size[qc] + size[qd] + size[nowhere3] + size[ttl, "1.0"] + size[modified],
    }
    assert _totals(spark, traffic, ("user", "event"), ("messages", "bytes")) == {
        ("guest", "received"): (23, published_by["guest"]),
        ("alice", "received"): (11, published_by["alice"]),
        # basic.get from qa, qc, requeued and unacked; 1.0 receivers on qb, qd and modified
        ("guest", "delivered"): (11, size[qa] + size[qc] + size[requeued] + size[unacked]),
        ("alice", "delivered"): (9, size[qb] + size[qd] + size[modified]),
    }

    # top talkers: who published most
    talkers = [(r["rank"], r["container"], r["vhost"], r["user"], r["messages"], r["bytes"], r["connections"])
               for r in spark.read.parquet(summary.tables["top_talkers"]).orderBy("rank").collect()]
    assert talkers == [(1, node, "/", "guest", 23, published_by["guest"], 1),
                       (2, node, "/", "alice", 11, published_by["alice"], 1)]


# ------------------------------------------------------------------ crash

def _publish_until(gw, stop: threading.Event, queue: str, sent: list[int]) -> None:
    connection, ch = pika_channel(gw)
    try:
        while not stop.is_set():
            ch.basic_publish("", queue, b"x" * 64)
            sent[0] += 1
            if sent[0] % 200 == 0:
                connection.process_data_events(0)
    except Exception:  # noqa: BLE001 - the gateway is killed under the publisher
        pass


def _parseable_lines(directory: str) -> tuple[int, int]:
    """(events in the lines that parse as JSON, lines that do not) over every segment file."""
    bad = 0
    for _name, lines, tail in segment_lines(directory):
        for line in lines + [tail]:
            if not line:
                continue
            try:
                json.loads(line)
            except ValueError:
                bad += 1
    return len(read_events(directory)), bad


@pytest.mark.process
def test_kill_9_while_writing_loses_no_complete_record(fresh_gateway, spark, tmp_path):
    ledger_dir, gw, connection, ch, queue = _gateway_and_queue(fresh_gateway, tmp_path, "lcrash",
                                                               process=True)
    connection.close()

    stop, sent = threading.Event(), [0]
    publisher = threading.Thread(target=_publish_until, args=(gw, stop, queue, sent), daemon=True)
    publisher.start()
    deadline = time.monotonic() + 15.0
    # several flushes (every 0.2 s) must have happened while the publisher runs
    while _parseable_lines(ledger_dir)[0] < 2000 and time.monotonic() < deadline:
        time.sleep(0.1)
    gw.kill()  # SIGKILL to the ledger writer and the gateway: a whole-service crash
    stop.set()
    publisher.join(10)

    good, bad = _parseable_lines(ledger_dir)
    assert good >= 2000 and bad <= 1
    assert glob.glob(os.path.join(ledger_dir, "*.jsonl.open")), "the open segment stays as it was"
    summary = report(spark, ledger_dir, str(tmp_path / "report"))
    assert summary.events == good
    assert summary.malformed == bad
    assert summary.by_event["received"] >= summary.by_event["routed"] >= good // 2 - 1


def _children_gone(pids: list[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(os.path.exists(f"/proc/{pid}") and _alive(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _records(directory: str) -> list[dict]:
    """Every event of every segment file (each line must parse)."""
    for _name, _lines, tail in segment_lines(directory):
        assert tail == b"", "a torn line"
    return read_events(directory)


def _received_message_ids(directory: str) -> set[str]:
    return {rec["message_id"] for rec in _records(directory)
            if rec["event"] == "received" and "message_id" in rec}


def _gateway_and_queue(fresh_gateway, tmp_path, prefix: str, **kwargs):
    """A gateway writing its ledger to ``tmp_path/ledger``, a pika channel, a new queue."""
    ledger_dir = str(tmp_path / "ledger")
    gw = fresh_gateway(config_text=ledger_config(ledger_dir), **kwargs)
    connection, ch = pika_channel(gw)
    queue = unique(prefix)
    ch.queue_declare(queue)
    return ledger_dir, gw, connection, ch, queue


@pytest.mark.process
def test_kill_9_of_the_gateway_alone_loses_at_most_one_flush_interval(fresh_gateway, tmp_path):
    flush_interval = 0.2
    ledger_dir, gw, connection, ch, queue = _gateway_and_queue(fresh_gateway, tmp_path, "lcrash1",
                                                               process=True)
    writers = gw.child_pids()
    assert writers, "the ledger is written by a child process by default"
    ch.confirm_delivery()
    confirmed: list[tuple[str, float]] = []  # (message id, when its confirm arrived)
    start = time.monotonic()
    while time.monotonic() - start < 1.5:
        message_id = f"m{len(confirmed)}"
        ch.basic_publish("", queue, b"x" * 64, pika.BasicProperties(message_id=message_id))
        confirmed.append((message_id, time.monotonic()))  # blocks until the confirm
    killed_at = time.monotonic()
    gw.proc.kill()  # SIGKILL to the gateway only
    gw.proc.wait()
    assert _children_gone(writers, 15.0), "the writer finishes and exits at end of input"

    written = _received_message_ids(ledger_dir)
    settled_before = [m for m, t in confirmed if t < killed_at - flush_interval - 0.5]
    assert len(settled_before) > 100
    missing = [m for m in settled_before if m not in written]
    assert not missing, f"{len(missing)} confirmed messages missing, first {missing[:5]}"
    assert not glob.glob(os.path.join(ledger_dir, "*.jsonl.open")), \
        "the writer closed its segment after the gateway's last batch"
    good, bad = _parseable_lines(ledger_dir)
    assert bad == 0


def test_deliveries_long_after_their_publish_are_written_in_full(fresh_gateway, tmp_path):
    """A delivery whose publish row went to the writer process in an earlier frame refers
    to it by gateway id; a real client's messages, consumed half a second (five frames)
    after they were published, are still written with the publish's fields."""
    ledger_dir, gw, connection, ch, queue = _gateway_and_queue(fresh_gateway, tmp_path, "lref")
    ch.confirm_delivery()
    for i in range(20):
        ch.basic_publish("", queue, b"x" * 10, pika.BasicProperties(message_id=f"r{i}"))
    connection.sleep(0.5)
    _pika_take(ch, queue, 20, reject=0)
    connection.close()
    gw.stop()  # the writer writes the rest and exits
    records = [r for r in _records(ledger_dir) if r.get("message_id", "").startswith("r")]
    for event in ("delivered", "settled"):
        got = sorted((r for r in records if r["event"] == event), key=lambda r: r["message_id"])
        assert [r["message_id"] for r in got] == sorted(f"r{i}" for i in range(20))
        for r in got:
            assert (r["proto_in"], r["size"], r["queue"]) == ("0-9-1", 10, queue)
            assert r["latency_us"] >= 400_000, "measured from the publish"
            if event == "delivered":
                assert (r["exchange"], r["routing_key"]) == ("", queue)


def test_a_delivery_to_an_idle_consumer_is_recorded_after_its_receipt(fresh_gateway, tmp_path):
    """A message published on one connection and delivered on another, whose consumer had
    been idle for a second, is delivered after it was received: the delivery is recorded at
    the publish's time, not at the consumer connection's last input."""
    ledger_dir, gw, consumer, ch, queue = _gateway_and_queue(fresh_gateway, tmp_path, "idle")
    taken: list[str] = []

    def take(channel, method, properties, body) -> None:
        taken.append(properties.message_id)
        channel.basic_ack(method.delivery_tag)

    ch.basic_consume(queue, take)
    consumer.sleep(1.0)  # no input on the consumer's connection meanwhile
    publisher, pch = pika_channel(gw)
    pch.confirm_delivery()
    for i in range(5):
        pch.basic_publish("", queue, b"x", pika.BasicProperties(message_id=f"i{i}"))
    deadline = time.monotonic() + TIMEOUT
    while len(taken) < 5 and time.monotonic() < deadline:
        consumer.process_data_events(time_limit=0.1)
    assert sorted(taken) == [f"i{i}" for i in range(5)]
    publisher.close()
    consumer.close()
    gw.stop()  # the writer writes the rest and exits
    records = [r for r in _records(ledger_dir) if r.get("message_id", "").startswith("i")]
    received = {r["message_id"]: r["ts_us"] for r in records if r["event"] == "received"}
    delivered = [r for r in records if r["event"] == "delivered"]
    assert sorted(received) == sorted(r["message_id"] for r in delivered) == sorted(taken)
    for r in delivered:
        assert r["ts_us"] >= received[r["message_id"]], r
        # from the publish: not negative, and not from the consume a second before it
        assert 0 <= r["latency_us"] < 1_000_000, r


def test_deliveries_to_waiting_consumers_are_written_with_their_publish_fields(fresh_gateway,
                                                                                tmp_path):
    """A consumer that waits with credit gets a message while the gateway routes its
    publish; such a delivery refers to the publish row, reserved before routing, by
    gateway id. Both protocols' publishes, to a waiting consumer of the other protocol:
    every delivered and settled record carries the publish's fields."""
    ledger_dir, gw, connection, ch, to_10 = _gateway_and_queue(fresh_gateway, tmp_path, "wait10")
    to_091 = unique("wait091")
    ch.queue_declare(to_091)
    taken_091: list[str] = []

    def take(channel, method, properties, body) -> None:
        taken_091.append(properties.message_id)
        channel.basic_ack(method.delivery_tag)

    ch.basic_consume(to_091, take)
    amqp10 = proton_connection(gw)
    receiver = amqp10.create_receiver(f"/queue/{to_10}", credit=5)
    # the consumers' credit reaches the gateway before the publishes: a link attached
    # after the credit is answered once the gateway handled it (a connection's frames are
    # handled in order); 0-9-1's basic.consume above waited for its consume-ok
    amqp10.create_sender(f"/queue/{to_10}").close()
    publisher, pch = pika_channel(gw)
    pch.confirm_delivery()
    for i in range(5):
        pch.basic_publish("", to_10, b"x" * 7, pika.BasicProperties(message_id=f"w091-{i}"))
    sender = amqp10.create_sender(f"/queue/{to_091}")
    for i in range(5):
        sender.send(Message(body=f"w10-{i}", id=f"w10-{i}"), timeout=TIMEOUT)
    taken_10 = []
    for _ in range(5):
        taken_10.append(receiver.receive(timeout=TIMEOUT).id)
        receiver.accept()
    deadline = time.monotonic() + TIMEOUT
    while len(taken_091) < 5 and time.monotonic() < deadline:
        connection.process_data_events(time_limit=0.1)
    assert sorted(taken_10) == [f"w091-{i}" for i in range(5)]
    assert sorted(taken_091) == [f"w10-{i}" for i in range(5)]
    amqp10.close()
    publisher.close()
    connection.close()
    gw.stop()  # the writer writes the rest and exits
    records = [r for r in _records(ledger_dir) if r.get("message_id", "").startswith("w")]
    received = {r["message_id"]: r for r in records if r["event"] == "received"}
    assert len(received) == 10
    for event in ("delivered", "settled"):
        got = [r for r in records if r["event"] == event]
        assert sorted(r["message_id"] for r in got) == sorted(received), event
        for r in got:
            publish = received[r["message_id"]]
            pair = ("0-9-1", "1.0") if r["message_id"].startswith("w091") else ("1.0", "0-9-1")
            assert (r["proto_in"], r["proto_out"]) == pair, r
            assert (r["size"], r["gateway_id"]) == (publish["size"], publish["gateway_id"]), r
            assert r["queue"] == (to_10 if pair[0] == "0-9-1" else to_091), r
            assert 0 <= r["latency_us"] < TIMEOUT * 1_000_000, r
            if event == "delivered":
                assert (r.get("exchange"), r.get("routing_key")) == \
                    (publish.get("exchange"), publish.get("routing_key")), r


def test_settlements_long_after_their_deliveries_are_written_in_full(fresh_gateway, tmp_path):
    """A consumer holds its deliveries for seconds while other messages flow, so the
    writer process forgets the publish rows its delivered rows referred to; the one
    multiple ack that settles them is still written with the messages' fields."""
    ledger_dir, gw, connection, ch, queue = _gateway_and_queue(fresh_gateway, tmp_path, "llate")
    other = unique("llate-other")
    ch.queue_declare(other)
    ch.confirm_delivery()
    for i in range(5):
        ch.basic_publish("", queue, b"x" * 10, pika.BasicProperties(message_id=f"late{i}"))
    tags: list[int] = []
    ch.basic_consume(queue, lambda channel, method, properties, body: tags.append(
        method.delivery_tag))
    deadline = time.monotonic() + TIMEOUT
    while len(tags) < 5 and time.monotonic() < deadline:
        connection.process_data_events(time_limit=0.1)
    assert len(tags) == 5
    held_until = time.monotonic() + 5.0
    while time.monotonic() < held_until:  # later publishes: the writer moves on
        ch.basic_publish("", other, b"y")
        connection.process_data_events(time_limit=0.2)
    ch.basic_ack(tags[-1], multiple=True)
    connection.close()
    gw.stop()  # the writer writes the rest and exits
    records = [r for r in _records(ledger_dir) if r.get("message_id", "").startswith("late")]
    settled = sorted((r for r in records if r["event"] == "settled"),
                     key=lambda r: r["message_id"])
    assert [r["message_id"] for r in settled] == [f"late{i}" for i in range(5)]
    for r in settled:
        assert (r["proto_in"], r["size"], r["queue"], r["outcome"]) == \
            ("0-9-1", 10, queue, "accepted"), r
        assert r["latency_us"] >= 4_500_000, "measured from the publish"
