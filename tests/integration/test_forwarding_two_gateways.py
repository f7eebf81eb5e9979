"""Two gateways, org-a forwarding to org-b (``kind: gateway``) and to org-b
addressed as a plain 1.0 broker (``kind: amqp10``): messages sent at org-a to
``orders@org-b`` over 1.0 and 0-9-1 reach org-b's queue with their properties unchanged;
RPC across the two; kill -9 of either side loses nothing and duplicates nothing; a
message org-b rejects is dead-lettered at org-a and the stream goes on.

Both gateways run in the test process, except one that a test kills with kill -9
(``Pair(..., processes="b")``: a gateway process; restarted in the test process)."""
from __future__ import annotations

import re
import time
import uuid
from datetime import datetime

import pika
import pytest
from proton import Message, Timeout

from translators import scan_sections
from tests.support.access_config import write_users_file
from tests.support.amqp10_wide_encoding import list32, map32, section, str32, sym32, vbin32
from tests.support.cross_protocol_clients import (RawAmqp10, capture_raw_amqp10, pika_channel, pika_get,
                                                 proton_connection, unique)
from tests.support.gateway_metrics import metric_samples
from tests.support.ledger_files import read_events
from tests.support.gateway_process import Gateway, GatewayProcess, default_config, free_port, make_gateway

pytestmark = pytest.mark.integration

TIMEOUT = 15.0
#: ``logging.summary_interval`` of org-a where a test counts its dead-letter lines
SUMMARY_INTERVAL = 1.0


def remote(container: str, port: int, password_file, extra: str = "") -> str:
    return (f"    - container: {container}\n      host: 127.0.0.1\n      port: {port}\n"
            f"      user: guest\n      password_file: {password_file}\n"
            "      reconnect_initial: 0.2\n      reconnect_max: 1.0\n" + extra)


def gateway(container: str, state_dir, port: int, remotes: str, extra: str = "",
            process: bool = False) -> Gateway:
    """A gateway that also listens on the fixed ``port`` (where its peers point, across
    restarts), forwarding to ``remotes``; a process if ``process``."""
    state_dir.mkdir(exist_ok=True)
    pw = state_dir / "remote.password"
    pw.write_text("guest\n")
    section = f"forwarding:\n  remotes:\n{remotes.replace('{pw}', str(pw))}" if remotes else ""
    return make_gateway(
        config_text=default_config(extra=f"container_id: {container}\nstate_dir: {state_dir}\n"
                                         f"{section}{extra}"),
        extra_args=("--listen", f"127.0.0.1:{port}"), process=process)


class Pair:
    """org-a and org-b, each a remote of the other (kind gateway); those named in
    ``processes`` (``"a"``, ``"b"``, ``"ab"``) are gateway processes, to kill."""

    def __init__(self, root, a_extra: str = "", b_remotes: str = "", processes: str = "") -> None:
        self.root = root
        self.processes = processes
        self.a_port, self.b_port = free_port(), free_port()
        self.a_extra = a_extra
        self.b_remotes = b_remotes
        self.a = self.make_a()
        self.b = self.make_b()

    def make_a(self, process: bool | None = None) -> Gateway:
        """org-a (a process if ``process``, by default if named in ``processes``)."""
        return gateway("org-a", self.root / "a", self.a_port, remote("org-b", self.b_port, "{pw}"),
                       self.a_extra, process="a" in self.processes if process is None else process)

    def make_b(self, process: bool | None = None) -> Gateway:
        return gateway("org-b", self.root / "b", self.b_port,
                       remote("org-a", self.a_port, "{pw}") + self.b_remotes,
                       process="b" in self.processes if process is None else process)

    def start(self) -> "Pair":
        self.b.start()
        self.a.start()
        return self

    def end(self) -> None:
        """Both gone: killed (processes) or stopped."""
        for gw in (self.a, self.b):
            if isinstance(gw, GatewayProcess):
                gw.kill()
            else:
                gw.stop()


