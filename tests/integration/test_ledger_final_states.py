"""The final state of every message, model against ledger (issue 41).

Hypothesis generates short sequences of operations: publish (persistent or transient) to
a durable, a transient, a TTL, a drop-head and a reject-publish queue; take a message
(``basic.get``), ack it, reject it (requeued or not); purge and delete a queue; let TTLs
run out; restart the gateway cleanly (SIGTERM) or crash it (kill -9 of the gateway and
its writer). They run against a real gateway with pika (a gateway process where the next
restart is a crash; in the test process where it is a clean stop), and a small model
(``Model``) says where each message must end. After a clean stop, the ledger's final
state of every message (``pipeline.final_rules.final_states``: the report's rules in
plain Python, so the loop needs no Spark) equals the model's, and nothing is "lost".

The Spark report itself runs once, on one fixed sequence that has every operation: its
``final_states`` table equals the Python evaluation, and ``report.html`` (its final
state section) is saved as a screenshot in ``test-artifacts/``.

Bounded: a few derandomized examples of at most a dozen steps, no shrinking (each step
is a real round trip, each restart a new process): about a minute on an idle machine.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Optional

import pika
import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from pipeline.final_rules import final_states
from tests.integration.test_ledger_report import report
from tests.support.browser import ARTIFACTS, chromium_page
from tests.support.cross_protocol_clients import pika_channel
from tests.support.gateway_process import Gateway, GatewayProcess, default_config, make_gateway
from tests.support.ledger_files import read_events

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.process, pytest.mark.timeout(900)]

settings.register_profile(
    "ledger-model", max_examples=5, derandomize=True, deadline=None, database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=(HealthCheck.too_slow, HealthCheck.function_scoped_fixture))

FLUSH = 0.2
WAIT = 15.0  # deadline of every wait on the gateway or its ledger


@dataclasses.dataclass(frozen=True)
class QueueKind:
    name: str
    durable: bool
    arguments: dict
    #: what a publish here may be: None either, True persistent only (TTL: a transient one
    #: could be dropped at a stop or expired first, by the tick's timing)
    persistent: Optional[bool] = None
    takeable: bool = True


QUEUES = (
    QueueKind("durable", True, {}),
    QueueKind("transient", False, {}),
    QueueKind("ttl", True, {"x-message-ttl": 100}, persistent=True, takeable=False),
    QueueKind("drop", True, {"x-max-length": 2}),
    QueueKind("reject", True, {"x-max-length": 2, "x-overflow": "reject-publish"}),
)
#: where a persistent marker goes before a kill -9: once its record is written, so is
#: everything before it, and its confirm follows every earlier store write
MARKER = QueueKind("marker", True, {})


@dataclasses.dataclass
class Model:
    """Where each message is: ``ready`` per queue (ids in publish order), ``held``
    deliveries (delivery tag -> id, queue), ``final`` states, and which queues exist."""

    persistent: dict[str, bool] = dataclasses.field(default_factory=dict)
    ready: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    held: dict[int, tuple[str, str]] = dataclasses.field(default_factory=dict)
    final: dict[str, str] = dataclasses.field(default_factory=dict)
    order: dict[str, int] = dataclasses.field(default_factory=dict)

    def publish(self, kind: QueueKind, message_id: str, persistent: bool) -> bool:
        """False when the queue refuses it (reject-publish, full)."""
        ready = self.ready.setdefault(kind.name, [])
        self.persistent[message_id] = persistent
        self.order[message_id] = len(self.order)
        limit = kind.arguments.get("x-max-length")
        if limit is not None and kind.arguments.get("x-overflow") == "reject-publish" and len(ready) >= limit:
            self.final[message_id] = "dropped"
            return False
        ready.append(message_id)
        while limit is not None and len(ready) > limit:
            self.final[ready.pop(0)] = "dropped"  # drop-head
        return True

    def end_ready(self, queue: str, state: str) -> None:
        for message_id in self.ready.pop(queue, []):
            self.final[message_id] = state

    def put_back(self, queue: str, message_id: str) -> None:
        ready = self.ready.setdefault(queue, [])
        ready.append(message_id)
        ready.sort(key=self.order.__getitem__)

    def restart(self) -> None:
        """A stop or a crash: held deliveries go back; what the store does not keep is
        dropped; what had its TTL run out is expired once the gateway is back."""
        for message_id, queue in self.held.values():
            self.put_back(queue, message_id)
        self.held.clear()
        for kind in (*QUEUES, MARKER):
            keep = []
            for message_id in self.ready.get(kind.name, []):
                if kind.durable and self.persistent[message_id]:
                    keep.append(message_id)
                else:
                    self.final[message_id] = "dropped"
            self.ready[kind.name] = keep
        self.end_ready("ttl", "expired")

    def expected(self) -> dict[str, str]:
        """Every message's state once the gateway stopped cleanly."""
        out = dict(self.final)
        for message_id in self.persistent:
            out.setdefault(message_id, "still queued")
        return out


