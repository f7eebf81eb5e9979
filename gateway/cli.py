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

from gateway.config import (
    CONFIG_ENV, ConfigError, GatewayConfig, directory_problem, line_of, load_config, parse_host_port,
)
from gateway.connection_log import TextFormatter, json_formatter
from gateway.interpreter_tuning import tune_garbage_collector, tune_thread_switching
from gateway.product import PRODUCT, __version__

if TYPE_CHECKING:
    from gateway.edge.workers import WorkerPlace

log = logging.getLogger("gateway")

EXIT_OK, EXIT_FAILURE, EXIT_CONFIG = 0, 1, 2


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


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be greater than 0")
    return value


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
    ping = sub.add_parser("ping", help="exit 0 when the gateway answers AMQP (health checks)")
    _add_target_arguments(ping, metrics=False)
    st = sub.add_parser("status", help="what a running gateway is and is doing")
    _add_target_arguments(st, metrics=True)
    from gateway.ctl import add_ctl_parser

    add_ctl_parser(sub)
    return p


def log_formatter(fmt: str = "text", worker: int | None = None) -> logging.Formatter:
    """``fmt``: ``text`` (``connection_log.TEXT_FORMAT``) or ``json``: one object per line
    with ``time`` (ISO 8601 in UTC, with its zone: ``2026-01-02T03:04:05.678901+00:00``),
    ``level``, ``logger``, ``message`` and each line's own fields (``connection_id``,
    ``event``... see ``connection_log``), by python-json-logger. ``worker``: the number
    of this worker of ``workers: N``, on each of its lines."""
    if fmt == "json":
        return json_formatter(worker)
    return TextFormatter(worker)


def log_level(level: str) -> int:
    return getattr(logging, level.upper(), logging.INFO)


def setup_logging(level: str = "INFO", fmt: str = "text", worker: int | None = None) -> None:
    """Every line of the process to stderr, in the ``log_formatter(fmt, worker)`` layout."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(log_formatter(fmt, worker))
    logging.basicConfig(level=log_level(level), handlers=[handler], force=True)


#: Twisted's lines an operator does not need at INFO: a factory starts and stops with
#: every outbound connection attempt (forwarding, edge mode, health checks)
_TWISTED_DEBUG_LINES = ("Starting factory", "Stopping factory")


def bridge_twisted_logging() -> None:
    """Twisted's log events into the standard logging tree (logger ``twisted``); the CLI
    and the tests' in-process gateways both call it."""
    from twisted.logger import LogLevel, STDLibLogObserver, globalLogBeginner

    observer = STDLibLogObserver(name="twisted")

    def observe(event: dict) -> None:
        if str(event.get("log_format") or "").startswith(_TWISTED_DEBUG_LINES):
            event = dict(event, log_level=LogLevel.debug)
        observer(event)

    globalLogBeginner.beginLoggingTo([observe], redirectStandardIO=False)


def print_config_errors(exc: ConfigError) -> None:
    for error in exc.errors:
        print(f"amqp-gateway: invalid config: {error}", file=sys.stderr)


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
        if cfg.ledger.directory:
            checks.append(("ledger.directory", cfg.ledger.directory))
        else:
            checks.append(("state_dir", os.path.join(cfg.state_dir, "ledger")))
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


def _target(args: argparse.Namespace):
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
