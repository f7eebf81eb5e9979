"""The ledger report: a PySpark job from ledger directories to Parquet tables and HTML.

Run it as ``amqp-gateway report --ledger DIR [--ledger DIR ...] --out DIR [--master URL]``
(local[*] by default), as ``spark-submit pipeline/report.py --ledger ... --out ...``
against a cluster (``s3a://``/``hdfs://`` paths work for ledgers and ``--out``), or as a
function: ``run_report(ledger_dirs, out_dir, master=...) -> ReportSummary``.

Output under ``out``: ``tables/<name>/`` Parquet (``TABLES``; ``pipeline/README.md``
describes each), ``report.html`` (a summary first, then the details) and ``charts/*.png``. When ``out`` is not a
local path the HTML and charts are built in a local temporary directory and copied there
through Hadoop's FileSystem API.

Progress: one line per stage on stderr (``Progress``); Spark's own log is kept to errors
(``spark_session``), and its task bar is shown on a terminal only.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
from typing import Any, Callable, Optional, Sequence

if __package__ in (None, ""):
    # Run as a script (``spark-submit pipeline/report.py``): make the repository root
    # importable so that ``pipeline`` and ``gateway.ledger.records`` resolve.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pipeline.environment import PipelineEnvironmentError, check_environment  # noqa: E402
from pipeline.progress import Progress  # noqa: E402
from pipeline.spark_session import SPARK_LOG_LEVELS, start_session, submitted  # noqa: E402

__all__ = ["DEFAULT_MASTER", "ReportSummary", "TABLES", "build_parser", "main", "run_report"]

DEFAULT_MASTER = "local[*]"
TABLES = ("events", "traffic_per_minute", "node_ranks", "traffic_timeline", "protocol_pairs",
          "latency_overall", "latency", "latency_by_queue", "outcomes", "top_talkers", "event_counts",
          "throughput", "ledger_gaps", "final_states", "final_state_summary",
          "unsettled_messages", "unsettled_summary", "reconciliation", "reconciliation_summary")
STAGES = 7
#: tables small enough to collect whole once (aggregates bounded by gateways, vhosts,
#: queues, pairs); the others are aggregated further before anything reaches the driver
COLLECTED = ("event_counts", "protocol_pairs", "latency_overall", "latency", "latency_by_queue",
             "top_talkers", "throughput", "ledger_gaps", "final_state_summary", "unsettled_summary",
             "reconciliation_summary")


@dataclasses.dataclass(frozen=True)
class ReportSummary:
    """The headline numbers of a report (what the HTML shows first), for callers and tests.

    ``by_event``: events per kind; ``settled_by_outcome`` / ``forward_settled_by_outcome``:
    settlements per outcome; ``protocol_pairs`` / ``protocol_pair_bytes``: deliveries+forwards
    per pair, and the sum of their ``size``; ``latency_us``: per gateway (container)
    ``{"settled", "p50", "p95", "p99", "max"}`` (microseconds); ``latency_by_queue``: the
    same per AMQP node settled on, keyed ``(container, vhost, queue)``;
    ``latency_overall_us``: the same over every settlement; ``reconciliation``: totals of
    forwarded, arrived, lost, duplicated, extra_copies, late, unverified, unexpected;
    ``samples``: status -> up to N keys, sorted. ``unsettled``: copies not finally settled
    per (container, vhost, place, state, detail) (``settlement``), ``unsettled_by_state``
    their totals; ``refusals``: unroutable/returned/refused per (result, reason);
    ``crossed_by_vhost``: per (container, vhost) received, bytes_in, delivered,
    forwarded, refused, unsettled; ``span_us``: (first, last) event time or None;
    ``buckets``: the charts' time axis. ``final_states``: messages per (container, vhost,
    place, state, detail) (``settlement.final_states``; place None for a message that
    reached no queue), ``final_by_state`` their totals; ``gaps``: (container, ts_us,
    since_us, records lost) per gap; ``throughput``: per (container, vhost, direction,
    route) ``{"messages", "minutes", "peak_per_s", "mean_per_s"}``.
    """

    events: int
    malformed: int
    containers: tuple[str, ...]
    by_event: dict[str, int]
    settled_by_outcome: dict[str, int]
    forward_settled_by_outcome: dict[str, int]
    protocol_pairs: dict[str, int]
    protocol_pair_bytes: dict[str, int]
    latency_us: dict[str, dict[str, int]]
    latency_by_queue: dict[tuple[Optional[str], Optional[str], Optional[str]], dict[str, int]]
    reconciliation: dict[str, int]
    samples: dict[str, list[str]]
    latency_overall_us: dict[str, Any]
    unsettled: dict[tuple, int]
    unsettled_by_state: dict[str, int]
    refusals: dict[tuple[str, Optional[str]], int]
    crossed_by_vhost: dict[tuple, dict[str, int]]
    span_us: Optional[tuple[int, int]]
    buckets: Any
    final_states: dict[tuple, int]
    final_by_state: dict[str, int]
    gaps: list[tuple]
    throughput: dict[tuple, dict[str, Any]]
    out_dir: str
    html_path: str
    tables: dict[str, str]


@dataclasses.dataclass(frozen=True)
class _Options:
    """run_report's options, as ``_run`` takes them."""

    late_after: float
    matching: Any
    top: int
    top_nodes: int
    samples: int
    figure_hook: Optional[Callable[[str, Any], None]]


