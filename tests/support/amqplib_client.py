"""Run amqplib (the Node.js AMQP 0-9-1 client, ``tests/support/rhea/amqplib_client.js``)
against a gateway: what its own test suite does that Python clients do not (fill a
channel's send buffer, then close; ``updateSecret``)."""
from __future__ import annotations

import json
import subprocess
from typing import Any

from tests.support.rhea_client import RHEA_DIR, ensure_node_clients

__all__ = ["amqplib_run"]


def amqplib_run(command: str, port: int, user: str, password: str, *args: str) -> dict[str, Any]:
    """Run ``command`` (``update-secret`` NEW_SECRET, ``fill-and-close``) and return the
    JSON line the script printed; raises RuntimeError when it timed out or failed."""
    ensure_node_clients()
    done = subprocess.run(["node", "amqplib_client.js", command, str(port), user, password, *args],
                          cwd=RHEA_DIR, capture_output=True, text=True, timeout=60)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"amqplib {command} failed ({done.returncode}): "
                           f"{done.stdout.strip()} {done.stderr.strip()}")
    return json.loads(done.stdout.splitlines()[-1])
