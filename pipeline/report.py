"""The ledger report: a PySpark job from ledger directories to Parquet tables and HTML.

Run it as ``amqp-gateway report --ledger DIR [--ledger DIR ...] --out DIR [--master URL]``
(local[*] by default), as ``spark-submit pipeline/report.py --ledger ... --out ...``
against a cluster (``s3a://``/``hdfs://`` paths work for ledgers and ``--out``), or as a
function: ``run_report(ledger_dirs, out_dir, master=...) -> ReportSummary``.

Output under ``out``: ``tables/<name>/`` Parquet (events, traffic_per_minute,
protocol_pairs, latency, latency_by_queue, outcomes, top_talkers, event_counts,
reconciliation, reconciliation_summary), ``report.html`` and ``charts/*.png``. When ``out`` is not a
local path the HTML and charts are built in a local temporary directory and copied there
through Hadoop's FileSystem API.

Progress: one line per stage on stderr (``Progress``); Spark adds its task bar.
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

__all__ = ["DEFAULT_MASTER", "ReportSummary", "build_parser", "main", "run_report"]

DEFAULT_MASTER = "local[*]"
TABLES = ("events", "traffic_per_minute", "protocol_pairs", "latency", "latency_by_queue",
          "outcomes", "top_talkers", "event_counts", "reconciliation", "reconciliation_summary")
STAGES = 6


@dataclasses.dataclass(frozen=True)
class ReportSummary:
    """The headline numbers of a report (what the HTML shows first), for callers and tests.

    ``by_event``: events per kind; ``settled_by_outcome`` / ``forward_settled_by_outcome``:
    settlements per outcome; ``protocol_pairs`` / ``protocol_pair_bytes``: deliveries+forwards
    per pair, and the sum of their ``size``; ``latency_us``: per gateway (container)
    ``{"settled", "p50", "p95", "p99", "max"}`` (microseconds); ``latency_by_queue``: the
    same per AMQP node settled on, keyed ``(container, vhost, queue)``;
    ``reconciliation``: totals of forwarded, arrived, lost, duplicated, extra_copies,
    late, unverified; ``samples``: status -> up to N keys, sorted.
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
    out_dir: str
    html_path: str
    tables: dict[str, str]


def run_report(
    ledger_dirs: Sequence[str],
    out_dir: str,
    *,
    master: Optional[str] = None,
    late_after: float = 60.0,
    match_by: str = "gateway-id",
    top: int = 20,
    samples: int = 20,
    spark: Any = None,
    progress: Optional[Progress] = None,
    driver_memory: Optional[str] = None,
) -> ReportSummary:
    """Build the report; returns its summary.

    ``late_after`` seconds, ``match_by`` ``"gateway-id"`` or ``"message-id"`` (see
    ``reconcile``), ``top`` talkers listed, ``samples`` message keys kept per
    reconciliation status. ``spark`` is an existing SparkSession (left running); without
    one a session is started on ``master`` (default local[*]; under ``spark-submit`` the
    master it was given) and stopped at the end. Raises
    PipelineEnvironmentError when PySpark, matplotlib or Java is missing, ValueError for
    bad arguments; Spark's own errors (e.g. an unreadable path) propagate.
    """
    if not ledger_dirs:
        raise ValueError("at least one ledger directory is needed")
    if top < 1 or samples < 0 or late_after < 0:
        raise ValueError("top must be >= 1, samples and late_after >= 0")
    missing = [d for d in ledger_dirs if _is_local(d) and not os.path.isdir(_local_path(d))]
    if missing:
        raise ValueError(f"ledger directory not found: {', '.join(missing)}")
    from pipeline.reconcile import MatchBy

    matching = MatchBy(match_by)
    progress = progress or Progress(STAGES)
    own_session = spark is None
    if own_session:
        # spark-submit starts the JVM first and tells PySpark through this variable.
        submitted = "PYSPARK_GATEWAY_PORT" in os.environ
        check_environment(need_java=not submitted)
        if master is None and not submitted:
            master = DEFAULT_MASTER
        progress.note(f"starting Spark on {master or 'the spark-submit master'}")
        spark = _start_session(master, driver_memory)
    try:
        return _run(spark, list(ledger_dirs), out_dir, late_after, matching, top, samples, progress)
    finally:
        if own_session:
            spark.stop()


