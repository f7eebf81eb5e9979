from gateway.broker import Broker, Encoding, MessageContainer
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
    assert 'amqp_gateway_queue_messages_unacknowledged{queue="q1",vhost="/"} 0.0' in text
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
