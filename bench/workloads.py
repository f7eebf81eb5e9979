"""The benchmark's workloads (W1..W7, and D1/D2 for the durable store) as plain data.

A ``Workload`` says what to run, not how: ``bench/run.py`` turns it into load-generator
command lines.  Message counts are not fixed here: each workload is calibrated per
broker by a warm-up run so that a measured run lasts about ``target_seconds``.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Kind", "ClientProtocol", "Workload", "all_workloads", "durable_workloads", "ledger_workloads",
           "select_workloads",
           "SIZE_SMALL", "SIZE_LARGE", "W5_BINDINGS", "W6_CONNECTIONS", "IN_FLIGHT"]

SIZE_SMALL = 100
SIZE_LARGE = 4096
W5_BINDINGS = (10, 1_000, 10_000)
W6_CONNECTIONS = 1_000
W7_RATE = 5_000         # offered msgs/s in the market-data scenario
PREFETCH = 300          # 0-9-1 basic.qos prefetch and 1.0 link credit
ACK_EVERY = 10          # 0-9-1 consumer: one multiple-ack per this many deliveries
CONFIRM_WINDOW = 300    # 0-9-1 publisher: unconfirmed messages in flight at most
IN_FLIGHT = 500         # W8: unconfirmed (0-9-1) or unsettled (1.0) messages in flight at most


class ClientProtocol(enum.Enum):
    AMQP091 = "0-9-1"
    AMQP10 = "1.0"


class Kind(enum.Enum):
    FLOW = "flow"        # one producer -> one queue -> one consumer
    TOPIC = "topic"      # 0-9-1 producer -> amq.topic (N bindings) -> consumer(s)
    IDLE = "idle"        # memory per idle connection


@dataclass(frozen=True, slots=True)
class Workload:
    """One row of the result table.

    ``name`` is the workload family (W1..W7), ``variant`` tells rows of a family apart.
    For IDLE, ``producer`` is the protocol of the idle connections.  For TOPIC,
    ``topics`` routing keys are bound across ``subscribers`` queues (each key to exactly
    one queue, so every message is delivered once), ``hot_topics`` of them get
    ``hot_share`` of the traffic.  ``rate`` > 0 paces the producer (W7: latency and drops
    at a fixed offered load rather than a race).  ``window``: with ``confirms`` or
    ``unsettled``, the messages the producer keeps in flight at most (0: ``CONFIRM_WINDOW``
    for confirms, the broker's link credit alone for unsettled).
    """

    name: str
    variant: str
    kind: Kind
    producer: ClientProtocol
    consumer: ClientProtocol
    size: int = SIZE_SMALL
    confirms: bool = False
    unsettled: bool = False
    topics: int = 0
    subscribers: int = 1
    hot_topics: int = 0
    hot_share: float = 0.0
    connections: int = 0
    rate: int = 0           # producer's offered msgs/s; 0 = as fast as the broker takes them
    window: int = 0
    durable: bool = False   # a durable queue and persistent (0-9-1) / durable (1.0) messages

    @property
    def key(self) -> str:
        """Unique label, e.g. ``"W1 100B confirms"``."""
        return f"{self.name} {self.variant}"

    @property
    def unit(self) -> str:
        """What the row's value measures: msgs/s, or KiB per idle connection."""
        return "KiB/conn" if self.kind is Kind.IDLE else "msgs/s"

    @property
    def higher_is_better(self) -> bool:
        return self.kind is not Kind.IDLE


def _size_label(size: int) -> str:
    return f"{size // 1024}KiB" if size % 1024 == 0 else f"{size}B"


def _flow(name: str, producer: ClientProtocol, consumer: ClientProtocol, **extra: object) -> list[Workload]:
    rows = []
    for size in (SIZE_SMALL, SIZE_LARGE):
        rows.append(Workload(name, _size_label(size), Kind.FLOW, producer, consumer, size=size))
    for flag in ("confirms", "unsettled"):
        if extra.get(flag):  # (issue 43 reports W1c and W2u at both sizes)
            for size in (SIZE_SMALL, SIZE_LARGE):
                rows.append(Workload(name, f"{_size_label(size)} {flag}", Kind.FLOW, producer,
                                     consumer, size=size, **{flag: True}))
    return rows


def all_workloads(quick: bool = False) -> list[Workload]:
    """Every workload of the issue, in table order.  ``quick`` shrinks W6/W7 for a smoke run."""
    p091, p10 = ClientProtocol.AMQP091, ClientProtocol.AMQP10
    rows = [
        *_flow("W1", p091, p10, confirms=True),
        *_flow("W2", p10, p091, unsettled=True),
        *_flow("W3", p091, p091),
        *_flow("W4", p10, p10, unsettled=True),
    ]
    for n in W5_BINDINGS:
        rows.append(Workload("W5", f"{n} bindings", Kind.TOPIC, p091, p091, topics=n))
    conns = 100 if quick else W6_CONNECTIONS
    rows.append(Workload("W6", f"{conns} idle 0-9-1", Kind.IDLE, p091, p091, connections=conns))
    rows.append(Workload("W6", f"{conns} idle 1.0", Kind.IDLE, p10, p10, connections=conns))
    topics, subs, rate = (1_000, 5, 2_000) if quick else (10_000, 20, W7_RATE)
    rows.append(Workload("W7", f"{topics} topics {subs} subs {rate}/s", Kind.TOPIC, p091, p091,
                         topics=topics, subscribers=subs, hot_topics=topics // 10, hot_share=0.5,
                         rate=rate))
    # publishers that wait for the broker's answers (issue 29: small confirm and disposition
    # frames held back by Nagle + delayed ACK cut these to 11-14k msgs/s)
    rows.append(Workload("W8", f"{_size_label(SIZE_LARGE)} confirms {IN_FLIGHT} in flight", Kind.FLOW,
                         p091, p091, size=SIZE_LARGE, confirms=True, window=IN_FLIGHT))
    rows.append(Workload("W8", f"{_size_label(SIZE_LARGE)} unsettled {IN_FLIGHT} in flight", Kind.FLOW,
                         p10, p10, size=SIZE_LARGE, unsettled=True, window=IN_FLIGHT))
    rows += durable_workloads()
    return rows


def durable_workloads() -> list[Workload]:
    """The durable store's rows: a 0-9-1 publisher with confirms sending persistent
    messages to a durable queue (D1) and a 1.0 sender with unsettled durable transfers
    (D2), each at 100 B and 4 KiB; every confirm / accepted outcome waits for the sync."""
    p091, p10 = ClientProtocol.AMQP091, ClientProtocol.AMQP10
    rows = []
    for size in (SIZE_SMALL, SIZE_LARGE):
        rows.append(Workload("D1", f"{_size_label(size)} confirms persistent", Kind.FLOW, p091, p091,
                             size=size, confirms=True, durable=True))
    for size in (SIZE_SMALL, SIZE_LARGE):
        rows.append(Workload("D2", f"{_size_label(size)} unsettled durable", Kind.FLOW, p10, p10,
                             size=size, unsettled=True, durable=True))
    return rows


def ledger_workloads(quick: bool = False) -> list[Workload]:
    """The ledger's cost: these rows run on one gateway with the ledger on (the default)
    and one with it off, alternating; the ratio on/off is the throughput kept (family
    ``L``, target >= 0.9). Both protocols at 100 B, where per-message costs weigh most,
    and 0-9-1 at 4 KiB."""
    p091, p10 = ClientProtocol.AMQP091, ClientProtocol.AMQP10
    rows = [Workload("L", "W3 100B", Kind.FLOW, p091, p091), Workload("L", "W4 100B", Kind.FLOW, p10, p10),
            Workload("L", "W3 4KiB", Kind.FLOW, p091, p091, size=SIZE_LARGE)]
    return rows[:1] if quick else rows


def select_workloads(rows: list[Workload], names: str | None) -> list[Workload]:
    """Keep the rows whose family is in the comma-separated ``names`` (None keeps all).

    Raises ValueError naming an unknown family, so a typo never silently runs nothing.
    """
    if not names:
        return rows
    wanted = {n.strip().upper() for n in names.split(",") if n.strip()}
    known = {r.name for r in rows}
    unknown = sorted(wanted - known)
    if unknown:
        raise ValueError(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return [r for r in rows if r.name in wanted]

