"""A broker that speaks only AMQP 1.0: Qpid Proton's C example broker, from Debian's
``libqpid-proton11-dev-examples`` (``/usr/share/proton/examples/c/broker.c``), compiled with
gcc against ``libqpid-proton11-dev`` into a temporary directory and started on 127.0.0.1 and
an ephemeral port (it prints "listening on PORT").

What it is, read from its source: queues made on first use and named by the link's
address; SASL ANONYMOUS only; every message it receives is accepted and kept as the bytes
of the transfer; every message it sends is pre-settled (at most once); it sends one message
per flow it gets, and does not answer a drain.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from typing import Optional

from proton.utils import BlockingConnection

from tests.support.gateway_process import default_config

__all__ = ["ExampleBroker", "EXAMPLE_BROKER_SOURCE", "example_broker_missing", "take_exactly",
           "example_broker_config"]

EXAMPLE_BROKER_SOURCE = "/usr/share/proton/examples/c/broker.c"


def example_broker_missing() -> Optional[str]:
    """Why the broker cannot be built here, or None."""
    if not os.path.exists(EXAMPLE_BROKER_SOURCE):
        return "needs Debian's libqpid-proton11-dev-examples (.ci/run installs it)"
    if shutil.which("gcc") is None or shutil.which("pkg-config") is None:
        return "needs gcc and pkg-config"
    if subprocess.run(["pkg-config", "--exists", "libqpid-proton"]).returncode != 0:
        return "needs Debian's libqpid-proton11-dev (.ci/run installs it)"
    return None


_PERMITTED = '      /: {configure: ".*", write: ".*", read: ".*"}\n'


def example_broker_config(port: int) -> str:
    """A gateway config whose vhost ``edge`` is proxied to the example broker on ``port``
    (backend ``mini``: kind amqp10, ``credentials: anonymous``, plain names as addresses),
    with the default users (``alice``/``secret``) permitted on it."""
    config = default_config(extra=(
        "vhosts:\n  - /\n  - name: edge\n    backend: mini\n"
        "backends:\n  - name: mini\n    kind: amqp10\n    credentials: anonymous\n"
        f'    nodes: ["127.0.0.1:{port}"]\n    connect_timeout: 5\n    prefetch: 20\n'
        '    address:\n      queue: "{queue}"\n      exchange: "{key}"\n'))
    return config.replace(_PERMITTED, _PERMITTED + _PERMITTED.replace("/:", "edge:"))


def take_exactly(conn: BlockingConnection, address: str, count: int, timeout: float = 15.0) -> list:
    """``count`` messages from ``address`` on a receiver given exactly ``count`` credit (a
    message sent settled on more credit than is read would be lost), then detached."""
    receiver = conn.create_receiver(address, credit=0)
    receiver.flow(count)
    conn.wait(lambda: len(receiver.fetcher.incoming) >= count, timeout=timeout)
    got = [receiver.fetcher.pop() for _ in range(count)]
    receiver.close()
    return got


class ExampleBroker:
    """The compiled broker, started and stopped (see the module docstring)."""

    def __init__(self, start_timeout: float = 20.0) -> None:
        self.start_timeout = start_timeout
        self.port = 0
        self._dir = tempfile.mkdtemp(prefix="proton-broker-")
        self._proc: Optional[subprocess.Popen] = None
        self.output: list[str] = []

    def _build(self) -> str:
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libqpid-proton"], check=True,
                               capture_output=True, text=True).stdout.split()
        binary = os.path.join(self._dir, "broker")
        subprocess.run(["gcc", "-O1", "-I", os.path.dirname(EXAMPLE_BROKER_SOURCE), "-o", binary,
                        EXAMPLE_BROKER_SOURCE, *flags, "-lpthread"], check=True, capture_output=True,
                       timeout=120)
        return binary

    def start(self) -> "ExampleBroker":
        binary = self._build()
        self._proc = subprocess.Popen([binary, "127.0.0.1", "0"], cwd=self._dir, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
        listening = threading.Event()

        def read() -> None:
            assert self._proc is not None and self._proc.stdout is not None
            for line in self._proc.stdout:
                self.output.append(line)
                if line.startswith("listening on "):
                    self.port = int(line.split()[-1])
                    listening.set()

        threading.Thread(target=read, daemon=True).start()
        if not listening.wait(self.start_timeout):
            self.stop()
            raise RuntimeError("the example broker did not start: " + "".join(self.output))
        return self

    def connect(self, timeout: float = 15.0) -> BlockingConnection:
        """A proton client straight to the broker's own 1.0 port."""
        return BlockingConnection(f"amqp://127.0.0.1:{self.port}", timeout=timeout, allowed_mechs="ANONYMOUS")

    def take(self, address: str, count: int, timeout: float = 15.0) -> list:
        """``count`` messages of queue ``address``, read straight from the broker (each a
        proton ``Message``). Exactly ``count`` credit is given: the broker sends settled,
        so a message sent on more credit than was read would be gone."""
        conn = self.connect()
        try:
            return take_exactly(conn, address, count, timeout)
        finally:
            conn.close()

    def stop(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        shutil.rmtree(self._dir, ignore_errors=True)
