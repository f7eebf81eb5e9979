"""The bound listeners as the health checks name them (RabbitMQ's protocol names:
``amqp``, ``amqp/ssl``, ``http``, ``http/prometheus``), with the dates of a TLS listener's
certificates, read from the ports Twisted bound."""
from __future__ import annotations

from typing import Any, Iterable, Optional

from gateway.config import ListenerConfig, TlsMode
from gateway.edge.certificate_dates import expiries
from gateway.management.api_facts import ListenerFact

__all__ = ["listener_facts"]


def listener_facts(listeners: Iterable[tuple[ListenerConfig, Any]], metrics_port: Optional[Any],
                   management_port: Optional[Any]) -> list[ListenerFact]:
    """``listeners``: each AMQP listener's config with its bound port; the HTTP ports when
    bound (None otherwise). A ``tls: auto`` listener serves both ``amqp`` and ``amqp/ssl``."""
    facts = []
    for listener, port in listeners:
        addr = port.getHost()
        if listener.tls is not TlsMode.ON:
            facts.append(ListenerFact("amqp", addr.host, addr.port))
        if listener.tls is not TlsMode.OFF:
            facts.append(ListenerFact(
                "amqp/ssl", addr.host, addr.port, listener.tls_cert_file, listener.tls_ca_file,
                expiries(listener.tls_cert_file), expiries(listener.tls_ca_file)))
    for protocol, port in (("http/prometheus", metrics_port), ("http", management_port)):
        if port is not None:
            facts.append(ListenerFact(protocol, port.getHost().host, port.getHost().port))
    return facts