def _running(p: Pair):
    p.start()
    yield p.a, p.b
    p.end()


@pytest.fixture
def pair(tmp_path):
    yield from _running(Pair(tmp_path))


@pytest.fixture
def pair_summarising_each_second(tmp_path):
    """``pair`` with org-a's ``logging.summary_interval`` at ``SUMMARY_INTERVAL``."""
    yield from _running(Pair(tmp_path, a_extra=f"logging:\n  summary_interval: {SUMMARY_INTERVAL:g}\n"))


def declare(gw: Gateway, queue: str) -> None:
    conn, ch = pika_channel(gw)
    ch.queue_declare(queue, durable=True)
    conn.close()


def receive_all(gw: Gateway, queue: str, count: int, timeout: float = TIMEOUT) -> list[Message]:
    c = proton_connection(gw)
    try:
        receiver = c.create_receiver(queue, credit=count)
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < count:
            got.append(receiver.receive(timeout=max(0.1, deadline - time.monotonic())))
            receiver.accept()
        return got
    finally:
        c.close()


def test_amqp10_messages_reach_org_b_with_properties_unchanged(pair) -> None:
    a, b = pair
    q = unique("orders")
    declare(b, q)
    c = proton_connection(a)
    sent = []
    try:
        sender = c.create_sender(f"{q}@org-b")
        for i in range(20):
            m = Message(id=f"m-{i}", subject="order", correlation_id=uuid.UUID(int=i),
                        content_type="text/plain", reply_to="replies@org-a",
                        properties={"n": i, "who": "org-a"}, body=f"order {i}")
            m.durable = True
            sender.send(m)
            sent.append(m)
    finally:
        c.close()
    got = receive_all(b, q, 20)
    for want, m in zip(sent, got):
        assert (m.id, m.subject, m.correlation_id, m.content_type, m.reply_to, m.properties,
                m.body) == (want.id, want.subject, want.correlation_id, want.content_type,
                            want.reply_to, want.properties, want.body)
        assert m.address == f"{q}@org-b"  # the link's address, filled in
        assert m.annotations["x-opt-forward-origin"] == "org-a"
        assert list(m.annotations["x-opt-forward-hops"]) == ["org-a"]


def test_amqp091_routing_key_node_at_org_b_reaches_org_b(pair) -> None:
    a, b = pair
    q = unique("orders")
    declare(b, q)
    conn, ch = pika_channel(a)
    try:
        ch.confirm_delivery()
        for i in range(5):
            ch.basic_publish("", f"{q}@org-b", b"legacy %d" % i,
                             pika.BasicProperties(message_id=f"p-{i}", headers={"n": i},
                                                  delivery_mode=2), mandatory=True)
    finally:
        conn.close()
    conn, ch = pika_channel(b)
    try:
        for i in range(5):
            method, props, body = pika_get(ch, q, timeout=TIMEOUT)
            assert body == b"legacy %d" % i and props.message_id == f"p-{i}"
            assert props.headers["n"] == i
    finally:
        conn.close()


def test_rpc_with_reply_to_across_the_two(pair) -> None:
    a, b = pair
    requests, replies = unique("requests"), unique("replies")
    declare(b, requests)
    declare(a, replies)
    ca = proton_connection(a)
    try:
        ca.create_sender(f"{requests}@org-b").send(
            Message(body="ping", reply_to=f"{replies}@org-a", correlation_id="c-1"))
        request = receive_all(b, requests, 1)[0]
        cb = proton_connection(b)
        try:  # the service at org-b answers through its own amqp$transfer (the relay)
            cb.create_sender(None).send(Message(address=request.reply_to, body="pong",
                                                correlation_id=request.correlation_id))
        finally:
            cb.close()
        reply = receive_all(a, replies, 1)[0]
        assert (reply.body, reply.correlation_id) == ("pong", "c-1")
    finally:
        ca.close()


