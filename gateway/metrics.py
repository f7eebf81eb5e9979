"""The one Prometheus registry and every metric of the gateway.

Only this module imports ``prometheus_client`` (DESIGN.md). A ``GatewayMetrics``
instance is built per service (no module globals), so several gateways can run in one
test process. Model gauges (queue depth ...) are read when scraped by a custom
collector, so the per-message path never touches a Prometheus object.
"""
from __future__ import annotations

import platform
import time
from typing import Any, Callable, Iterable, NamedTuple

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from gateway.connection_log import peer_name
from gateway.product import __version__
from translators.carried_counts import CARRIED

__all__ = ["GatewayMetrics", "SupervisorMetrics", "CONTENT_TYPE_LATEST", "Sample", "WORKER_LABEL",
           "parse_exposition"]

# The names ``amqp-gateway status`` reads back (counters without their ``_total``).
CONNECTIONS_ACCEPTED = "amqp_gateway_connections_accepted"
CONNECTIONS_OPEN = "amqp_gateway_connections_open"
BUILD_INFO = "amqp_gateway_build_info"
START_TIME = "amqp_gateway_start_time_seconds"
LISTENER_INFO = "amqp_gateway_listener_info"
QUEUE_MESSAGES_READY = "amqp_gateway_queue_messages_ready"
QUEUE_MESSAGES_UNACKNOWLEDGED = "amqp_gateway_queue_messages_unacked"
MEMORY_QUEUED_BYTES = "amqp_gateway_memory_queued_bytes"
MEMORY_BLOCKED = "amqp_gateway_memory_blocked"


class _ModelCollector:
    """Reads gauges (or, with ``family=CounterMetricFamily``, counters: a name without
    its ``_total``) from the broker model at scrape time."""

    def __init__(self, read: Callable[[], Iterable[tuple[str, str, dict[str, str], float]]],
                 family: type = GaugeMetricFamily):
        self._read = read
        self._family = family

    def collect(self):  # prometheus_client collector protocol
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
        for name, doc, labels, value in self._read():
            fam = families.get(name)
            if fam is None:
                fam = families[name] = self._family(name, doc, labels=sorted(labels))
            fam.add_metric([labels[k] for k in sorted(labels)], value)
        return list(families.values())


class _StoreCollector:
    """Reads the durable store's counters at scrape time: the commit thread keeps plain
    ints (``gateway.store.commit_thread.CommitStats``), the store its message counts, the
    gate its alarms, the pager what it dropped from memory."""

    def __init__(self, store: Any, broker: Any, free_disk: Callable[[], Any]) -> None:
        self._store = store
        self._broker = broker
        self._free_disk = free_disk

    def collect(self):  # prometheus_client collector protocol
        from gateway.store.commit_thread import LATENCY_BUCKETS

        store = self._store
        stats = store.stats
        yield GaugeMetricFamily("amqp_gateway_store_size_bytes",
                                "Bytes of the store on disk (database file and write-ahead log)",
                                value=store.file_size())
        yield GaugeMetricFamily("amqp_gateway_store_messages",
                                "Messages held in the store (one per message, whatever the queues)",
                                value=store.messages_stored)
        yield GaugeMetricFamily("amqp_gateway_store_message_bytes",
                                "Body bytes of the messages held in the store", value=store.bytes_stored)
        for name, doc, value in (
                ("commit_batches", "Transactions committed (each covers the writes of every "
                 "connection made meanwhile)", stats.batches),
                ("syncs", "Commits synced to disk before confirming (store.sync_mode full)", stats.syncs),
                ("operations", "Rows written or deleted by committed transactions", stats.operations),
                ("execute_seconds", "Time the commit thread spent running statements",
                 stats.execute_seconds),
                ("commit_seconds", "Time the commit thread spent committing (syncing)",
                 stats.commit_seconds),
                ("write_failures", "Transactions that failed and were rolled back", stats.failures)):
            yield CounterMetricFamily(f"amqp_gateway_store_{name}", doc, value=value)
        counts = stats.latency_counts
        buckets = [(str(bound), counts[i]) for i, bound in enumerate(LATENCY_BUCKETS)]
        buckets.append(("+Inf", counts[-1]))
        yield HistogramMetricFamily("amqp_gateway_store_commit_latency_seconds",
                                    "From a batch handed to the commit thread to its commit synced",
                                    buckets=buckets, sum_value=stats.latency_sum)
        yield CounterMetricFamily("amqp_gateway_store_paged_out_bytes",
                                  "Body bytes dropped from memory because the store holds them "
                                  "(store.memory_budget)", value=self._broker.pager.paged_bytes)
        free = self._free_disk()
        if free is not None:
            yield GaugeMetricFamily("amqp_gateway_disk_free_bytes",
                                    "Free bytes on the store's file system at the last check",
                                    value=free)
        alarms = GaugeMetricFamily("amqp_gateway_alarm", "1 while a resource alarm blocks "
                                   "publishers: disk (free space below store.disk_free_limit), "
                                   "store (writes fail)", labels=["alarm"])
        raised = self._broker.gate.alarms
        for name in ("disk", "store"):
            alarms.add_metric([name], 1 if name in raised else 0)
        yield alarms


