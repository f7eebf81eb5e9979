"""``amqp-gateway``: run | check-config | hash-password.

Exit status: 0 success (including a graceful stop on SIGTERM/SIGINT), 1 a runtime
failure (for example a port already in use), 2 an invalid configuration or usage.
"""
from __future__ import annotations

import argparse
import getpass
import logging
import signal
import sys
from typing import Sequence

from gateway.config import ConfigError, GatewayConfig, load_config, parse_host_port

log = logging.getLogger("gateway")

EXIT_OK, EXIT_FAILURE, EXIT_CONFIG = 0, 1, 2


def _host_port(text: str) -> tuple[str, int]:
    try:
        return parse_host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="amqp-gateway", description="AMQP 0-9-1 / 1.0 gateway")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the gateway")
    run.add_argument("--config", required=True, help="YAML config file")
    run.add_argument("--listen", action="append", type=_host_port, metavar="HOST:PORT",
                     help="listen here instead of the config's listeners (repeatable; port 0 picks one)")
    run.add_argument("--metrics", type=_host_port, metavar="HOST:PORT",
                     help="serve metrics here instead of the config's address")
    chk = sub.add_parser("check-config", help="validate a config file and exit")
    chk.add_argument("config")
    rp = sub.add_parser("report", help="PySpark traffic report over ledger directories",
                        add_help=False)
    rp.add_argument("args", nargs=argparse.REMAINDER)
    hp = sub.add_parser("hash-password", help="print a password hash for the config's users")
    hp.add_argument("--password-stdin", action="store_true",
                    help="read the password from standard input instead of prompting")
    hp.add_argument("--iterations", type=int, default=None)
    return p


def setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)


def _bridge_twisted_logging() -> None:
    from twisted.logger import STDLibLogObserver, globalLogBeginner

    globalLogBeginner.beginLoggingTo([STDLibLogObserver(name="twisted")], redirectStandardIO=False)


def check_config(path: str) -> int:
    try:
        cfg = load_config(path)
        _check_endpoints(cfg)
    except ConfigError as exc:
        print(f"amqp-gateway: invalid config: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    print(f"{path}: ok ({len(cfg.listeners)} listener(s), {len(cfg.users)} user(s))")
    return EXIT_OK


def _check_endpoints(cfg: GatewayConfig) -> None:
    """Build every endpoint and load every TLS file, binding nothing."""
    from twisted.internet import reactor

    from gateway.edge.listener import check_endpoint
    from gateway.edge.tls import TlsError
    from gateway.service import tls_server_for

    for i, listener in enumerate(cfg.listeners):
        try:
            check_endpoint(reactor, listener)
        except Exception as exc:  # noqa: BLE001 - any failure to build is a config error
            raise ConfigError(f"listeners[{i}]", 0, f"cannot build endpoint: {exc}", cfg.source) from None
        try:
            tls_server_for(listener)
        except TlsError as exc:
            raise ConfigError(f"listeners[{i}].tls", 0, str(exc), cfg.source) from None


def hash_password_command(args: argparse.Namespace) -> int:
    from gateway.auth import hash_password

    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != password:
            print("amqp-gateway: passwords differ", file=sys.stderr)
            return EXIT_CONFIG
    if not password:
        print("amqp-gateway: empty password", file=sys.stderr)
        return EXIT_CONFIG
    kwargs = {"iterations": args.iterations} if args.iterations else {}
    print(hash_password(password, **kwargs))
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    try:
        cfg = load_config(args.config).with_overrides(listen=args.listen, metrics=args.metrics)
    except ConfigError as exc:
        print(f"amqp-gateway: invalid config: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        _check_endpoints(cfg)
    except ConfigError as exc:
        print(f"amqp-gateway: invalid config: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    setup_logging(cfg.logging.level)
    _bridge_twisted_logging()
    from twisted.internet import reactor

    from gateway.service import GatewayService

    svc = GatewayService(cfg, reactor)
    outcome = {"status": EXIT_OK}

    def failed(failure):
        log.error("gateway failed to start: %s", failure.getErrorMessage())
        outcome["status"] = EXIT_FAILURE
        reactor.stop()

    def startup():
        svc.start().addErrback(failed)

    def on_sighup(signum, frame):
        reactor.callFromThread(svc.reload)

    reactor.callWhenRunning(startup)
    reactor.addSystemEventTrigger("before", "shutdown", svc.stop)
    signal.signal(signal.SIGHUP, on_sighup)
    reactor.run()
    return outcome["status"]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["report"]:
        # the report has its own argument parser (also used by spark-submit)
        from pipeline.cli import report_main

        return report_main(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "check-config":
        setup_logging("WARNING")
        return check_config(args.config)
    if args.command == "hash-password":
        return hash_password_command(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
