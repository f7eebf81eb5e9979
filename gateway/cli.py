"""``amqp-gateway``: run | check-config | hash-password | ping | status | ctl | report.

``check-config`` (and ``run``, before starting anything) also builds every endpoint, loads
every TLS file and checks that the state and ledger directories are usable, so those
problems are config errors naming the key and its line, never a traceback; it reports
every problem it finds, one per line.

Exit status: 0 success (including a graceful stop on SIGTERM/SIGINT; ``ping``/``status``:
the gateway answered), 1 a runtime failure (a port already in use; the gateway did not
answer), 2 an invalid configuration or usage, or a store file that cannot be used (damaged,
unreadable, locked by another gateway, of an unknown version: the message names the file,
the problem and what to do).
"""
from __future__ import annotations

import argparse
import getpass
import logging
import os
import platform
import signal
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Sequence

from gateway.config import ConfigError, GatewayConfig, directory_problem, line_of, load_config, parse_host_port
from gateway.edge.process_logging import bridge_twisted_logging, setup_logging
from gateway.exit_status import EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, print_config_errors
from gateway.health.command import add_health_parsers, health_command
from gateway.interpreter_tuning import tune_garbage_collector, tune_thread_switching
from gateway.product import PRODUCT, __version__

if TYPE_CHECKING:
    from gateway.edge.workers import WorkerPlace

log = logging.getLogger("gateway")


def version_line() -> str:
    """``--version``: ours, and what a bug report needs beside it."""
    parts = [f"Python {platform.python_version()}"]
    for dist in ("Twisted", "python-qpid-proton", "pyOpenSSL"):
        try:
            parts.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            pass
    return f"{PRODUCT} {__version__} ({', '.join(parts)})"


