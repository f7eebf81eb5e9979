"""``amqp-gateway``: run | check-config | hash-password.

``check-config`` (and ``run``, before starting anything) also builds every endpoint, loads
every TLS file and checks that the state and ledger directories are usable, so those
problems are config errors naming the key and its line, never a traceback.

Exit status: 0 success (including a graceful stop on SIGTERM/SIGINT), 1 a runtime
failure (for example a port already in use), 2 an invalid configuration or usage, or a
store file that cannot be used (damaged, unreadable, locked by another gateway, of an
unknown version: the message names the file, the problem and what to do).
"""
from __future__ import annotations

import argparse
import gc
import getpass
import logging
import os
import signal
import sys
from typing import Sequence

from gateway.config import (
    ConfigError, GatewayConfig, directory_problem, line_of, load_config, parse_host_port,
)

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
        _check_directories(cfg)
    except ConfigError as exc:
        print(f"amqp-gateway: invalid config: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    print(f"{path}: ok ({len(cfg.listeners)} listener(s), {len(cfg.users)} user(s))")
    return EXIT_OK


def _check_endpoints(cfg: GatewayConfig, *, overridden: bool = False) -> None:
    """Build every endpoint and load every TLS file, binding nothing.

    Errors name the listener setting and its line in the file. ``overridden``: the
    listeners come from ``--listen`` with the file's first entry as their template, so
    TLS problems are that entry's and endpoint problems are the command line's."""
    from twisted.internet import reactor

    from gateway.edge.listener import check_endpoint
    from gateway.edge.tls import TlsError
    from gateway.service import tls_server_for

    def fail(key_path: str, message: str, in_file: bool = True) -> ConfigError:
        line = line_of(cfg.source, key_path) if cfg.source and in_file else 0
        return ConfigError(key_path, line, message, cfg.source)

    for i, listener in enumerate(cfg.listeners):
        entry = "listeners[0]" if overridden else f"listeners[{i}]"
        try:
            check_endpoint(reactor, listener)
        except Exception as exc:  # noqa: BLE001 - any failure to build is a config error
            if overridden:
                raise fail(f"--listen {listener.host}:{listener.port}",
                           f"cannot build endpoint: {exc}", in_file=False) from None
            raise fail(entry, f"cannot build endpoint: {exc}") from None
        try:
            tls_server_for(listener)
        except TlsError as exc:
            raise fail(f"{entry}.{exc.setting or 'tls'}", str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - OpenSSL errors, MemoryError: no traceback
            raise fail(f"{entry}.tls", f"cannot build the TLS context: "
                                       f"{type(exc).__name__}: {exc}") from None


def _check_directories(cfg: GatewayConfig) -> None:
    """The directories the gateway writes in must be directories it can create or write;
    otherwise starting would fail half-way with a traceback."""
    checks = [("state_dir", cfg.state_dir)]
    if cfg.store.enabled:
        if cfg.store.path:
            checks.append(("store.path", os.path.dirname(os.path.abspath(cfg.store.path))))
    if cfg.ledger.enabled:
        if cfg.ledger.directory:
            checks.append(("ledger.directory", cfg.ledger.directory))
        else:
            checks.append(("state_dir", os.path.join(cfg.state_dir, "ledger")))
    for key_path, directory in checks:
        problem = directory_problem(directory)
        if problem:
            line = line_of(cfg.source, key_path) if cfg.source else 0
            raise ConfigError(key_path, line, problem, cfg.source)


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


#: gen0, gen1, gen2 thresholds of the cyclic garbage collector while serving (CPython's
#: default is 700, 10, 10)
GC_THRESHOLDS = (700, 10, 1000)


def tune_garbage_collector() -> None:
    """Make full collections rare; keep what start-up allocated out of them.

    Why: under load a queue holds hundreds of thousands of messages, each a few tracked
    objects, and with CPython's default thresholds a full collection walks all of them
    every few tens of thousands of allocations: measured, a third of the gateway's CPU
    on a 0-9-1 -> 0-9-1 run with a backlog (25k msgs/s -> 36k msgs/s with this). Messages
    and deliveries are freed by reference counting as before; only cyclic garbage (what a
    closed connection leaves) waits longer in the old generation, and the young
    generations are collected as usual. ``gc.freeze`` moves the objects of start-up
    (modules, config, the broker's tables) to the permanent generation.
    """
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


#: signals the gateway answers (stop gracefully, reload users)
HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def reset_inherited_signals() -> None:
    """Undo a parent's ignored or blocked SIGINT/SIGTERM/SIGHUP.

    Why: dispositions SIG_IGN and the blocked-signal mask survive exec. A gateway started
    from a shell's background job, nohup, or a test runner's worker would then ignore
    Ctrl-C or a stop request, and Twisted only installs its SIGINT handler when the
    current one is Python's default.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) == signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)


def run(args: argparse.Namespace) -> int:
    try:
        cfg = load_config(args.config).with_overrides(listen=args.listen, metrics=args.metrics)
    except ConfigError as exc:
        print(f"amqp-gateway: invalid config: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        _check_endpoints(cfg, overridden=bool(args.listen))
        _check_directories(cfg)
    except ConfigError as exc:
        print(f"amqp-gateway: invalid config: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    setup_logging(cfg.logging.level)
    _bridge_twisted_logging()
    from twisted.internet import reactor

    from gateway.edge.sockets import raise_open_files_limit
    from gateway.service import GatewayService

    from gateway.store import StoreUnusable

    try:
        svc = GatewayService(cfg, reactor)
    except StoreUnusable as exc:
        log.error("gateway refused to start: %s", exc)
        return EXIT_CONFIG
    except Exception as exc:  # noqa: BLE001 - e.g. a file changed since the checks above
        log.error("gateway failed to start: %s: %s", type(exc).__name__, exc)
        return EXIT_FAILURE
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
    raise_open_files_limit()
    tune_garbage_collector()
    reset_inherited_signals()
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
