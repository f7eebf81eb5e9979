"""Which address ``ping``/``status`` ask (``gateway/health/target.py``)."""
from __future__ import annotations

import pytest

from gateway.config import load_config_text
from gateway.health import Target, TargetError, target_from_config, target_from_url


@pytest.mark.parametrize("url,expected", [
    ("amqp://127.0.0.1:5673", Target("127.0.0.1", 5673, False)),
    ("amqps://gw.example", Target("gw.example", 5671, True, "http://gw.example:9419/metrics")),
    ("amqp://[::1]/vhost", Target("::1", 5672, False, "http://[::1]:9419/metrics")),
    ("amqp://0.0.0.0:5672", Target("127.0.0.1", 5672, False)),
    ("localhost:5700", Target("localhost", 5700, False, "http://localhost:9419/metrics")),
])
def test_urls_and_the_metrics_page_on_the_same_host(url, expected):
    # a gateway elsewhere has its metrics page there, not on this machine's port 9419
    assert target_from_url(url) == expected


def test_a_given_metrics_url_wins():
    assert target_from_url("amqp://gw.example", "http://m:1/x").metrics_url == "http://m:1/x"


@pytest.mark.parametrize("url,words", [
    ("http://h:80", "the scheme must be amqp:// or amqps://"),
    ("amqp://h:99999", "out of range"),
    ("amqp://:5672", "names no host"),
])
def test_bad_urls(url, words):
    with pytest.raises(TargetError) as info:
        target_from_url(url)
    assert words in str(info.value)


def test_config_gives_the_first_plain_listener_on_loopback_and_the_metrics_page():
    cfg = load_config_text(
        "listeners:\n"
        "  - {host: 0.0.0.0, port: 5671, tls: on, tls_cert_file: /etc/hostname, tls_key_file: /etc/hostname}\n"
        "  - {host: '::', port: 5672, tls: auto, tls_cert_file: /etc/hostname, tls_key_file: /etc/hostname}\n"
        "metrics: {host: 0.0.0.0, port: 9500, path: /m}\n", "gw.yaml")
    assert target_from_config(cfg) == Target("::1", 5672, False, "http://127.0.0.1:9500/m")


def test_config_with_only_a_tls_listener_asks_over_tls_and_without_metrics():
    cfg = load_config_text(
        "listeners:\n"
        "  - {port: 5671, tls: on, tls_cert_file: /etc/hostname, tls_key_file: /etc/hostname}\n"
        "metrics: {enabled: false}\n", "gw.yaml")
    assert target_from_config(cfg) == Target("127.0.0.1", 5671, True, None)


def test_config_with_port_0_cannot_be_asked():
    with pytest.raises(TargetError) as info:
        target_from_config(load_config_text("listeners:\n  - port: 0\n", "gw.yaml"))
    assert "listeners[0].port is 0" in str(info.value) and "--port" in str(info.value)