def _host_port(text: str) -> tuple[str, int]:
    try:
        return parse_host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _PrintVersion(argparse.Action):
    """``--version`` on one line (argparse's own action wraps it to the terminal)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


def _iterations(text: str) -> int:
    from gateway.auth.passwords import MAX_ITERATIONS, MIN_ITERATIONS

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not MIN_ITERATIONS <= value <= MAX_ITERATIONS:
        raise argparse.ArgumentTypeError(
            f"{value} is outside {MIN_ITERATIONS}-{MAX_ITERATIONS} (SCRAM-SHA-256 needs at "
            f"least {MIN_ITERATIONS}, RFC 7677)")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="amqp-gateway", description="AMQP 0-9-1 / 1.0 gateway")
    p.add_argument("--version", action=_PrintVersion, nargs=0, help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the gateway")
    run.add_argument("--config", required=True, help="YAML config file")
    run.add_argument("--listen", action="append", type=_host_port, metavar="HOST:PORT",
                     help="listen here instead of the config's listeners (repeatable; port 0 picks one)")
    run.add_argument("--metrics", type=_host_port, metavar="HOST:PORT",
                     help="serve metrics here instead of the config's address")
    run.add_argument("--management", type=_host_port, metavar="HOST:PORT",
                     help="serve the management API and dashboard here (turns them on)")
    # set by the supervisor of ``workers: N`` for each worker it starts (edge/workers.py)
    run.add_argument("--worker-id", type=int, help=argparse.SUPPRESS)
    run.add_argument("--worker-dir", help=argparse.SUPPRESS)
    run.add_argument("--worker-ports", type=lambda t: [int(p) for p in t.split(",") if p],
                     help=argparse.SUPPRESS)
    chk = sub.add_parser("check-config", help="validate a config file and exit")
    chk.add_argument("config")
    rp = sub.add_parser("report", help="PySpark traffic report over ledger directories",
                        add_help=False)
    rp.add_argument("args", nargs=argparse.REMAINDER)
    hp = sub.add_parser("hash-password", help="print a password hash for the config's users")
    hp.add_argument("--password-stdin", action="store_true",
                    help="read the password from standard input instead of prompting")
    hp.add_argument("--iterations", type=_iterations, default=None,
                    help="PBKDF2 iterations (default 4096, RabbitMQ's and RFC 7677's)")
    add_health_parsers(sub)
    from gateway.ctl import add_ctl_parser

    add_ctl_parser(sub)
    return p


def check_config(path: str) -> int:
    try:
        cfg = load_config(path)
        check_loaded_config(cfg)
    except ConfigError as exc:
        print_config_errors(exc)
        return EXIT_CONFIG
    for warning in cfg.warnings:
        print(f"amqp-gateway: warning: {warning}", file=sys.stderr)
    print(f"{path}: ok ({len(cfg.listeners)} listener(s), {len(cfg.users)} user(s))")
    return EXIT_OK


def check_loaded_config(cfg: GatewayConfig, *, overridden: bool = False) -> None:
    """Endpoints, TLS files and directories: raises one ``ConfigError`` holding every
    problem found."""
    problems = _endpoint_problems(cfg, overridden=overridden) + _directory_problems(cfg)
    if problems:
        raise ConfigError.collected(problems)


def _endpoint_problems(cfg: GatewayConfig, *, overridden: bool = False) -> list[ConfigError]:
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

    problems: list[ConfigError] = []
    for i, listener in enumerate(cfg.listeners):
        entry = "listeners[0]" if overridden else f"listeners[{i}]"
        try:
            check_endpoint(reactor, listener)
        except Exception as exc:  # noqa: BLE001 - any failure to build is a config error
            if overridden:
                problems.append(fail(f"--listen {listener.host}:{listener.port}",
                                     f"cannot build endpoint: {exc}", in_file=False))
            else:
                problems.append(fail(entry, f"cannot build endpoint: {exc}"))
        if overridden and i > 0:
            continue  # the same TLS material as the first: said once
        try:
            tls_server_for(listener)
        except TlsError as exc:
            problems.append(fail(f"{entry}.{exc.setting or 'tls'}", str(exc)))
        except Exception as exc:  # noqa: BLE001 - OpenSSL errors, MemoryError: no traceback
            problems.append(fail(f"{entry}.tls", f"cannot build the TLS context: "
                                                 f"{type(exc).__name__}: {exc}"))
    return problems


def _directory_problems(cfg: GatewayConfig) -> list[ConfigError]:
    """The directories the gateway writes in must be directories it can create or write;
    otherwise starting would fail half-way with a traceback."""
    checks = [("state_dir", cfg.state_dir)]
    if cfg.store.enabled:
        if cfg.store.path:
            checks.append(("store.path", os.path.dirname(os.path.abspath(cfg.store.path))))
    if cfg.ledger.enabled:
        from gateway.edge.ledger_outlet import ledger_directory

        checks.append(("ledger.directory" if cfg.ledger.directory else "state_dir", ledger_directory(cfg)))
    problems = []
    for key_path, directory in checks:
        problem = directory_problem(directory)
        if problem:
            line = line_of(cfg.source, key_path) if cfg.source else 0
            problems.append(ConfigError(key_path, line, problem, cfg.source))
    return problems


def hash_password_command(args: argparse.Namespace) -> int:
    """Errors are one line: no terminal to ask on, input ended, Ctrl-C, empty password."""
    from gateway.auth import hash_password

    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        try:
            with open("/dev/tty"):
                pass
        except OSError:
            print("amqp-gateway: no terminal to ask for the password on; "
                  "give it on standard input with --password-stdin", file=sys.stderr)
            return EXIT_CONFIG
        try:
            password = getpass.getpass("Password: ")
            again = getpass.getpass("Again: ")
        except (EOFError, KeyboardInterrupt):
            print("\namqp-gateway: no password given", file=sys.stderr)
            return EXIT_CONFIG
        if again != password:
            print("amqp-gateway: passwords differ", file=sys.stderr)
            return EXIT_CONFIG
    if not password:
        print("amqp-gateway: empty password", file=sys.stderr)
        return EXIT_CONFIG
    kwargs = {"iterations": args.iterations} if args.iterations else {}
    print(hash_password(password, **kwargs))
    return EXIT_OK


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


def run_config(args: argparse.Namespace) -> tuple[GatewayConfig, "WorkerPlace | None"]:
    """``run``'s config and, in a worker of ``workers: N``, its place: the file with
    ``--listen``/``--metrics``/``--management`` applied (and the worker's share), then
    checked (endpoints, TLS files, directories); raises ``ConfigError``.

    The tests' in-process gateway (``tests/support/in_process_gateway.py``) builds its
    config here too, so that it is the gateway this command runs."""
    place = None
    cfg = load_config(args.config).with_overrides(listen=args.listen, metrics=args.metrics,
                                                 management=args.management)
    if args.worker_id:
        from gateway.edge.workers import WorkerPlace, worker_config

        place = WorkerPlace(args.worker_id, args.worker_dir)
        cfg = worker_config(cfg, place, args.worker_ports)
    check_loaded_config(cfg, overridden=bool(args.listen))
    return cfg, place


def log_config_warnings(cfg: GatewayConfig) -> None:
    """What the config allows but an operator should hear about, once logging is set up."""
    for warning in cfg.warnings:
        log.warning("config: %s", warning)


def run(args: argparse.Namespace) -> int:
    from gateway.config.workers import worker_count

    try:
        cfg, place = run_config(args)
    except ConfigError as exc:
        print_config_errors(exc)
        return EXIT_CONFIG
    setup_logging(cfg.logging.level, cfg.logging.format, place.number if place else None)
    bridge_twisted_logging()
    log_config_warnings(cfg)
    from twisted.internet import reactor

    count = worker_count(cfg.workers)
    if place is None and count > 1:
        from gateway.edge.supervisor_service import SupervisorService

        return _serve(reactor, SupervisorService(cfg, reactor, count, _run_args(args)), cfg, args)
    from gateway.service import GatewayService

    from gateway.store import StoreUnusable

    try:
        svc = GatewayService(cfg, reactor, worker=place)
    except StoreUnusable as exc:
        log.error("gateway refused to start: %s", exc)
        return EXIT_CONFIG
    except Exception as exc:  # noqa: BLE001 - e.g. a file changed since the checks above
        log.error("gateway failed to start: %s: %s", type(exc).__name__, exc)
        return EXIT_FAILURE
    if place is not None:
        from gateway.edge.workers import ParentLink

        ParentLink(reactor, reactor.stop).start()
    return _serve(reactor, svc, cfg, args)


def _run_args(args: argparse.Namespace) -> list[str]:
    """``run`` and the options this process got, for its workers."""
    out = ["run", "--config", args.config]
    for host, port in args.listen or ():
        out += ["--listen", f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    for option in ("metrics", "management"):
        address = getattr(args, option)
        if address:
            out += [f"--{option}", f"{address[0]}:{address[1]}"]
    return out


def _serve(reactor, svc, cfg: GatewayConfig, args: argparse.Namespace) -> int:
    """Run ``svc`` (a gateway, or the supervisor of its workers) until it is stopped;
    the exit status."""
    from gateway.edge.sockets import raise_open_files_limit

    outcome = {"status": EXIT_OK}

    def failed(failure):
        from gateway.edge.ports import PortUnavailable
        from gateway.edge.supervisor import WorkerStartFailed

        exc = failure.value
        if isinstance(exc, PortUnavailable):
            overridden = bool(exc.role.option and getattr(args, exc.role.option, None))
            line = 0 if overridden or not cfg.source else line_of(cfg.source, exc.key_path)
            log.error("%s", exc.describe(cfg.source, line, overridden))
            outcome["status"] = EXIT_FAILURE
        elif isinstance(exc, WorkerStartFailed):
            log.error("gateway failed to start: %s", exc)
            outcome["status"] = exc.status
        else:
            log.error("gateway failed to start: %s", failure.getErrorMessage())
            outcome["status"] = EXIT_FAILURE
        reactor.stop()

    def startup():
        svc.start().addErrback(failed)

    def stopped(status):
        if isinstance(status, int) and outcome["status"] == EXIT_OK:
            outcome["status"] = status

    def on_sighup(signum, frame):
        reactor.callFromThread(svc.reload)

    reactor.callWhenRunning(startup)
    raise_open_files_limit()
    tune_garbage_collector()
    tune_thread_switching()
    reset_inherited_signals()
    reactor.addSystemEventTrigger("before", "shutdown", lambda: svc.stop().addCallback(stopped))
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
    if args.command in ("ping", "status"):
        return health_command(args)
    if args.command == "ctl":
        from gateway.ctl import ctl_command

        return ctl_command(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