class Run:
    """The real gateway and a pika channel beside the model, step by step."""

    def __init__(self, root) -> None:
        self.root = root
        self.model = Model()
        self.declared: set[str] = set()
        self.count = 0
        self.gw: Optional[Gateway] = None
        self.connection = self.ch = None

    @property
    def ledger(self) -> str:
        return str(self.root / "ledger")

    def start(self, crash_ahead: bool = False) -> None:
        """A gateway on the run's state; a process if it is to be crashed."""
        self.gw = make_gateway(process=crash_ahead, config_text=default_config(extra=(
            f"state_dir: {self.root}\nledger:\n  flush_interval: {FLUSH}\n"))).start()
        self.connection, self.ch = pika_channel(self.gw)
        self.ch.confirm_delivery()
        self.declared = {k.name for k in (*QUEUES, MARKER) if k.durable and k.name in self.declared}

    def close(self) -> None:
        if isinstance(self.gw, GatewayProcess):
            self.gw.kill()
        elif self.gw is not None:
            self.gw.stop()

    def _declare(self, kind: QueueKind) -> None:
        if kind.name not in self.declared:
            self.ch.queue_declare(kind.name, durable=kind.durable, arguments=kind.arguments)
            self.declared.add(kind.name)

    def publish(self, kind: QueueKind, persistent: bool) -> None:
        self._declare(kind)
        self.count += 1
        message_id = f"m{self.count}"
        accepted = self.model.publish(kind, message_id, persistent)
        try:
            self.ch.basic_publish("", kind.name, b"x", pika.BasicProperties(
                message_id=message_id, delivery_mode=2 if persistent else 1))
        except pika.exceptions.NackError:
            assert not accepted, f"{message_id} refused by {kind.name}"
        else:
            assert accepted, f"{message_id} taken by a full {kind.name}"

    def take(self, kind: QueueKind) -> None:
        if kind.name not in self.declared:
            return
        method, properties, _body = self.ch.basic_get(kind.name, auto_ack=False)
        ready = self.model.ready.get(kind.name, [])
        if not ready:
            assert method is None, f"{kind.name} gave {properties.message_id}, the model has none"
            return
        assert method is not None and properties.message_id == ready[0], (kind.name, ready)
        self.model.held[method.delivery_tag] = (ready.pop(0), kind.name)

    def settle(self, pick: int, how: str) -> None:
        if not self.model.held:
            return
        tag = sorted(self.model.held)[pick % len(self.model.held)]
        message_id, queue = self.model.held.pop(tag)
        if how == "ack":
            self.ch.basic_ack(tag)
            self.model.final[message_id] = "delivered"
        elif how == "reject":
            self.ch.basic_reject(tag, requeue=False)
            self.model.final[message_id] = "delivered"  # settled rejected, no dead-letter exchange
        else:
            self.ch.basic_reject(tag, requeue=True)
            self.model.put_back(queue, message_id)

    def purge(self, kind: QueueKind) -> None:
        if kind.name in self.declared:
            self.ch.queue_purge(kind.name)
            self.model.end_ready(kind.name, "purged")

    def delete(self, kind: QueueKind) -> None:
        if kind.name not in self.declared:
            return
        self.ch.queue_delete(kind.name)
        self.declared.discard(kind.name)
        self.model.end_ready(kind.name, "deleted")
        for tag, (message_id, queue) in list(self.model.held.items()):
            if queue == kind.name:  # its delivery is gone with the queue: never settled
                del self.model.held[tag]
                self.model.final[message_id] = "deleted"

    def expire(self) -> None:
        """Wait for the TTL queue to be empty (the broker's tick removes what ran out)."""
        if "ttl" not in self.declared:
            return
        deadline = time.monotonic() + WAIT
        while self.ch.queue_declare("ttl", passive=True).method.message_count:
            assert time.monotonic() < deadline, "the TTL queue did not empty"
            self.connection.sleep(0.1)
        self.model.end_ready("ttl", "expired")

    def restart(self, crash: bool, crash_ahead: bool = False) -> None:
        if crash:
            self.publish(MARKER, True)  # confirmed: every store write before it is done
            marker = f"m{self.count}"
            deadline = time.monotonic() + WAIT
            while marker not in {e.get("message_id") for e in read_events(self.ledger)}:
                assert time.monotonic() < deadline, "the marker's record was not written"
                time.sleep(0.05)
            self.gw.kill()  # kill -9 of the writer and the gateway
        else:
            self.connection.close()
            assert self.gw.stop() == 0
        self.model.restart()
        self.start(crash_ahead)
        if "ttl" in self.declared:
            self.expire()

    def stop(self) -> None:
        self.connection.close()
        assert self.gw.stop() == 0
        self.model.restart()  # a stop drops what the store does not keep, as a restart does
        self.gw = None


