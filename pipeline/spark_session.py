"""The report's SparkSession, started quietly: Spark's own noise stays out of the terminal.

An operator running ``amqp-gateway report`` should see the report's progress lines and
Spark's errors, not a screenful of routine WARN/INFO lines. Three sources, three fixes:

- log4j2 messages: the JVM this module starts gets ``log4j2.properties`` next to this
  file (errors only) through ``spark.driver.extraJavaOptions``, which spark-submit
  applies to the driver it launches, so even the lines logged while Spark starts are
  filtered; ``setLogLevel`` then sets the level asked for (``--spark-log-level``);
- the JVM's own ``WARNING: Using incubator modules: jdk.incubator.vector`` (Spark 4 adds
  the module to every JVM it starts; no option silences it): the JVM's stderr goes
  through a pipe and a thread relays it to ours, dropping that one line;
- Spark's task bar (``[Stage 3:==>  (1 + 1) / 2]``) redraws a line with carriage
  returns: useful on a terminal, garbage in a log, so it is on only when stderr is one.

Under ``spark-submit`` the driver JVM is already running (``PYSPARK_GATEWAY_PORT`` is
set): only ``setLogLevel`` applies, as early as the session exists; the README shows the
``--driver-java-options`` that quiet the start as well.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any, BinaryIO, Optional

__all__ = ["LOG4J2_PROPERTIES", "SPARK_LOG_LEVELS", "relay_jvm_stderr", "start_session", "submitted"]

#: errors only, on stderr (see the file's comments)
LOG4J2_PROPERTIES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
#: what ``setLogLevel`` accepts
SPARK_LOG_LEVELS = ("ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN")
#: lines of the JVM's stderr that say nothing an operator can act on
_JVM_NOISE = (b"WARNING: Using incubator modules:",)


def submitted() -> bool:
    """True under ``spark-submit``: it started the driver JVM and tells PySpark so."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def start_session(master: Optional[str], *, driver_memory: Optional[str] = None,
                  log_level: str = "ERROR") -> Any:
    """A SparkSession on ``master`` (None: spark-submit's), its log at ``log_level``."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    if submitted():
        session = SparkSession.builder.appName("amqp-gateway-ledger-report").getOrCreate()
        session.sparkContext.setLogLevel(log_level)
        return session
    conf = (SparkConf().setAppName("amqp-gateway-ledger-report")
            .set("spark.sql.session.timeZone", "UTC")
            .set("spark.ui.showConsoleProgress", "true" if _stderr_is_terminal() else "false")
            .set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{LOG4J2_PROPERTIES}"))
    if master:
        conf.setMaster(master)
    if master and master.startswith("local"):
        conf.set("spark.ui.enabled", "false")
        conf.set("spark.sql.shuffle.partitions", str(max(4, 2 * (os.cpu_count() or 2))))
    if driver_memory:
        conf.set("spark.driver.memory", driver_memory)
    if SparkContext._gateway is None:  # a JVM of this process's own (tests may share one)
        from pyspark.java_gateway import launch_gateway

        gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
        relay_jvm_stderr(gateway.proc.stderr, 2)  # where the JVM would have written
        context = SparkContext(conf=conf, gateway=gateway)
    else:
        context = SparkContext.getOrCreate(conf)
    context.setLogLevel(log_level)
    return SparkSession(context)


def relay_jvm_stderr(source: BinaryIO, fd: int) -> threading.Thread:
    """Copy the JVM's stderr to ``fd`` in a daemon thread, without the noise lines.

    Whole pieces are passed on as they end in ``\\n`` or ``\\r`` (the task bar redraws
    with ``\\r``), so a Spark error appears as soon as it is complete."""
    thread = threading.Thread(target=_relay, args=(source, fd), name="jvm-stderr", daemon=True)
    thread.start()
    return thread


def _relay(source: BinaryIO, fd: int) -> None:
    pending = b""
    while True:
        chunk = os.read(source.fileno(), 65536)
        if not chunk:
            break
        pending += chunk
        cut = max(pending.rfind(b"\n"), pending.rfind(b"\r")) + 1
        if cut:
            _write_kept(fd, pending[:cut])
            pending = pending[cut:]
    if pending:
        _write_kept(fd, pending)
    source.close()


def _write_kept(fd: int, text: bytes) -> None:
    kept = b"".join(line for line in text.splitlines(keepends=True) if not line.startswith(_JVM_NOISE))
    while kept:
        try:
            kept = kept[os.write(fd, kept):]
        except OSError:  # our stderr is gone: nothing left to show it on
            return


def _stderr_is_terminal() -> bool:
    try:
        return os.isatty(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # replaced by a stream without a file
        return False
