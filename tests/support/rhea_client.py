"""Run rhea (Node.js) management requests against a gateway (``tests/support/rhea``, which
also holds amqplib: ``amqplib_client``).

``npm ci`` runs once in that directory when a package of its ``package.json`` is missing
from ``node_modules`` (the Makefile's ``test`` target does it first).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any, Callable

__all__ = ["RHEA_DIR", "ensure_node_clients", "rhea_management", "rhea_without_sasl",
           "rhea_filtered_receive", "rhea_transaction"]

RHEA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rhea")


def ensure_node_clients() -> None:
    """Install the Node.js clients (rhea, amqplib) if needed; raises RuntimeError naming
    what is missing."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise RuntimeError("node and npm are needed for the rhea and amqplib tests "
                           "(apt-get install nodejs npm)")
    with open(os.path.join(RHEA_DIR, "package.json"), encoding="utf-8") as f:
        packages = json.load(f)["dependencies"]
    if not all(os.path.isdir(os.path.join(RHEA_DIR, "node_modules", name)) for name in packages):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=RHEA_DIR, check=True,
                       capture_output=True, timeout=300)


def rhea_management(port: int, user: str, password: str, requests: list[dict[str, Any]],
                    node: str = "$management") -> list[dict[str, Any]]:
    """Send ``requests`` ({properties, body}) with rhea; the replies in order."""
    ensure_node_clients()
    done = subprocess.run(["node", "management_client.js", str(port), user, password, node],
                          cwd=RHEA_DIR, input=json.dumps(requests), capture_output=True, text=True,
                          timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"rhea client failed ({done.returncode}): {done.stderr.strip()}")
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return sorted(replies, key=lambda r: int(str(r["correlation_id"]).split("-")[1]))


def rhea_without_sasl(port: int) -> dict[str, Any]:
    """Connect with rhea without SASL and return what it saw by the time the socket
    closed: ``opened``, ``error`` (the close's ``condition`` and ``description``, or None)
    and ``closed`` (a close came)."""
    ensure_node_clients()
    done = subprocess.run(["node", "without_sasl_client.js", str(port)], cwd=RHEA_DIR,
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"rhea client failed ({done.returncode}): {done.stdout.strip()} "
                           f"{done.stderr.strip()}")
    return json.loads(done.stdout.splitlines()[-1])


def rhea_filtered_receive(port: int, address: str, kind: str, value: Any, count: int,
                          user: str = "guest", password: str = "guest") -> list[dict[str, Any]]:
    """Attach a rhea receiver to ``address`` with a source filter (``kind`` "selector":
    rhea's ``filter.selector(value)``; "raw": ``value`` maps a key to ``[descriptor,
    value]``) and take ``count`` messages: the client's JSON lines (``echoed`` filter
    keys, then ``body`` per message, or ``error`` for a refused attach)."""
    ensure_node_clients()
    arg = value if kind == "selector" else json.dumps(value)
    done = subprocess.run(["node", "filter_receiver.js", str(port), user, password, address,
                           kind, arg, str(count)], cwd=RHEA_DIR, capture_output=True,
                          text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"rhea client failed ({done.returncode}): {done.stdout.strip()} "
                           f"{done.stderr.strip()}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def rhea_transaction(port: int, address: str, count: int, fail: bool,
                     between: Callable[[], Any], user: str = "guest",
                     password: str = "guest") -> list[dict[str, Any]]:
    """Post ``count`` messages to ``address`` in a transaction with rhea
    (``transaction_client.js``), call ``between`` once they are all settled, then
    discharge it (``fail``): the client's JSON lines (``declared``, ``posted``,
    ``discharged``)."""
    ensure_node_clients()
    lines: list[dict[str, Any]] = []
    with subprocess.Popen(["node", "transaction_client.js", str(port), user, password, address,
                           str(count), "true" if fail else "false"], cwd=RHEA_DIR,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as client:
        assert client.stdout is not None and client.stdin is not None
        for line in client.stdout:
            if not line.strip():
                continue
            lines.append(json.loads(line))
            if "posted" in lines[-1]:
                between()
                client.stdin.write("discharge\n")
                client.stdin.flush()
        code = client.wait(timeout=30)
        errors = client.stderr.read() if client.stderr else ""
    if code != 0:
        raise RuntimeError(f"rhea client failed ({code}): {lines} {errors.strip()}")
    return lines