#: one step: (operation, queue index, flag); publishes and takes weigh most, so that
#: settlements find deliveries to settle
STEPS = st.tuples(
    st.sampled_from(("publish",) * 5 + ("take",) * 4 + ("ack", "ack", "reject", "requeue", "purge",
                                                         "delete", "expire", "stop", "crash")),
    st.sampled_from((0, 0, 1, 1, 2, 3, 3, 4, 4)), st.booleans())


def run_steps(run: Run, steps) -> None:
    # how each gateway of the run ends: only one that is crashed needs to be a process
    ends = [op == "crash" for op, _, _ in steps if op in ("stop", "crash")] + [False]
    run.start(crash_ahead=ends.pop(0))
    for op, index, flag in steps:
        kind = QUEUES[index]
        if op == "publish":
            run.publish(kind, True if kind.persistent else flag)
        elif op == "take" and kind.takeable:
            run.take(kind)
        elif op in ("ack", "reject", "requeue"):
            run.settle(index, op)
        elif op == "purge":
            run.purge(kind)
        elif op == "delete":
            run.delete(kind)
        elif op == "expire":
            run.expire()
        elif op in ("stop", "crash"):
            run.restart(crash=op == "crash", crash_ahead=ends.pop(0))
    run.expire()
    run.stop()


def check(run: Run) -> list[dict]:
    """The ledger's final states against the model's; returns the ledger's rows."""
    rows = final_states(read_events(run.ledger))
    assert not [r for r in rows if r["state"] == "lost"], "nothing is lost that the model did not lose"
    by_id = {r["message_id"]: r for r in rows if r["message_id"] in run.model.persistent}
    assert len(by_id) == sum(1 for r in rows if r["message_id"] in run.model.persistent), "one state each"
    got = {message_id: r["state"] for message_id, r in by_id.items()}
    assert got == run.model.expected()
    return rows


@settings(settings.get_profile("ledger-model"))
@given(steps=st.lists(STEPS, min_size=6, max_size=14))
def test_every_message_ends_where_the_model_says(tmp_path_factory, steps) -> None:
    run = Run(tmp_path_factory.mktemp("model"))
    try:
        run_steps(run, steps)
        check(run)
    finally:
        run.close()


#: every operation, both restarts: the run the real report reads
FIXED = [("publish", 0, True), ("publish", 0, False), ("publish", 1, True), ("publish", 1, False),
         ("publish", 2, True), ("publish", 3, False), ("publish", 3, True), ("publish", 3, False),
         ("publish", 4, True), ("publish", 4, False), ("publish", 4, True),
         ("take", 0, False), ("ack", 0, False), ("take", 0, False), ("take", 1, False),
         ("requeue", 0, False), ("take", 1, False), ("reject", 0, False), ("expire", 0, False),
         ("crash", 0, False), ("publish", 0, False), ("publish", 1, True), ("take", 0, False),
         ("purge", 3, False), ("stop", 0, False), ("publish", 1, False), ("take", 1, False),
         ("delete", 1, False), ("publish", 0, True), ("take", 0, False)]


@pytest.mark.pipeline
def test_the_report_gives_the_final_states_the_python_rules_give(spark, tmp_path) -> None:
    run = Run(tmp_path / "gw")
    try:
        run_steps(run, FIXED)
        rows = check(run)
    finally:
        run.close()
    assert {r["state"] for r in rows} >= {"delivered", "expired", "purged", "deleted", "dropped",
                                          "still queued"}
    summary = report(spark, run.ledger, str(tmp_path / "report"))
    spark_rows = spark.read.parquet(summary.tables["final_states"]).select(
        "gateway_id", "place", "state", "detail").collect()
    assert sorted(map(repr, map(tuple, spark_rows))) == \
        sorted(repr((r["gateway_id"], r["place"], r["state"], r["detail"])) for r in rows)
    assert "lost" not in summary.final_by_state
    os.makedirs(ARTIFACTS, exist_ok=True)
    shot = os.path.join(ARTIFACTS, "report-final-states.png")
    with chromium_page(height=1400) as page:
        page.goto(f"file://{summary.html_path}")
        text = page.inner_text("#summary")
        assert "Final state of every message:" in text and "none lost" in text
        page.locator("#summary").screenshot(path=shot)
        page.locator("h2:has-text('Throughput by route')").scroll_into_view_if_needed()
        page.screenshot(path=os.path.join(ARTIFACTS, "report-throughput.png"))
    assert open(shot, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
