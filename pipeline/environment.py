"""Preconditions of the report: PySpark importable and a Java runtime present.

Both are checked before Spark starts, so that a missing piece gives one clear sentence
naming what to install instead of a Py4J stack trace.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
from typing import Optional

__all__ = ["JAVA_PACKAGE", "PIPELINE_EXTRA", "PipelineEnvironmentError", "check_environment", "find_java"]

#: What Debian needs for Spark's JVM (``default-jre-headless`` works too).
JAVA_PACKAGE = "openjdk-17-jre-headless"
#: What pip needs for PySpark, pyarrow and matplotlib.
PIPELINE_EXTRA = "pip install 'amqp-gateway[pipeline]'"


class PipelineEnvironmentError(RuntimeError):
    """A dependency of the report is missing; ``package`` names what to install."""

    def __init__(self, text: str, package: str) -> None:
        super().__init__(text)
        self.package = package


def find_java() -> Optional[str]:
    """Path of the ``java`` Spark will use: ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def check_environment(*, need_java: bool = True) -> None:
    """Raise PipelineEnvironmentError when pyspark/matplotlib or Java is missing.

    ``need_java`` is False when the job is handed to an existing Spark (``spark-submit``
    started the JVM already).
    """
    for module in ("pyspark", "matplotlib"):
        if importlib.util.find_spec(module) is None:
            raise PipelineEnvironmentError(
                f"{module} is not installed; install the pipeline extra: {PIPELINE_EXTRA}",
                PIPELINE_EXTRA)
    if need_java and find_java() is None:
        raise PipelineEnvironmentError(
            "Java is not installed (Spark needs a JVM, 17 or later); on Debian: "
            f"apt-get install {JAVA_PACKAGE} (or default-jre-headless), or set JAVA_HOME",
            JAVA_PACKAGE)