def run_report(
    ledger_dirs: Sequence[str],
    out_dir: str,
    *,
    master: Optional[str] = None,
    late_after: float = 60.0,
    match_by: str = "gateway-id",
    top: int = 20,
    top_nodes: int = 10,
    samples: int = 20,
    spark: Any = None,
    progress: Optional[Progress] = None,
    driver_memory: Optional[str] = None,
    spark_log_level: str = "ERROR",
    figure_hook: Optional[Callable[[str, Any], None]] = None,
) -> ReportSummary:
    """Build the report; returns its summary.

    ``late_after`` seconds, ``match_by`` ``"gateway-id"`` or ``"message-id"`` (see
    ``reconcile``), ``top`` talkers listed, ``top_nodes`` routing keys per exchange (and
    queues per vhost) named before the rest are folded into one "other" node, ``samples``
    message keys kept per reconciliation status and per not-settled place. ``spark`` is an
    existing SparkSession (left running); without one a session is started on ``master``
    (default local[*]; under ``spark-submit`` the master it was given), its log at
    ``spark_log_level``, and stopped at the end. ``figure_hook(name, figure)`` sees each
    matplotlib chart before it is closed. Raises
    PipelineEnvironmentError when PySpark, matplotlib or Java is missing, ValueError for
    bad arguments; Spark's own errors (e.g. an unreadable path) propagate.
    """
    if not ledger_dirs:
        raise ValueError("at least one ledger directory is needed")
    if top < 1 or top_nodes < 1 or samples < 0 or late_after < 0:
        raise ValueError("top and top_nodes must be >= 1, samples and late_after >= 0")
    if spark_log_level.upper() not in SPARK_LOG_LEVELS:
        raise ValueError(f"spark log level {spark_log_level!r} is not one of {', '.join(SPARK_LOG_LEVELS)}")
    missing = [d for d in ledger_dirs if _is_local(d) and not os.path.isdir(_local_path(d))]
    if missing:
        raise ValueError(f"ledger directory not found: {', '.join(missing)}")
    own_session = spark is None
    if own_session:  # before anything imports PySpark: a missing one is named, with the fix
        check_environment(need_java=not submitted())
    from pipeline.reconcile import MatchBy

    matching = MatchBy(match_by)
    progress = progress or Progress(STAGES)
    if own_session:
        if master is None and not submitted():
            master = DEFAULT_MASTER
        progress.note(f"starting Spark on {master or 'the spark-submit master'}")
        spark = start_session(master, driver_memory=driver_memory, log_level=spark_log_level.upper())
    options = _Options(late_after, matching, top, top_nodes, samples, figure_hook)
    try:
        return _run(spark, list(ledger_dirs), out_dir, options, progress)
    finally:
        if own_session:
            spark.stop()


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _local_path(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def _write(frame: Any, path: str, *, small: bool = True) -> None:
    (frame.coalesce(1) if small else frame).write.mode("overwrite").parquet(path)


def _run(spark: Any, ledger_dirs: list[str], out_dir: str, o: _Options, progress: Progress) -> ReportSummary:
    from pyspark.sql import functions as F

    from pipeline import ledger_reader, reconcile, settlement, tables
    from pipeline.charts import Buckets
    from pipeline.presentation import collect_and_render

    spark.conf.set("spark.sql.session.timeZone", "UTC")
    # the ledger has 26 columns: plans over them would exceed the default 25 fields and
    # Spark would warn that it truncated their text
    spark.conf.set("spark.sql.debug.maxToStringFields", "100")
    base = out_dir.rstrip("/")
    paths = {name: f"{base}/tables/{name}" for name in TABLES}
    read = lambda name: spark.read.parquet(paths[name])  # noqa: E731

    progress.stage(f"reading {len(ledger_dirs)} ledger(s) into {paths['events']}")
    ledger_reader.stage_events(spark, ledger_dirs, paths["events"])
    events, malformed_rows = ledger_reader.load_events(spark, paths["events"])
    malformed = malformed_rows.count()

    progress.stage("traffic, protocol pairs, latency, outcomes, top talkers")
    small: dict[str, Callable[[], Any]] = {
        "event_counts": lambda: tables.event_counts(events),
        "traffic_per_minute": lambda: tables.traffic_per_minute(events),
        "node_ranks": lambda: tables.node_ranks(read("traffic_per_minute"), o.top_nodes),
        "protocol_pairs": lambda: tables.protocol_pairs(events),
        "latency_overall": lambda: tables.latency_overall(events),
        "latency": lambda: tables.latency_by_node(events),
        "latency_by_queue": lambda: tables.latency_by_queue(events),
        "outcomes": lambda: tables.outcomes(events),
        "top_talkers": lambda: tables.top_talkers(events, o.top),
    }
    for name, build in small.items():
        _write(build(), paths[name])
    counts = read("event_counts").collect()  # gateways x kinds x outcomes: a few rows
    buckets = Buckets.spanning(min((r["first_us"] for r in counts if r["first_us"] is not None), default=0),
                               max((r["last_us"] for r in counts if r["last_us"] is not None), default=0))
    containers = sorted({r["container"] for r in counts if r["container"] is not None})
    _write(tables.traffic_timeline(events, buckets.seconds, read("node_ranks")), paths["traffic_timeline"])
    _write(tables.throughput(read("traffic_per_minute"), read("node_ranks")), paths["throughput"])
    _write(tables.ledger_gaps(events), paths["ledger_gaps"])

    progress.stage("the final state of every message: delivered, expired, dead-lettered, purged, "
                   "deleted, dropped, forwarded, still queued, lost")
    _write(settlement.final_states(events), paths["final_states"], small=False)
    final = read("final_states")
    _write(settlement.final_state_summary(final), paths["final_state_summary"])
    _write(settlement.unsettled_messages(final), paths["unsettled_messages"], small=False)
    _write(settlement.unsettled_summary(read("unsettled_messages")), paths["unsettled_summary"])

    progress.stage("reconciliation across gateways")
    per_message = reconcile.reconciliation(events, containers, match_by=o.matching, late_after=o.late_after,
                                           final=final)
    _write(per_message, paths["reconciliation"], small=False)
    _write(reconcile.reconciliation_summary(read("reconciliation")), paths["reconciliation_summary"])

    progress.stage("collecting results")
    loaded = {name: read(name) for name in TABLES if name != "events"}
    rows = {name: counts if name == "event_counts" else loaded[name].collect() for name in COLLECTED}
    recon_samples = _first_of_each(loaded["reconciliation"].filter(F.col("status") != "ok"), "status",
                                   ("key",), o.samples)
    by_state = _first_of_each(loaded["unsettled_messages"], "state", ("since_us", "gateway_id"), o.samples)
    unsettled_samples = [row for state in settlement.NOT_FINAL for row in by_state.get(state, [])]

    progress.stage("charts and report.html")
    local_out = _local_path(base) if _is_local(base) else tempfile.mkdtemp(prefix="ledger-report-")
    os.makedirs(os.path.join(local_out, "charts"), exist_ok=True)
    summary_numbers = collect_and_render(rows, loaded, recon_samples, unsettled_samples, local_out,
                                         buckets=buckets, malformed=malformed, containers=containers,
                                         late_after=o.late_after, top_nodes=o.top_nodes,
                                         ledger_dirs=ledger_dirs, figure_hook=o.figure_hook)
    if not _is_local(base):
        _upload(spark, local_out, base)
        shutil.rmtree(local_out, ignore_errors=True)
    progress.stage(f"done: {base}/report.html")
    return ReportSummary(out_dir=base, html_path=f"{base}/report.html", tables=paths,
                         containers=tuple(containers), malformed=malformed, **summary_numbers)


def _first_of_each(frame: Any, by: str, order: Sequence[str], n: int) -> dict[str, list]:
    """The first ``n`` rows (by ``order``) of each value of ``by``, in one job: a window
    partitioned by ``by`` (not one query per value)."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    first = F.row_number().over(Window.partitionBy(by).orderBy(*order))
    out: dict[str, list] = {}
    for row in frame.withColumn("_n", first).filter(F.col("_n") <= n).orderBy(by, "_n").collect():
        out.setdefault(row[by], []).append(row)
    return out


def _upload(spark: Any, local_dir: str, remote_dir: str) -> None:
    """Copy report.html and charts/ to a Hadoop URI (s3a://, hdfs://) via the JVM."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    target = jvm.org.apache.hadoop.fs.Path(remote_dir)
    fs = target.getFileSystem(conf)
    for name in ("report.html", "charts"):
        fs.copyFromLocalFile(False, True, jvm.org.apache.hadoop.fs.Path(os.path.join(local_dir, name)),
                             jvm.org.apache.hadoop.fs.Path(f"{remote_dir}/{name}"))


def build_parser(prog: str = "amqp-gateway report") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Traffic, latency, outcome and "
                                "reconciliation report over gateway ledgers (PySpark).")
    p.add_argument("--ledger", action="append", required=True, metavar="DIR",
                   help="a gateway's ledger directory (repeat for several gateways)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (tables, report.html)")
    p.add_argument("--master", default=None,
                   help="Spark master URL (default local[*], or spark-submit's own --master)")
    p.add_argument("--late-after", type=float, default=60.0, metavar="SECONDS",
                   help="a forwarded message arriving later than this is late (default 60)")
    p.add_argument("--match-by", choices=("gateway-id", "message-id"), default="gateway-id",
                   help="how reconciliation matches a forward to its arrival")
    p.add_argument("--top", type=int, default=20, help="top talkers listed (default 20)")
    p.add_argument("--top-nodes", type=int, default=10, metavar="N",
                   help="routing keys named per exchange (and queues per vhost) before the rest "
                        "are folded into one 'other' node (default 10)")
    p.add_argument("--samples", type=int, default=20,
                   help="sample messages per reconciliation finding and per not-settled place (default 20)")
    p.add_argument("--driver-memory", default=None, help="e.g. 4g (only when this starts Spark)")
    p.add_argument("--spark-log-level", default="ERROR", type=str.upper, choices=SPARK_LOG_LEVELS,
                   help="Spark's own log on stderr (default ERROR: the progress lines and errors only)")
    return p


def main(argv: Optional[Sequence[str]] = None, prog: str = "report.py") -> int:
    """Exit status: 0 done, 1 the job failed, 2 usage error or a missing dependency."""
    args = build_parser(prog).parse_args(argv)
    try:
        run_report(args.ledger, args.out, master=args.master, late_after=args.late_after,
                   match_by=args.match_by, top=args.top, top_nodes=args.top_nodes,
                   samples=args.samples, driver_memory=args.driver_memory,
                   spark_log_level=args.spark_log_level)
    except PipelineEnvironmentError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except Exception as exc:  # Spark/Py4J errors: one line, the cause
        sys.stderr.write(f"error: report failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