def send_numbered(gw: Gateway, address: str, numbers, durable: bool = True) -> None:
    c = proton_connection(gw)
    try:
        sender = c.create_sender(address)
        for i in numbers:
            m = Message(id=f"n-{i}", body=f"n {i}")
            m.durable = durable
            sender.send(m, timeout=TIMEOUT)
    finally:
        c.close()


def drain_bodies(gw: Gateway, queue: str, expected: int, timeout: float = 30.0) -> list[str]:
    """Every message of ``queue`` until ``expected`` arrived and then a quiet second."""
    c = proton_connection(gw)
    got: list[str] = []
    try:
        receiver = c.create_receiver(queue, credit=100)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                m = receiver.receive(timeout=1.0 if len(got) >= expected else 2.0)
            except Timeout:
                if len(got) >= expected:
                    break
                continue
            receiver.accept()
            # a 0-9-1 message arrives as a data section: proton's memoryview of its buffer
            got.append(m.body if isinstance(m.body, str) else bytes(m.body).decode())
        return got
    finally:
        c.close()


@pytest.mark.process
def test_kill_9_of_org_b_mid_stream_loses_and_duplicates_nothing(tmp_path) -> None:
    p = Pair(tmp_path, processes="b").start()
    try:
        q = unique("orders")
        declare(p.b, q)
        send_numbered(p.a, f"{q}@org-b", range(0, 100))
        p.b.kill()  # org-b dies with forwarded messages in flight or just stored
        send_numbered(p.a, f"{q}@org-b", range(100, 150))  # org-a keeps accepting
        p.b = p.make_b(process=False).start()
        got = drain_bodies(p.b, q, 150)
        assert sorted(got, key=lambda b: int(b.split()[1])) == [f"n {i}" for i in range(150)]
        assert len(got) == len(set(got)) == 150
    finally:
        p.end()


@pytest.mark.process
def test_kill_9_of_org_a_with_a_full_outbox_loses_nothing(tmp_path) -> None:
    p = Pair(tmp_path, processes="a")
    try:
        p.a.start()  # org-b is not running: everything waits in org-a's outbox
        q = unique("orders")
        send_numbered(p.a, f"{q}@org-b", range(60))
        conn, ch = pika_channel(p.a)
        ch.confirm_delivery()
        for i in range(60, 80):
            ch.basic_publish("", f"{q}@org-b", b"n %d" % i, pika.BasicProperties(delivery_mode=2))
        conn.close()
        seen = metric_samples(p.a)
        remote = ("remote", "org-b")
        assert seen[("amqp_gateway_forward_outbox_messages", remote)] == 80
        assert seen[("amqp_gateway_forward_state", remote, ("state", "backing off"))] == 1
        assert seen[("amqp_gateway_forward_outbox_oldest_seconds", remote)] > 0
        p.a.kill()
        p.b.start()
        declare(p.b, q)
        p.a = p.make_a(process=False).start()
        assert p.a.wait_for_log(r"restored 80 message\(s\) waiting to be forwarded")
        got = drain_bodies(p.b, q, 80)
        assert sorted(int(t.split()[1]) for t in got) == list(range(80))
    finally:
        p.end()


def ledger_records(directory) -> list[dict]:
    return read_events(str(directory))


