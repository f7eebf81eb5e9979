"""The operator's line for a port the gateway cannot bind (``gateway/edge/ports.py``)."""
from __future__ import annotations

import errno
import socket

import pytest
from twisted.internet import defer
from twisted.internet.error import CannotListenError

from gateway.edge.ports import (
    AMQP_LISTENER, MANAGEMENT_ENDPOINT, METRICS_ENDPOINT, PortUnavailable, listen_on,
)


def unavailable(role, code, host="127.0.0.1", port=5672, key="listeners[0].port"):
    error = CannotListenError(host, port, OSError(code, __import__("os").strerror(code)))
    return PortUnavailable(role, host, port, error, key)


def test_a_busy_amqp_port_names_the_address_the_likely_broker_and_both_remedies():
    line = unavailable(AMQP_LISTENER, errno.EADDRINUSE).describe("/etc/gw.yaml", 7)
    assert line == (
        "cannot listen for AMQP on 127.0.0.1:5672: the port is already in use, probably by "
        "another AMQP broker (RabbitMQ listens on 5672 and 5671, as do Qpid and Artemis) or a "
        "second amqp-gateway; choose another with --listen HOST:PORT or listeners[0].port "
        "(/etc/gw.yaml:7)")
    assert "\n" not in line


def test_an_address_from_the_command_line_is_moved_with_the_flag_only():
    line = unavailable(METRICS_ENDPOINT, errno.EADDRINUSE, port=9419,
                       key="metrics.port").describe("/etc/gw.yaml", 3, overridden=True)
    assert line.startswith("cannot listen for metrics on 127.0.0.1:9419: the port is already in use")
    assert "rabbitmq_exporter" in line
    assert line.endswith("; choose another with --metrics HOST:PORT")


def test_the_management_port_has_a_key_and_a_flag():
    line = unavailable(MANAGEMENT_ENDPOINT, errno.EADDRINUSE, port=15672,
                       key="management.port").describe("gw.yaml", 12)
    assert "RabbitMQ's management plugin (15672)" in line
    assert line.endswith("; choose another with --management HOST:PORT or management.port "
                         "(gw.yaml:12)")


@pytest.mark.parametrize("code,words", [
    (errno.EACCES, "ports below 1024 need CAP_NET_BIND_SERVICE"),
    (errno.EADDRNOTAVAIL, "no network interface of this host has the address 10.9.9.9"),
    (errno.EMFILE, "Too many open files"),
])
def test_other_bind_failures_say_what_they_are(code, words):
    line = unavailable(AMQP_LISTENER, code, host="10.9.9.9", port=80).describe()
    assert line.startswith("cannot listen for AMQP on 10.9.9.9:80: ")
    assert words in line


def test_an_ipv6_address_is_bracketed():
    assert "on [::1]:5672:" in unavailable(AMQP_LISTENER, errno.EADDRINUSE, host="::1").describe()


def test_listen_on_turns_a_real_bind_failure_into_port_unavailable():
    from twisted.internet import reactor
    from twisted.internet.endpoints import TCP4ServerEndpoint
    from twisted.internet.protocol import Factory

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        d = listen_on(TCP4ServerEndpoint(reactor, port, interface="127.0.0.1"), Factory(),
                      AMQP_LISTENER, "127.0.0.1", port, "listeners[0].port")
        failures = []
        d.addErrback(failures.append)
        assert failures, "the bind should have failed at once"
        exc = failures[0].value
        assert isinstance(exc, PortUnavailable)
        assert (exc.errno, exc.port, exc.key_path) == (errno.EADDRINUSE, port, "listeners[0].port")
    finally:
        holder.close()


def test_listen_on_passes_a_bound_port_through():
    d = listen_on(_Bound(), None, AMQP_LISTENER, "127.0.0.1", 1, "listeners[0].port")
    assert d.result == "port"


class _Bound:
    def listen(self, factory):
        return defer.succeed("port")
