"""The C load generators (``bench/loadgen/``): building them into ``bench/build/`` when
missing or older than their sources, and running one as a process whose JSON lines are
collected.
"""
from __future__ import annotations

import json
import logging
import os
import queue
import shutil
import subprocess
import threading
import time
from typing import Optional

log = logging.getLogger("bench")

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "build")
LOADGEN_SRC = os.path.join(HERE, "loadgen")
GEN091 = os.path.join(BUILD, "amqp091_load")
GEN10 = os.path.join(BUILD, "amqp10_load")
APT_BUILD_PACKAGES = ("gcc", "pkg-config", "librabbitmq-dev", "libqpid-proton11-dev")


def _sources_newer() -> bool:
    if not (os.path.exists(GEN091) and os.path.exists(GEN10)):
        return True
    built = min(os.path.getmtime(GEN091), os.path.getmtime(GEN10))
    return any(os.path.getmtime(os.path.join(LOADGEN_SRC, f)) > built for f in os.listdir(LOADGEN_SRC))


def _apt_install(packages: tuple[str, ...]) -> None:
    """Install missing Debian packages when we are root; otherwise only say what is missing."""
    missing = [p for p in packages
               if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        log.warning("missing Debian packages (install them as root): %s", " ".join(missing))
        return
    log.info("apt-get install %s", " ".join(missing))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update"], env=env, capture_output=True)
    subprocess.run(["apt-get", "install", "-y", *missing], env=env, capture_output=True)


def ensure_loadgens() -> None:
    """Build bench/build/amqp091_load and amqp10_load when missing or older than their sources."""
    if not _sources_newer():
        return
    _apt_install(APT_BUILD_PACKAGES)
    out = subprocess.run(["sh", os.path.join(LOADGEN_SRC, "build.sh"), BUILD],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("building the load generators failed:\n" + out.stdout + out.stderr)
    log.info("%s", out.stdout.strip())


class GenProcess:
    """A load-generator process whose stdout JSON lines are collected by a thread."""

    def __init__(self, argv: list[str], keep_stdin: bool = False) -> None:
        self.argv = argv
        self.lines: "queue.Queue[dict]" = queue.Queue()
        self.records: list[dict] = []
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     stdin=subprocess.PIPE if keep_stdin else subprocess.DEVNULL)
        self.stderr = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            self.records.append(rec)
            self.lines.put(rec)

    def wait_event(self, event: str, timeout: float) -> Optional[dict]:
        """The first record with ``"event": event`` within timeout seconds, else None."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                rec = self.lines.get(timeout=0.1)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    return None
                continue
            if rec.get("event") == event:
                return rec
        return None

    def result(self, timeout: float) -> dict:
        """The process' result record (waits for exit; kills it after timeout seconds)."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stderr is not None:
            self.stderr = self.proc.stderr.read()[-2000:]
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and not any("role" in r for r in self.records):
            time.sleep(0.02)
        for rec in reversed(self.records):
            if "role" in rec:
                return rec
        return {"errors": 1, "error": f"no result (exit {self.proc.returncode}) {self.stderr.strip()[-300:]}"}

    def close_stdin(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
