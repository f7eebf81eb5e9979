"""Spark settings for the tests' tiny inputs (a few hundred ledger records), for every
Spark the tests start: the test process's own session, a report command's driver, the
standalone cluster's daemons, drivers and executors.

Why: on 2 shared cores a report over a tiny ledger was dominated by Spark's fixed costs,
not by the data: the JVM's optimising compiler (C2) compiling code that runs once, the
parallel garbage collector's threads, adaptive query execution re-planning every stage,
whole-stage code generation, and on a cluster 200 shuffle partitions (Spark's default)
each a task on the worker's one core. Measured on one local report (CPU seconds of the
driver JVM, the machine otherwise busy): 37-47 s for the first report of a session,
15-19 s for each one after it; with these settings 19 s and 10-11 s. The results are the
same (the pipeline's tests compare tables and figures exactly); only how Spark gets
there changes.
"""
from __future__ import annotations

import shlex

__all__ = ["JVM_OPTIONS", "SQL_CONF", "session_conf", "conf_args", "submit_args"]

#: C1 only (no C2 compilations of code that runs a handful of times), one GC thread
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

#: SQL settings for inputs of a few hundred rows
SQL_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
    # compiling generated code for every plan costs more than it saves here
    "spark.sql.codegen.wholeStage": "false",
}


def session_conf() -> dict[str, str]:
    """Everything above as Spark configuration (``defaultJavaOptions`` go before any
    ``extraJavaOptions`` the code under test sets, such as the report's log4j file)."""
    return {**SQL_CONF, "spark.driver.defaultJavaOptions": JVM_OPTIONS,
            "spark.executor.defaultJavaOptions": JVM_OPTIONS}


def conf_args() -> list[str]:
    """These settings as ``spark-submit`` options (``--conf KEY=VALUE`` ...)."""
    return [part for key, value in session_conf().items() for part in ("--conf", f"{key}={value}")]


def submit_args(*extra: str) -> str:
    """``PYSPARK_SUBMIT_ARGS`` for a driver started by PySpark: these settings, ``extra``,
    then ``pyspark-shell``."""
    return shlex.join([*conf_args(), *extra, "pyspark-shell"])