def _start_session(master: Optional[str], driver_memory: Optional[str]) -> Any:
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.appName("amqp-gateway-ledger-report")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "true"))
    if master:
        builder = builder.master(master)
    if master and master.startswith("local"):
        builder = (builder.config("spark.ui.enabled", "false")
                   .config("spark.sql.shuffle.partitions", str(max(4, 2 * (os.cpu_count() or 2)))))
    if driver_memory:
        builder = builder.config("spark.driver.memory", driver_memory)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _local_path(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def _run(spark: Any, ledger_dirs: list[str], out_dir: str, late_after: float, matching: Any,
         top: int, samples: int, progress: Progress) -> ReportSummary:
    from pyspark.sql import functions as F

    from pipeline import ledger_reader, reconcile, tables
    from pipeline.presentation import collect_and_render

    spark.conf.set("spark.sql.session.timeZone", "UTC")
    base = out_dir.rstrip("/")
    paths = {name: f"{base}/tables/{name}" for name in TABLES}

    progress.stage(f"reading {len(ledger_dirs)} ledger(s) into {paths['events']}")
    ledger_reader.stage_events(spark, ledger_dirs, paths["events"])
    events, malformed_rows = ledger_reader.load_events(spark, paths["events"])
    malformed = malformed_rows.count()

    progress.stage("traffic, protocol pairs, latency, outcomes, top talkers")
    small: dict[str, Callable[[], Any]] = {
        "traffic_per_minute": lambda: tables.traffic_per_minute(events),
        "protocol_pairs": lambda: tables.protocol_pairs(events),
        "latency": lambda: tables.latency_by_node(events),
        "latency_by_queue": lambda: tables.latency_by_queue(events),
        "outcomes": lambda: tables.outcomes(events),
        "top_talkers": lambda: tables.top_talkers(events, top),
        "event_counts": lambda: tables.event_counts(events),
    }
    for name, build in small.items():
        build().coalesce(1).write.mode("overwrite").parquet(paths[name])

    progress.stage("reconciliation across gateways")
    counts = spark.read.parquet(paths["event_counts"])
    containers = sorted(r["container"] for r in counts.select("container").distinct().collect()
                        if r["container"] is not None)
    per_message = reconcile.reconciliation(events, containers, match_by=matching, late_after=late_after)
    per_message.write.mode("overwrite").parquet(paths["reconciliation"])
    per_message = spark.read.parquet(paths["reconciliation"])
    reconcile.reconciliation_summary(per_message).coalesce(1).write.mode("overwrite") \
        .parquet(paths["reconciliation_summary"])

    progress.stage("collecting results")
    loaded = {name: spark.read.parquet(paths[name]) for name in TABLES if name != "events"}
    sample_rows = {}
    for status in ("lost", "duplicated", "late", "duplicated+late", "unverified"):
        sample_rows[status] = (loaded["reconciliation"].filter(F.col("status") == status)
                               .orderBy("key").limit(samples).collect())

    progress.stage("charts and report.html")
    local_out = _local_path(base) if _is_local(base) else tempfile.mkdtemp(prefix="ledger-report-")
    os.makedirs(os.path.join(local_out, "charts"), exist_ok=True)
    summary_numbers = collect_and_render(loaded, sample_rows, local_out, malformed=malformed,
                                         containers=containers, late_after=late_after,
                                         ledger_dirs=ledger_dirs)
    if not _is_local(base):
        _upload(spark, local_out, base)
        shutil.rmtree(local_out, ignore_errors=True)
    progress.stage(f"done: {base}/report.html")
    return ReportSummary(out_dir=base, html_path=f"{base}/report.html", tables=paths,
                         containers=tuple(containers), malformed=malformed, **summary_numbers)


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
    p.add_argument("--samples", type=int, default=20, help="sample messages per reconciliation finding")
    p.add_argument("--driver-memory", default=None, help="e.g. 4g (only when this starts Spark)")
    return p


def main(argv: Optional[Sequence[str]] = None, prog: str = "report.py") -> int:
    """Exit status: 0 done, 1 the job failed, 2 usage error or a missing dependency."""
    args = build_parser(prog).parse_args(argv)
    try:
        run_report(args.ledger, args.out, master=args.master, late_after=args.late_after,
                   match_by=args.match_by, top=args.top, samples=args.samples,
                   driver_memory=args.driver_memory)
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