def test_a_rejected_poison_message_is_dead_lettered_and_the_stream_goes_on(pair, tmp_path) -> None:
    a, b = pair
    q = unique("orders")
    declare(b, q)
    send_numbered(a, f"{q}@org-b", [1])
    send_numbered(a, "no-such-queue@org-b", [2])  # org-b rejects it: amqp:not-found
    send_numbered(a, f"{q}@org-b", [3])
    assert drain_bodies(b, q, 2) == ["n 1", "n 3"]
    dead = receive_all(a, "forward.dead-letter.org-b", 1)[0]
    assert dead.body == "n 2" and dead.id == "n-2"
    assert "amqp:not-found" in dead.annotations["x-opt-forward-error"]
    assert dead.annotations["x-opt-forward-remote"] == "org-b"
    seen = metric_samples(a)
    remote = ("remote", "org-b")
    assert seen[("amqp_gateway_forward_dead_lettered_total", remote)] == 1
    assert seen[("amqp_gateway_forward_acked_total", remote)] == 2
    assert seen[("amqp_gateway_forward_outbox_messages", remote)] == 0
    assert seen[("amqp_gateway_forward_state", remote, ("state", "up"))] == 1
    a.stop()  # flushes the ledger
    events = [r for r in ledger_records(tmp_path / "a" / "ledger")
              if r["event"] in ("forwarded", "forward_settled")]
    assert [r["event"] for r in events if r["event"] == "forwarded"] == ["forwarded"] * 3
    settled = sorted(r["outcome"] for r in events if r["event"] == "forward_settled")
    assert settled == ["accepted", "accepted", "rejected"]
    assert {r["peer_container"] for r in events} == {"org-b"}
    assert {r["message_id"] for r in events} == {"n-1", "n-2", "n-3"}
    b.stop()  # org-b's arrivals carry org-a's ids: the report's reconciliation matches them
    sent = {str(r["gateway_id"]) for r in events if r["event"] == "forwarded"
            and r["message_id"] in ("n-1", "n-3")}
    arrived = [r for r in ledger_records(tmp_path / "b" / "ledger")
               if r["event"] == "received" and r.get("origin_id") is not None]
    assert {str(r["origin_id"]) for r in arrived} == sent and len(arrived) == 2


