"""``ping`` and ``status``: their arguments and the commands (``amqp-gateway ping|status``).

``ping`` exits 0 when the AMQP listener answers as amqp-gateway; ``status`` adds the
figures of the metrics page. Which gateway is asked: ``--url``, ``--config`` (or
``$AMQP_GATEWAY_CONFIG``'s file), with ``--host``/``--port`` over either."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from gateway.config import CONFIG_ENV, ConfigError, load_config
from gateway.exit_status import EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, print_config_errors

__all__ = ["add_health_parsers", "health_command"]


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be greater than 0")
    return value


def _add_target_arguments(cmd: argparse.ArgumentParser, *, metrics: bool) -> None:
    from gateway.health import DEFAULT_METRICS_URL, DEFAULT_URL

    where = cmd.add_mutually_exclusive_group()
    where.add_argument("--url", help=f"amqp://HOST:PORT or amqps://HOST:PORT (default: "
                                     f"${CONFIG_ENV}'s config, else {DEFAULT_URL})")
    where.add_argument("--config", metavar="FILE",
                       help=f"ask the first listener (and metrics address) of this config file "
                            f"(default ${CONFIG_ENV})")
    cmd.add_argument("--host", help="the gateway's host (with the default port, or --port)")
    cmd.add_argument("--port", type=int, help="the gateway's AMQP port")
    cmd.add_argument("--timeout", type=_positive_number, default=5.0, metavar="SECONDS",
                     help="give up after this long (default 5)")
    cmd.add_argument("--cacert", metavar="FILE",
                     help="verify a TLS listener's certificate against this CA file")
    if metrics:
        cmd.add_argument("--metrics-url", metavar="URL",
                         help=f"the metrics page (default: the config's, else port 9419 of the "
                              f"gateway's host, {DEFAULT_METRICS_URL} for the default gateway)")


def add_health_parsers(sub: Any) -> None:
    """The ``ping`` and ``status`` subcommands of the CLI's parser."""
    ping = sub.add_parser("ping", help="exit 0 when the gateway answers AMQP (health checks)")
    _add_target_arguments(ping, metrics=False)
    st = sub.add_parser("status", help="what a running gateway is and is doing")
    _add_target_arguments(st, metrics=True)


def _target(args: argparse.Namespace) -> Any:
    """The gateway ``ping``/``status`` ask; raises ``TargetError`` or ``ConfigError``."""
    from dataclasses import replace

    from gateway.health import DEFAULT_URL, target_from_config, target_from_url

    metrics_url = getattr(args, "metrics_url", None)
    config_path = args.config or (None if args.url else os.environ.get(CONFIG_ENV) or None)
    if config_path:
        target = target_from_config(load_config(config_path))
        if metrics_url:
            target = replace(target, metrics_url=metrics_url)
    else:
        target = target_from_url(args.url or DEFAULT_URL, metrics_url)
    if args.host:
        target = replace(target, host=args.host)
    if args.port is not None:
        if not 0 < args.port < 65536:
            from gateway.health import TargetError

            raise TargetError(f"--port {args.port} is not a port (1-65535)")
        target = replace(target, port=args.port)
    return target


def health_command(args: argparse.Namespace) -> int:
    """``ping``: one line, exit 0 when the AMQP listener answers as amqp-gateway.
    ``status``: that line and the figures of the metrics page; exit 1 when either does
    not answer, or answers as something else (a RabbitMQ on the default port)."""
    from gateway.health import MetricsPage, ProbeFailed, TargetError, amqp_handshake, render_status
    from gateway.health.status import listener_mismatch
    from gateway.product import names_us

    try:
        target = _target(args)
    except ConfigError as exc:
        print_config_errors(exc)
        return EXIT_CONFIG
    except TargetError as exc:
        print(f"amqp-gateway {args.command}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        reply = amqp_handshake(target, args.timeout, args.cacert)
    except ProbeFailed as exc:
        print(f"amqp-gateway {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except OSError as exc:  # an unreadable --cacert
        print(f"amqp-gateway {args.command}: --cacert {args.cacert}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_CONFIG
    if not names_us(reply.product, reply.information):
        print(f"amqp-gateway {args.command}: {target.address} answered as {reply.who}, which is "
              f"not amqp-gateway: give the gateway's address with --config FILE (or "
              f"${CONFIG_ENV}) or --url", file=sys.stderr)
        return EXIT_FAILURE
    if args.command == "ping":
        print(f"{target.address}: {reply.who} answered in {reply.elapsed * 1000:.0f} ms")
        return EXIT_OK
    figures, problem, status = None, None, EXIT_OK
    if target.metrics_url is None:
        problem, source = "the metrics page is disabled in the config (metrics.enabled)", "-"
    else:
        page = MetricsPage(target.metrics_url)
        source = page.description
        try:
            figures = page.figures(args.timeout)
        except ProbeFailed as exc:
            problem, status = str(exc), EXIT_FAILURE
        else:
            problem = listener_mismatch(target, figures)
            if problem is not None:
                figures, status = None, EXIT_FAILURE
    for line in render_status(target, reply, figures, source, problem):
        print(line)
    return status
