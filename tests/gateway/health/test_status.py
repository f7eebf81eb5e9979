"""``status`` figures read back from the metrics page the gateway renders
(``gateway/health/status.py``)."""
from __future__ import annotations

from gateway.broker import Broker
from gateway.health import HandshakeReply, Target, render_status
from gateway.health.status import GatewayFigures, figures_from_samples, listener_mismatch
from gateway.metrics import GatewayMetrics, parse_exposition
from gateway.product import __version__


def test_figures_come_from_what_gateway_metrics_renders():
    broker = Broker(container_id="gw", vhosts=("/",))
    metrics = GatewayMetrics()
    metrics.watch_broker(broker)
    metrics.started(1_700_000_000.0)
    metrics.listening("amqp", "127.0.0.1", 5672, "off")
    metrics.listening("metrics", "::1", 9419, "off")
    metrics.connections_open.labels("amqp091").inc(2)
    metrics.connections_open.labels("amqp10").inc()
    metrics.connections_accepted.labels("amqp091").inc(5)
    vhost = broker.vhosts["/"]
    vhost.declare_queue("a")
    vhost.declare_queue("b")
    figures = figures_from_samples(parse_exposition(metrics.render().decode()))
    assert figures.version == __version__
    assert figures.started_at == 1_700_000_000.0
    assert figures.listeners == (("amqp", "127.0.0.1:5672", "off"), ("metrics", "[::1]:9419", "off"))
    assert figures.connections_open == {"amqp091": 2, "amqp10": 1}
    assert figures.connections_accepted == {"amqp091": 5}
    assert (figures.queues, figures.messages_ready, figures.messages_unacknowledged) == (2, 0, 0)
    assert figures.memory_blocked is False


def test_rendered_status_lines():
    reply = HandshakeReply("amqp-gateway", "1.2.3", "Python 3.11.2", ("PLAIN",), 0.004)
    figures = figures_from_samples(parse_exposition(
        "amqp_gateway_start_time_seconds 1000\n"
        'amqp_gateway_connections_open{protocol="amqp091"} 3\n'
        'amqp_gateway_connections_accepted_total{protocol="amqp091"} 7\n'
        'amqp_gateway_queue_messages_ready{vhost="/",queue="q1"} 5\n'
        'amqp_gateway_queue_messages_ready{vhost="/",queue="q2"} 1\n'
        'amqp_gateway_queue_messages_unacked{vhost="/",queue="q1"} 2\n'
        "amqp_gateway_memory_queued_bytes 600\n"
        "amqp_gateway_memory_blocked 1\n"))
    lines = render_status(Target("127.0.0.1", 5672), reply, figures, "http://m/metrics", None,
                          now=1000 + 3 * 3600 + 65)
    assert lines[0] == "amqp-gateway 1.2.3 answers on 127.0.0.1:5672 (AMQP 0-9-1, 4 ms; Python 3.11.2)"
    assert lines[1].startswith("uptime: 3h 01m 05s (since ")
    assert lines[2:] == [
        "connections: 3 open (amqp091 3); 7 accepted since start",
        "queues: 2; messages ready 6, unacknowledged 2; 600 body bytes held",
        "alarms: memory (publishers are blocked)",
        "source: http://m/metrics",
    ]


def test_without_figures_status_says_why():
    reply = HandshakeReply("amqp-gateway", "1.2.3", "Python 3.11.2", (), 0.001)
    lines = render_status(Target("h", 1), reply, None, "-", "the metrics page is disabled")
    assert lines[1:] == ["figures: the metrics page is disabled"]


def test_a_metrics_page_of_another_gateway_is_told_apart_by_its_amqp_ports():
    figures = GatewayFigures(version="1", listeners=(("amqp", "0.0.0.0:5673", "off"),
                                                     ("metrics", "127.0.0.1:9419", "off")))
    assert listener_mismatch(Target("127.0.0.1", 5673), figures) is None
    problem = listener_mismatch(Target("127.0.0.1", 5672), figures)
    assert problem is not None
    assert problem.startswith("the metrics page belongs to a gateway listening on 0.0.0.0:5673, "
                              "not on 127.0.0.1:5672")
    # a page that lists no listeners cannot be checked
    assert listener_mismatch(Target("127.0.0.1", 5672), GatewayFigures(version="1")) is None