def test_dead_letters_are_logged_once_per_interval_and_summarised(pair_summarising_each_second) -> None:
    """Issue 41, item 8: 300 forwarded messages that org-b rejects write one WARNING line
    at org-a, then summaries, at most one line per ``logging.summary_interval`` (1 s
    here, 10 s by default), that count the rest (not 300 lines)."""
    a, _b = pair_summarising_each_second
    count = 300
    send_numbered(a, "no-such-queue@org-b", range(count), durable=False)
    deadline = time.monotonic() + 30
    remote = ("remote", "org-b")
    while metric_samples(a).get(("amqp_gateway_forward_dead_lettered_total", remote), 0) < count:
        assert time.monotonic() < deadline, "the messages were not all dead-lettered"
        time.sleep(0.1)

    def accounted() -> tuple[int, list[str]]:
        lines = [line for line in a.log_lines if "dead-lettered" in line and "WARNING" in line]
        left_out = sum(int(n) for line in lines for n in re.findall(
            rf"(\d+) more in the last {SUMMARY_INTERVAL:g}s not logged", line))
        logged = sum(1 for line in lines if re.search(r"message \d+ for .* dead-lettered \(rejected\): ", line))
        return logged + left_out, lines

    deadline = time.monotonic() + 15  # the summary comes with the next interval
    while accounted()[0] < count and time.monotonic() < deadline:
        time.sleep(0.2)
    total, lines = accounted()
    assert total == count, lines
    assert len(lines) >= 2, lines  # a line, then a summary
    # one line per interval: each line at least an interval after the one before (less
    # 10 %: a line's time is taken just after the gateway read its clock)
    times = [datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f") for line in lines]
    gaps = [(later - earlier).total_seconds() for earlier, later in zip(times, times[1:])]
    assert all(gap >= 0.9 * SUMMARY_INTERVAL for gap in gaps), (gaps, lines)
    assert all("amqp:not-found" in line for line in lines), lines


def test_a_second_gateway_addressed_as_a_plain_amqp10_broker(tmp_path) -> None:
    """``kind: amqp10``: org-b is reached as org-c, a plain broker whose queues are
    ``/queues/{node}`` (its own ``amqp$transfer`` is not used)."""
    p = Pair(tmp_path)
    p.a = gateway("org-a", tmp_path / "a", p.a_port,
                  remote("org-c", p.b_port, "{pw}", "      kind: amqp10\n"
                                                "      address: \"/queues/{node}\"\n"))
    p.start()
    try:
        q = unique("orders")
        declare(p.b, q)
        send_numbered(p.a, f"{q}@org-c", range(5))
        got = receive_all(p.b, q, 5)
        assert [m.body for m in got] == [f"n {i}" for i in range(5)]
        assert got[0].address is None  # a plain broker: the bare message as sent, no 'to' added
        assert got[0].annotations["x-opt-forward-origin"] == "org-a"
    finally:
        p.end()


@pytest.mark.process
def test_a_duplicate_forward_is_dropped_even_after_the_receiver_restarts(tmp_path) -> None:
    """What a sender that crashed before it heard accepted does: the same forwarded
    message (same origin and id) arrives twice; the second is accepted and dropped."""
    p = Pair(tmp_path, processes="b")
    p.b.start()
    try:
        q = unique("orders")
        declare(p.b, q)

        def forward_once() -> None:
            c = proton_connection(p.b)
            try:
                m = Message(address=f"{q}@org-b", body="once", id="dup-1",
                            annotations={"x-opt-forward-origin": "org-x",
                                         "x-opt-forward-id": 4242,
                                         "x-opt-forward-hops": ["org-x"]})
                m.durable = True
                c.create_sender("amqp$transfer").send(m, timeout=TIMEOUT)
            finally:
                c.close()

        forward_once()
        forward_once()
        p.b.kill()
        p.b = p.make_b(process=False).start()
        forward_once()
        assert drain_bodies(p.b, q, 1) == ["once"]
    finally:
        p.end()


def test_default_remote_is_the_hub_and_a_loop_between_hubs_is_broken(tmp_path) -> None:
    """Each gateway's ``default_remote`` is the other: a message for an unknown container
    goes org-a -> org-b -> org-a, where its hop trace shows the loop; org-a refuses it
    (amqp:not-allowed) and org-b dead-letters it. A known container still works."""
    p = Pair(tmp_path, a_extra="  default_remote: org-b\n")
    p.b = gateway("org-b", tmp_path / "b", p.b_port, remote("org-a", p.a_port, "{pw}"),
                  "  default_remote: org-a\n")
    p.start()
    try:
        send_numbered(p.a, "q@nowhere", [1])  # accepted by org-a: its hub takes it
        dead = receive_all(p.b, "forward.dead-letter.org-a", 1)[0]
        assert dead.body == "n 1"
        assert "amqp:not-allowed" in dead.annotations["x-opt-forward-error"]
        assert "forwarding loop" in dead.annotations["x-opt-forward-error"]
        assert list(dead.annotations["x-opt-forward-hops"]) == ["org-a", "org-b"]
    finally:
        p.end()


def test_the_node_part_is_any_target_address(pair) -> None:
    """``/queue/Q@org-b`` and ``/exchange/X/RK@org-b``: split at the last '@', the node
    part is resolved at org-b with the address grammar."""
    a, b = pair
    q = unique("orders")
    declare(b, q)
    conn, ch = pika_channel(b)
    ch.queue_bind(q, "amq.direct", q)
    conn.close()
    send_numbered(a, f"/queue/{q}@org-b", [1])
    send_numbered(a, f"/exchange/amq.direct/{q}@org-b", [2])
    got = receive_all(b, q, 2)
    assert sorted(m.body for m in got) == ["n 1", "n 2"]


def test_the_bare_message_crosses_byte_for_byte(pair, monkeypatch) -> None:
    """Wide encodings proton would never produce: properties (long descriptor),
    application-properties, two data sections and a footer arrive at org-b octet for
    octet; only the header and the message-annotations (forwarding's) differ."""
    a, b = pair
    q = unique("orders")
    declare(b, q)
    capture_raw_amqp10(monkeypatch)
    encoded = (section(0x70, list32(b"\x41"))
               + section(0x72, map32((sym32("x-opt-wide"), str32("yes"))))
               + section(0x73, list32(str32("m-wide"), b"\x40", str32(f"{q}@org-b"),
                                      str32("subject-wide")), long_descriptor=True)
               + section(0x74, map32((str32("k"), str32("v"))))
               + section(0x75, vbin32(b"first part"))
               + section(0x75, vbin32(b"second part"))
               + section(0x78, map32((sym32("x-opt-signature"), str32("sig")))))
    c = proton_connection(a)
    try:
        c.create_sender(f"{q}@org-b").send(RawAmqp10(encoded))
    finally:
        c.close()
    got = receive_all(b, q, 1)[0]
    bare = encoded[scan_sections(encoded)[2].start:]  # from the properties on
    assert got.raw.endswith(bare)
    assert got.annotations["x-opt-wide"] == "yes" and got.annotations["x-opt-forward-origin"] == "org-a"


def test_the_forwarding_link_needs_write_permission_at_the_receiver(tmp_path) -> None:
    """org-a logs in to org-b as ``orga``, who may write ``amqp$transfer`` and the default
    exchange only: a message for a queue arrives, one for ``/exchange/amq.topic/...`` is
    refused by org-b (amqp:unauthorized-access) and dead-lettered at org-a."""
    (tmp_path / "b").mkdir()
    users = write_users_file(str(tmp_path / "b"), {"orga": {
        "password": "guest", "loopback_only": False,
        "permissions": {"/": {"configure": "", "write": r"^(amqp\$transfer|amq\.default)$",
                              "read": ""}}}})
    p = Pair(tmp_path)
    p.b = gateway("org-b", tmp_path / "b", p.b_port, "", f"users_file: {users}\n")
    p.a = gateway("org-a", tmp_path / "a", p.a_port,
                  remote("org-b", p.b_port, "{pw}").replace("user: guest", "user: orga"))
    p.start()
    try:
        q = unique("orders")
        declare(p.b, q)
        send_numbered(p.a, f"{q}@org-b", [1])
        send_numbered(p.a, "/exchange/amq.topic/k@org-b", [2])
        assert [m.body for m in receive_all(p.b, q, 1)] == ["n 1"]
        dead = receive_all(p.a, "forward.dead-letter.org-b", 1)[0]
        assert dead.body == "n 2"
        error = dead.annotations["x-opt-forward-error"]
        assert "amqp:unauthorized-access" in error and "amq.topic" in error and "orga" in error
    finally:
        p.end()


@pytest.mark.process
def test_a_dead_letter_keeps_the_remote_error_across_a_kill_9(tmp_path) -> None:
    """A 0-9-1 message org-b rejects: its dead letter at org-a carries the error in its
    bytes, so after kill -9 and restart a 0-9-1 consumer still reads it (as a header)."""
    p = Pair(tmp_path, processes="a").start()
    try:
        conn, ch = pika_channel(p.a)
        ch.confirm_delivery()
        ch.basic_publish("", "no-such-queue@org-b", b"poison",
                         pika.BasicProperties(message_id="p-1", delivery_mode=2))
        conn.close()
        assert p.a.wait_for_log("message .* dead-lettered .*: amqp:not-found")
        p.a.kill()
        p.a = p.make_a(process=False).start()
        conn, ch = pika_channel(p.a)
        try:
            method, props, body = pika_get(ch, "forward.dead-letter.org-b", timeout=TIMEOUT)
            assert body == b"poison" and props.message_id == "p-1"
            # 1.0 annotations reach 0-9-1 in one table header (translators/MAPPING.md)
            annotations = props.headers["x-amqp-1.0-message-annotations"]
            assert "amqp:not-found" in annotations["x-opt-forward-error"]
            assert "'no-such-queue@org-b'" in annotations["x-opt-forward-error"]
            assert annotations["x-opt-forward-remote"] == "org-b"
        finally:
            conn.close()
    finally:
        p.end()
