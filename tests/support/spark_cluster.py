"""A Spark standalone cluster on this machine: one master and one worker, started from the
installed PySpark's ``spark-class``, bound to 127.0.0.1 on ports the system picks, with
small memory and the JVM options of ``small_spark``; each in its own process group,
stopped (SIGTERM, then SIGKILL) by ``stop``.

Their logs are files under ``root``; the master's URL is read from its log (``Starting
Spark master at spark://127.0.0.1:PORT``), and the worker is ready once it logs that it
registered with the master.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from typing import Optional

from tests.support.small_spark import JVM_OPTIONS

__all__ = ["SparkStandalone", "pyspark_home"]

_MASTER_URL = re.compile(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)")
_REGISTERED = "Successfully registered with master"


def pyspark_home() -> str:
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


class SparkStandalone:
    """``start()`` -> the master URL; ``work_dir`` holds one ``app-*`` directory per
    application the worker ran executors for."""

    def __init__(self, root: str, *, worker_cores: int = 1, worker_memory: str = "1g") -> None:
        self.root = root
        self.work_dir = os.path.join(root, "work")
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.url: Optional[str] = None
        self._procs: list[subprocess.Popen] = []

    def env(self) -> dict[str, str]:
        """What the daemons (and a driver talking to them) run with: loopback only."""
        env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
        env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY="256m",
                   SPARK_DAEMON_JAVA_OPTS=JVM_OPTIONS,
                   SPARK_LOG_DIR=os.path.join(self.root, "logs"), SPARK_WORKER_DIR=self.work_dir,
                   SPARK_NO_DAEMONIZE="1")
        return env

    def _spawn(self, name: str, *args: str) -> str:
        log = os.path.join(self.root, f"{name}.log")
        with open(log, "wb") as out:
            self._procs.append(subprocess.Popen(
                [os.path.join(pyspark_home(), "bin", "spark-class"), *args], stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env(), cwd=self.root,
                start_new_session=True))
        return log

    def _wait_for(self, log: str, pattern: "re.Pattern[str] | str", timeout: float) -> "re.Match[str] | str":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(log, encoding="utf-8", errors="replace") as f:
                text = f.read()
            found = pattern.search(text) if isinstance(pattern, re.Pattern) else (pattern if pattern in text else None)
            if found:
                return found
            if any(p.poll() is not None for p in self._procs):
                raise RuntimeError(f"a Spark daemon exited; {log}:\n{text[-3000:]}")
            time.sleep(0.2)
        with open(log, encoding="utf-8", errors="replace") as f:
            raise TimeoutError(f"{pattern!r} not in {log} after {timeout} s:\n{f.read()[-3000:]}")

    def start(self, timeout: float = 180.0) -> str:
        os.makedirs(self.work_dir, exist_ok=True)
        try:
            log = self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                              "--port", "0", "--webui-port", "0")
            match = self._wait_for(log, _MASTER_URL, timeout)
            assert isinstance(match, re.Match)
            self.url = match.group(1)
            log = self._spawn("worker", "org.apache.spark.deploy.worker.Worker", self.url,
                              "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                              "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                              "--work-dir", self.work_dir)
            self._wait_for(log, _REGISTERED, timeout)
        except BaseException:
            self.stop()
            raise
        return self.url

    def applications(self) -> list[str]:
        """The ``app-*`` directories the worker made (one per application it served)."""
        return sorted(n for n in os.listdir(self.work_dir) if n.startswith("app-"))

    def stop(self) -> None:
        for proc in reversed(self._procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self._procs):
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self._procs.clear()
