"""Preconditions of the report: PySpark importable and a Java runtime present.

Both are checked before Spark starts, so that a missing piece gives one clear sentence
naming what to install instead of a Py4J stack trace.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import sys
from typing import Optional

__all__ = ["JAVA_PACKAGE", "install_hint", "PipelineEnvironmentError", "check_environment", "find_java"]

#: What Debian needs for Spark's JVM (``default-jre-headless`` works too).
JAVA_PACKAGE = "openjdk-17-jre-headless"
#: the pipeline extra's requirements when the installed metadata cannot say
_PIPELINE_PACKAGES = ("pyspark>=3.5", "pyarrow>=14", "matplotlib>=3.8")


def install_hint() -> str:
    """One command that installs the report's packages into the Python running now.

    The Debian package leaves PySpark out on purpose (about 320 MB, and a Java runtime
    the gateway itself never needs; reports usually run elsewhere), and its virtual
    environment has no pip: the command starts with ``ensurepip`` then. The versions are
    the ``pipeline`` extra's (pyproject.toml), read from the installed metadata."""
    try:
        extra = [r.split(";")[0].strip() for r in importlib.metadata.requires("amqp-gateway") or ()
                 if 'extra == "pipeline"' in r]
    except importlib.metadata.PackageNotFoundError:
        extra = []
    packages = " ".join(f"'{r}'" for r in (extra or _PIPELINE_PACKAGES))
    python = sys.executable
    pip = f"{python} -m pip install {packages}"
    if importlib.util.find_spec("pip") is not None:
        return pip
    ensurepip = f"{python} -m ensurepip && {pip}"
    if importlib.util.find_spec("ensurepip") is None:  # Debian ships it in pythonX.Y-venv
        return f"apt-get install python{sys.version_info[0]}.{sys.version_info[1]}-venv && {ensurepip}"
    return ensurepip


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
            hint = install_hint()
            raise PipelineEnvironmentError(f"{module} is not installed; install the report's "
                                           f"packages with: {hint}", hint)
    if need_java and find_java() is None:
        raise PipelineEnvironmentError(
            "Java is not installed (Spark needs a JVM, 17 or later); on Debian: "
            f"apt-get install {JAVA_PACKAGE} (or default-jre-headless), or set JAVA_HOME",
            JAVA_PACKAGE)
