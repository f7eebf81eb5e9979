from gateway.broker import Broker, DestinationKind, Encoding, MessageContainer
from gateway.metrics import GatewayMetrics


def test_model_gauges_are_read_at_scrape_time():
    broker = Broker(container_id="t")
    metrics = GatewayMetrics()
    metrics.watch_broker(broker)
    vhost = broker.vhost("/")
    vhost.declare_queue("q1")
    for i in range(3):
        vhost.publish("", "q1", MessageContainer(Encoding.AMQP091, (b"", b"x" * 10), size=10), 0.0)
    text = metrics.render().decode()
    assert 'amqp_gateway_queue_messages_ready{queue="q1",vhost="/"} 3.0' in text
    assert 'amqp_gateway_queue_messages_unacked{queue="q1",vhost="/"} 0.0' in text
    assert 'amqp_gateway_queue_consumers{queue="q1",vhost="/"} 0.0' in text
    assert "amqp_gateway_memory_queued_bytes 30.0" in text
    assert "amqp_gateway_memory_blocked 0.0" in text
    vhost.purge_queue("q1")
    assert 'amqp_gateway_queue_messages_ready{queue="q1",vhost="/"} 0.0' in metrics.render().decode()


def test_connection_counters():
    m = GatewayMetrics()
    m.connections_accepted.labels("amqp10").inc()
    m.sniff_failures.labels("timeout").inc(2)
    text = m.render().decode()
    assert 'amqp_gateway_connections_accepted_total{protocol="amqp10"} 1.0' in text
    assert 'amqp_gateway_sniff_failures_total{reason="timeout"} 2.0' in text


def test_unroutable_counters_are_read_at_scrape_time():
    broker = Broker(container_id="t")
    metrics = GatewayMetrics()
    metrics.watch_broker(broker)
    text = metrics.render().decode()
    assert "# TYPE amqp_gateway_messages_unroutable_dropped_total counter" in text
    assert 'amqp_gateway_messages_unroutable_returned_total{protocol="amqp10"} 0.0' in text
    broker.unroutable.dropped_amqp091 += 2
    broker.unroutable.returned_amqp10 += 1
    text = metrics.render().decode()
    assert 'amqp_gateway_messages_unroutable_dropped_total{protocol="amqp091"} 2.0' in text
    assert 'amqp_gateway_messages_unroutable_dropped_total{protocol="amqp10"} 0.0' in text
    assert 'amqp_gateway_messages_unroutable_returned_total{protocol="amqp10"} 1.0' in text


def test_store_metrics_are_read_at_scrape_time(tmp_path):
    from gateway.store_codecs import load_stored_message
    from tests.support.store_loop import ManualLoop, commit_now, open_test_store

    loop = ManualLoop()
    store = open_test_store(str(tmp_path), loop)
    try:
        broker = Broker(container_id="t", store=store, message_loader=load_stored_message)
        metrics = GatewayMetrics()
        metrics.watch_store(store, broker, lambda: 12345)
        vhost = broker.vhost("/")
        vhost.declare_queue("dq", durable=True)
        for _ in range(3):
            vhost.publish("", "dq", MessageContainer(Encoding.AMQP091, (b"\x10\x00\x02", b"x" * 10),
                                                     durable=True, size=10), 0.0)
        commit_now(store, loop)
        broker.gate.set_alarm("disk", "low")
        text = metrics.render().decode()
        assert "amqp_gateway_store_messages 3.0" in text
        assert "amqp_gateway_store_message_bytes 30.0" in text
        assert "amqp_gateway_store_commit_batches_total 1.0" in text
        assert "amqp_gateway_store_syncs_total 1.0" in text
        assert "amqp_gateway_store_operations_total 7.0" in text  # queue + 3 messages + 3 entries
        assert 'amqp_gateway_store_commit_latency_seconds_bucket{le="+Inf"} 1.0' in text
        assert "amqp_gateway_store_commit_latency_seconds_count 1.0" in text
        assert "amqp_gateway_disk_free_bytes 12345.0" in text
        assert 'amqp_gateway_alarm{alarm="disk"} 1.0' in text and 'amqp_gateway_alarm{alarm="store"} 0.0' in text
        size = [line for line in text.splitlines() if line.startswith("amqp_gateway_store_size_bytes ")]
        assert size and float(size[0].split()[1]) > 0
    finally:
        store.close()


class _Consumer:
    """A consumer with room for ``credit`` deliveries, keeping what it is given."""

    exclusive = False
    acquires = True
    tag = "c1"

    def __init__(self, credit: int) -> None:
        from gateway.broker import CreditWindow

        self.credit = CreditWindow(credit)
        self.entries: list = []

    def deliver(self, entry, now: float) -> None:
        self.entries.append(entry)

    def cancelled_by_broker(self, reason: str) -> None:
        pass


def _samples(metrics: GatewayMetrics) -> dict[tuple[str, tuple], float]:
    from gateway.metrics import parse_exposition

    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for s in parse_exposition(metrics.render().decode())}


def test_per_queue_and_exchange_totals_and_long_unsettled_deliveries():
    broker = Broker(container_id="t")
    now = [1000.0]
    metrics = GatewayMetrics()
    metrics.watch_broker(broker, lambda: now[0])
    vhost = broker.vhost("/")
    queue = vhost.declare_queue("q1")
    vhost.declare_exchange("x", "fanout")
    vhost.bind(DestinationKind.QUEUE, "q1", "x")
    for exchange in ("", "x", "x"):
        vhost.publish(exchange, "q1", MessageContainer(Encoding.AMQP091, (b"", b"m"), size=1), now[0])
    consumer = _Consumer(2)
    queue.add_consumer(consumer, now[0])          # two delivered at t=1000
    now[0] = 1100.0
    queue.settle(consumer.entries[0])
    got = queue.get(now[0], ack=True)             # the third, by basic.get at t=1100
    assert got is not None
    q = (("queue", "q1"), ("vhost", "/"))
    s = _samples(metrics)
    assert s[("amqp_gateway_queue_messages_published_total", q)] == 3
    assert s[("amqp_gateway_queue_messages_delivered_total", q)] == 3
    assert s[("amqp_gateway_queue_messages_acked_total", q)] == 1
    assert s[("amqp_gateway_queue_messages_unacked", q)] == 2
    assert s[("amqp_gateway_queue_messages", q)] == 2
    assert s[("amqp_gateway_exchange_messages_published_total", (("exchange", "x"), ("vhost", "/")))] == 2
    assert s[("amqp_gateway_exchange_messages_published_total", (("exchange", ""), ("vhost", "/")))] == 1
    # one delivery 100 s old (older than 60), the basic.get one just made
    assert s[("amqp_gateway_deliveries_unsettled_older_than", (("seconds", "60"),))] == 1
    assert s[("amqp_gateway_deliveries_unsettled_older_than", (("seconds", "300"),))] == 0
    now[0] = 1500.0
    s = _samples(metrics)
    assert s[("amqp_gateway_deliveries_unsettled_older_than", (("seconds", "300"),))] == 2
    assert s[("amqp_gateway_deliveries_unsettled_older_than", (("seconds", "1800"),))] == 0
