"""The brokers under test: a ``Target`` each, the gateway started on ephemeral ports and
the reference (a broker the user names, or a private RabbitMQ node).
"""
from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from typing import Optional

from bench.load_generators import _apt_install
from bench.reference import PrivateRabbit, ReferenceUnavailable, rabbit_installed, rabbit_version
from bench.report import GATEWAY, REFERENCE
from bench.workloads import ClientProtocol, Kind, Workload

log = logging.getLogger("bench")


@dataclass
class Target:
    """A broker under test.  A port of None means the protocol is not benchmarked there."""

    name: str                 # GATEWAY or REFERENCE
    label: str                # shown in the output, e.g. "RabbitMQ 3.10.8"
    host: str
    port091: Optional[int]
    port10: Optional[int]
    pid: Optional[int] = None  # for W6 (VmRSS); None: W6 is skipped
    user: str = "guest"
    password: str = "guest"

    def serves(self, w: Workload) -> bool:
        ports = {ClientProtocol.AMQP091: self.port091, ClientProtocol.AMQP10: self.port10}
        return bool(ports[w.producer] and ports[w.consumer]) and (w.kind is not Kind.IDLE or bool(self.pid))


def edge_config(host: str, port: int) -> str:
    """Edge mode: the vhost "/" proxied to the broker at ``host:port``, the clients' own
    credentials passed through (``--edge``)."""
    return ("vhosts:\n  - name: /\n    backend: reference\n"
            f"backends:\n  - name: reference\n    nodes: [\"{host}:{port}\"]\n"
            "    credentials: passthrough\n")


def _start_gateway(args: argparse.Namespace, stack: list, *, ledger: bool = True,
                   name: str = GATEWAY, label: str = "amqp-gateway",
                   backend: Optional[tuple[str, int]] = None) -> Optional[Target]:
    from tests.support.gateway_process import GatewayProcess, default_config
    extra = "" if ledger else "ledger:\n  enabled: false\n"
    if backend is not None:
        extra += edge_config(*backend)
        label += f" (edge mode -> {backend[0]}:{backend[1]})"
    try:
        gw = GatewayProcess(config_text=default_config(extra=extra)).start()
    except Exception as exc:  # the harness reports and goes on with the reference alone
        log.error("gateway did not start: %s", exc)
        return None
    stack.append(gw.stop)
    protos = {x.strip() for x in args.gateway_protocols.split(",")}
    return Target(name, label, gw.host, gw.amqp_port if "0-9-1" in protos else None,
                  gw.amqp_port if "1.0" in protos else None, gw.proc.pid if gw.proc else None)


def _start_reference(args: argparse.Namespace, stack: list) -> Optional[Target]:
    if args.reference or args.reference_amqp091 or args.reference_amqp10:
        a091 = args.reference_amqp091 or args.reference
        a10 = args.reference_amqp10 or args.reference
        host = (a091 or a10)[0]
        return Target(REFERENCE, f"reference {host}", host, a091[1] if a091 else None,
                      a10[1] if a10 else None, args.reference_pid, args.reference_user,
                      args.reference_password)
    if not rabbit_installed():
        _apt_install(("rabbitmq-server",))
    try:
        rabbit = PrivateRabbit().start()
    except ReferenceUnavailable as exc:
        log.error("no reference broker: %s", exc)
        return None
    stack.append(rabbit.stop)
    return Target(REFERENCE, f"RabbitMQ {rabbit_version()}", rabbit.host, rabbit.port, rabbit.port,
                  rabbit.os_pid())