class GatewayMetrics:
    """Every metric, registered in one private registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.connections_accepted = Counter(
            CONNECTIONS_ACCEPTED, "Connections whose protocol header was "
            "recognised, by protocol", ["protocol"], registry=r)
        self.connections_open = Gauge(
            CONNECTIONS_OPEN, "Connections currently open, by protocol",
            ["protocol"], registry=r)
        self.sniff_failures = Counter(
            "amqp_gateway_sniff_failures", "Connections closed by the protocol sniffer, by reason",
            ["reason"], registry=r)
        self.tcp_connections = Counter(
            "amqp_gateway_tcp_connections_accepted", "TCP connections accepted by any listener",
            registry=r)
        Gauge(BUILD_INFO, "The gateway's version and Python's (always 1)",
              ["version", "python"], registry=r).labels(__version__, platform.python_version()).set(1)
        self.start_time = Gauge(
            START_TIME, "When the gateway started, in seconds since the "
            "Unix epoch", registry=r)
        self.listeners = Gauge(
            LISTENER_INFO, "Every bound address (always 1): what it serves "
            "(amqp, metrics) and its TLS mode", ["serves", "address", "tls"], registry=r)

    def started(self, now: float) -> None:
        self.start_time.set(now)

    def listening(self, serves: str, host: str, port: int, tls: str) -> None:
        """A bound address, for ``amqp-gateway status`` and dashboards."""
        self.listeners.labels(serves, peer_name(host, port), tls).set(1)

    def watch_broker(self, broker, clock: Callable[[], float] = time.time) -> None:
        """Per queue: depth (ready, unacked, total), consumers, and publish, deliver and
        ack totals; per exchange: messages published to it; deliveries unsettled for long;
        memory use. Read from the broker model at scrape time: the message path only adds
        to plain ints on the queue and exchange objects. ``clock`` gives the broker's
        ``now`` (for the age of unsettled deliveries).

        Names follow rabbitmq_prometheus's per-object metrics (``rabbitmq_queue_messages_
        ready`` ...) with our prefix ``amqp_gateway_`` in place of ``rabbitmq_``."""

        def read():
            for vhost in broker.vhosts.values():
                for queue in list(vhost.queues.values()):
                    labels = {"vhost": vhost.name, "queue": queue.name}
                    ready, unacked = queue.message_count, queue.acquired_count
                    yield (QUEUE_MESSAGES_READY,
                           "Messages available for delivery, per queue", labels, ready)
                    yield (QUEUE_MESSAGES_UNACKNOWLEDGED,
                           "Messages delivered and not yet settled, per queue", labels, unacked)
                    yield ("amqp_gateway_queue_messages", "Messages ready and unacked, per "
                           "queue", labels, ready + unacked)
                    yield ("amqp_gateway_queue_consumers", "Consumers and links, per queue",
                           labels, queue.consumer_count)
            yield (MEMORY_QUEUED_BYTES, "Body bytes held by all queues", {},
                   broker.memory_used)
            yield (MEMORY_BLOCKED, "1 while publishers are blocked by the "
                   "memory high-water mark", {}, 1 if broker.blocked else 0)
            yield from _unsettled_samples(broker, clock())

        self.add_model_collector(read)
        self.add_model_collector(lambda: _unroutable_samples(broker), counters=True)
        self.add_model_collector(lambda: _entity_totals(broker), counters=True)

    def watch_conversions(self) -> None:
        """Cross-protocol conversions that carried a field the other protocol has no
        place for, by direction and the reserved name it went under
        (``translators.carried_counts``)."""

        def carried():
            for (direction, name), count in list(CARRIED.items()):
                yield ("amqp_gateway_lossy_conversions", "Messages converted across the "
                       "protocols that carried a field the other protocol cannot represent, "
                       "by direction and the reserved name it was carried under",
                       {"direction": direction, "carried": name}, count)

        self.add_model_collector(carried, counters=True)

    def watch_alerts(self, monitor: Any, remotes: Any = None) -> None:
        """The threshold alerts (``gateway.management.alerts``, and the per-remote ones of
        ``remote_alerts`` when forwarding is on): one sample per raised alert, and the
        alerts raised so far."""

        def active():
            for (alert, vhost, queue), _value in list(monitor.active.items()):
                yield ("amqp_gateway_alert_active", "1 while a queue is over an alert threshold "
                       "(management.alerts)", {"alert": alert, "vhost": vhost, "queue": queue}, 1)
            for (alert, remote), _value in list(remotes.active.items()) if remotes is not None else ():
                yield ("amqp_gateway_remote_alert_active", "1 while a forwarding remote is over "
                       "an alert threshold (management.alerts)", {"alert": alert, "remote": remote}, 1)

        def raised():
            for alert, count in monitor.raised_total.items():
                yield ("amqp_gateway_alerts_raised", "Threshold alerts raised so far, per alert",
                       {"alert": alert}, count)

        self.add_model_collector(active)
        self.add_model_collector(raised, counters=True)

    def watch_ledger(self, counts: Callable[[], dict[str, int]]) -> None:
        """The ledger writer's troubles since start, from ``counts()`` (plain ints kept by
        the edge): ``writer_restarts``, ``gaps`` (a writer died with records it had not
        written), ``records_lost`` (those records), ``chunks_dropped`` (a writer that
        could not keep up)."""

        def read():
            for key, value in counts().items():
                yield f"amqp_gateway_ledger_{key}", _LEDGER_COUNTS[key], {}, value

        self.add_model_collector(read, counters=True)

    def add_model_collector(self, read: Callable[[], Iterable[tuple[str, str, dict[str, str], float]]],
                            *, counters: bool = False) -> None:
        """Register a scrape-time reader yielding ``(name, help, labels, value)``; with
        ``counters`` the values are totals since start (the name without ``_total``)."""
        family = CounterMetricFamily if counters else GaugeMetricFamily
        self.registry.register(_ModelCollector(read, family))

    def watch_forwarding(self, status: Callable[[], list[dict]]) -> None:
        """Per remote container: its state, outbox depth, bytes and oldest age, what is
        not sent yet, its credit and the publishers paused for it (``max_unsent``), and the
        forwarded / acked / retried / dead-lettered counts, from ``status()`` (the
        transfer service's accessor: a list of dicts) at scrape time."""

        def gauges():
            for remote in status():
                labels = {"remote": remote["container"]}
                for state in FORWARD_STATES:
                    yield (FORWARD_STATE, "1 for the state each remote's connection is in "
                           "(connecting, up, backing off, blocked by the remote's credit)",
                           {**labels, "state": state}, 1 if remote["state"] == state else 0)
                yield ("amqp_gateway_forward_outbox_messages",
                       "Messages in the outbox of each remote (waiting, retrying, in flight)",
                       labels, remote["outbox_depth"])
                yield ("amqp_gateway_forward_outbox_bytes", "Body bytes in each remote's outbox",
                       labels, remote["outbox_bytes"])
                yield ("amqp_gateway_forward_outbox_oldest_seconds",
                       "Age of the oldest message in each remote's outbox (0 when empty)",
                       labels, remote["outbox_oldest_age"] or 0.0)
                yield ("amqp_gateway_forward_unsent_messages",
                       "Messages in each remote's outbox not sent yet (retries aside)",
                       labels, remote["unsent"])
                yield ("amqp_gateway_forward_credit", "Messages each remote lets us send now "
                       "(its link credit, within the in-flight cap)", labels, remote["credit"])
                yield ("amqp_gateway_forward_publishers_paused",
                       "Publishing clients paused until each remote's unsent backlog is "
                       "down to half of max_unsent", labels, remote["publishers_paused"])

        def counters():
            for remote in status():
                labels = {"remote": remote["container"]}
                for key, doc in _FORWARD_COUNTS.items():
                    yield f"amqp_gateway_forward_{key}", doc, labels, remote[key]

        self.add_model_collector(gauges)
        self.add_model_collector(counters, counters=True)

    def watch_backends(self, status: Callable[[], list[dict]]) -> None:
        """Edge mode, per backend and node: its state (1 for the state it is in), the
        proxied connections on it, its last error (as a label of an info gauge), and per
        backend the connections it refused and lost, from ``status()`` (``Backends``'
        accessor) at scrape time."""

        def gauges():
            for backend in status():
                for node in backend["nodes"]:
                    labels = {"backend": backend["name"], "node": node["node"]}
                    for state in BACKEND_NODE_STATES:
                        yield (BACKEND_NODE_STATE, "1 for the state each backend node is in (up: the "
                               "last connection opened; down: it failed or was lost; unknown: not "
                               "tried yet)", {**labels, "state": state}, 1 if node["state"] == state else 0)
                    yield ("amqp_gateway_backend_connections", "Proxied client connections carried "
                           "to each backend node now", labels, node["connections"])
                    if node["last_error"]:
                        yield ("amqp_gateway_backend_last_error_info", "The last error of each backend "
                               "node (the label; the value is always 1)",
                               {**labels, "error": node["last_error"][:200]}, 1)
                yield ("amqp_gateway_backend_up", "1 while some node of each backend is up",
                       {"backend": backend["name"]}, 1 if backend["state"] == "up" else 0)

        def counters():
            for backend in status():
                labels = {"backend": backend["name"]}
                yield ("amqp_gateway_backend_refused", "Client connections each backend refused (a "
                       "login or vhost)", labels, backend["refused"])
                yield ("amqp_gateway_backend_lost", "Open backend connections lost (each closed its "
                       "client's connection)", labels, backend["lost"])

        self.add_model_collector(gauges)
        self.add_model_collector(counters, counters=True)

    def watch_store(self, store: Any, broker: Any, free_disk: Callable[[], Any] = lambda: None) -> None:
        """Store size, messages and bytes stored, commit batches, syncs, failures and
        commit latency, what left memory, free disk space and the resource alarms, read
        at scrape time. ``free_disk()`` returns the last free-space figure (or None)."""
        self.registry.register(_StoreCollector(store, broker, free_disk))

    def render(self) -> bytes:
        """The text exposition format of everything registered."""
        return generate_latest(self.registry)


#: RabbitMQ's ``rabbitmq_global_messages_unroutable_{dropped,returned}_total``, same meaning
_UNROUTABLE_HELP = {
    "dropped": "Messages published with no queue to take them and dropped: 0-9-1 without "
               "mandatory, 1.0 settled accepted (or sent pre-settled), per protocol",
    "returned": "Messages published with no queue to take them and returned to the "
                "publisher: 0-9-1 basic.return (mandatory), 1.0 released or rejected, "
                "per protocol",
}


def _unroutable_samples(broker) -> Iterable[tuple[str, str, dict[str, str], float]]:
    for kind, protocol, count in broker.unroutable.samples():
        yield (f"amqp_gateway_messages_unroutable_{kind}", _UNROUTABLE_HELP[kind],
               {"protocol": protocol}, count)


_LEDGER_COUNTS = {
    "writer_restarts": "Times the ledger writer process died and was started again",
    "gaps": "Gaps in the ledger: a writer process died with records it had not written "
            "(each is a gap record in the ledger and an alert)",
    "records_lost": "Ledger records lost in gaps (sent to a writer that died before it "
                    "acknowledged them as written)",
    "chunks_dropped": "Chunks of ledger records dropped because the writer process could "
                      "not keep up",
    "records_sent": "Ledger records handed to the writer process (any of its lives)",
}

BACKEND_NODE_STATE = "amqp_gateway_backend_node_state"
BACKEND_NODE_STATES = ("up", "down", "unknown")
FORWARD_STATE = "amqp_gateway_forward_state"
FORWARD_STATES = ("connecting", "up", "backing off", "blocked")
_FORWARD_COUNTS = {
    "forwarded": "Messages sent to each remote (a retry counts again)",
    "acked": "Messages each remote accepted (removed from the outbox)",
    "retried": "Messages each remote released, to be sent again after a backoff",
    "dead_lettered": "Messages each remote rejected (or released too often), moved to "
                     "forward.dead-letter.<remote>",
}

#: (attribute of the queue, metric name without ``_total``, help)
_QUEUE_TOTALS = (
    ("published", "amqp_gateway_queue_messages_published",
     "Messages that entered the queue (from any exchange, either protocol)"),
    ("delivered", "amqp_gateway_queue_messages_delivered",
     "Deliveries to consumers and basic.get, any acknowledgement mode, redeliveries included "
     "(RabbitMQ counts these as delivered, delivered_ack, get and get_ack)"),
    ("acked", "amqp_gateway_queue_messages_acked",
     "Deliveries settled as done: 0-9-1 ack, 1.0 accepted, or automatic acknowledgement"),
)

#: ages (seconds) for ``amqp_gateway_deliveries_unsettled_older_than``
UNSETTLED_AGES = (60, 300, 1800)


def _entity_totals(broker) -> Iterable[tuple[str, str, dict[str, str], float]]:
    for vhost in broker.vhosts.values():
        for queue in list(vhost.queues.values()):
            labels = {"vhost": vhost.name, "queue": queue.name}
            for attribute, name, doc in _QUEUE_TOTALS:
                yield name, doc, labels, getattr(queue.entries, attribute)  # its moves, counted
        for exchange in list(vhost.exchanges.values()):
            yield ("amqp_gateway_exchange_messages_published",
                   "Messages published to the exchange (the default exchange's name is empty)",
                   {"vhost": vhost.name, "exchange": exchange.name}, exchange.published_in)


def _unsettled_samples(broker, now: float) -> Iterable[tuple[str, str, dict[str, str], float]]:
    counts = dict.fromkeys(UNSETTLED_AGES, 0)
    for vhost in broker.vhosts.values():
        for queue in list(vhost.queues.values()):
            if queue.acquired_count:
                for age in UNSETTLED_AGES:
                    counts[age] += queue.unsettled_since(now - age)
    for age, count in counts.items():
        yield ("amqp_gateway_deliveries_unsettled_older_than",
               "Deliveries (0-9-1 unacked, 1.0 unsettled) still unsettled after this many "
               "seconds, all queues", {"seconds": str(age)}, count)


class Sample(NamedTuple):
    name: str
    labels: dict[str, str]
    value: float


def parse_exposition(text: str) -> list[Sample]:
    """Every sample of a ``/metrics`` page (counters keep their ``_total`` suffix); read by
    ``amqp-gateway status``. Raises ``ValueError`` on text that is not the format."""
    return [Sample(s.name, dict(s.labels), s.value)
            for family in text_string_to_metric_families(text) for s in family.samples]


#: the label the supervisor of ``workers: N`` adds to each worker's samples
WORKER_LABEL = "worker"


class _Families:
    """Metric families given once, for ``generate_latest``."""

    def __init__(self, families: Iterable[Any]) -> None:
        self._families = list(families)

    def collect(self):  # prometheus_client collector protocol
        return self._families


class SupervisorMetrics:
    """The parent's page under ``workers: N``: every worker's samples with a ``worker``
    label (read from the workers' own pages at each scrape), and the supervisor's
    gauges: how many workers, which answered this scrape, how often each was restarted.

    Why one merged page: the workers share the AMQP ports, and a metrics port shared the
    same way would answer each scrape from a random worker; per-worker series summed with
    ``sum without (worker)`` give the gateway's totals."""

    def __init__(self, workers: int) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        Gauge("amqp_gateway_workers", "Gateway processes the supervisor runs (workers: N)",
              registry=self.registry).set(workers)
        Gauge(BUILD_INFO, "The gateway's version and Python's (always 1)",
              ["version", "python"], registry=self.registry).labels(
            __version__, platform.python_version()).set(1)

    def render(self, pages: dict[str, bytes | None], restarts: dict[str, int]) -> bytes:
        """``pages``: each worker's page by its number (None: it did not answer)."""
        merged: dict[str, Any] = {}
        for worker, page in pages.items():
            if page is None:
                continue
            for family in text_string_to_metric_families(page.decode("utf-8", "replace")):
                if family.name == BUILD_INFO:
                    continue        # the supervisor's own, once
                into = merged.get(family.name)
                if into is None:
                    into = merged[family.name] = type(family)(family.name, family.documentation,
                                                              family.type, family.unit)
                for s in family.samples:
                    into.add_sample(s.name, {**s.labels, WORKER_LABEL: worker}, s.value,
                                    s.timestamp, s.exemplar)
        up = GaugeMetricFamily("amqp_gateway_worker_up", "1 when the worker answered this "
                               "scrape, 0 when it did not (dead, restarting or hung)",
                               labels=[WORKER_LABEL])
        restarted = CounterMetricFamily("amqp_gateway_worker_restarts", "Times the supervisor "
                                        "restarted the worker after it died", labels=[WORKER_LABEL])
        for worker in pages:
            up.add_metric([worker], 0 if pages[worker] is None else 1)
            restarted.add_metric([worker], restarts.get(worker, 0))
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families([*merged.values(), up, restarted]))
        return generate_latest(self.registry) + generate_latest(registry)
