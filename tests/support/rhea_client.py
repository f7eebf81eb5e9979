"""Run rhea (Node.js) management requests against a gateway (``tests/support/rhea``).

``npm install`` runs once in that directory when its ``node_modules`` is missing (the
Makefile's ``test`` target does it first).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

__all__ = ["RHEA_DIR", "ensure_rhea", "rhea_management"]

RHEA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rhea")


def ensure_rhea() -> None:
    """Install rhea if needed; raises RuntimeError naming what is missing."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise RuntimeError("node and npm are needed for the rhea tests (apt-get install nodejs npm)")
    if not os.path.isdir(os.path.join(RHEA_DIR, "node_modules", "rhea")):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=RHEA_DIR, check=True,
                       capture_output=True, timeout=300)


def rhea_management(port: int, user: str, password: str, requests: list[dict[str, Any]],
                    node: str = "$management") -> list[dict[str, Any]]:
    """Send ``requests`` ({properties, body}) with rhea; the replies in order."""
    ensure_rhea()
    done = subprocess.run(["node", "management_client.js", str(port), user, password, node],
                          cwd=RHEA_DIR, input=json.dumps(requests), capture_output=True, text=True,
                          timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"rhea client failed ({done.returncode}): {done.stderr.strip()}")
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return sorted(replies, key=lambda r: int(str(r["correlation_id"]).split("-")[1]))
