"""The per-message budget: every path of ``bench/hotpath.py`` at most 2 % above its budget
in ``bench/hotpath_budget.json`` (Python calls, C calls and tracemalloc blocks held per
message).

The counts are deterministic (the meter fixes the hash seed, warms each path up and
counts one same batch), so a path that got dearer fails here, not in a wall-clock bench
on a busy machine. The meter runs once, in its own process (each path in a fork of it).

Calls are held to 2 %, and so are C calls (builtins and C functions called from Python):
each proton call among them drops and retakes the interpreter lock and costs about what a
small Python function does, and none of them shows in the Python calls. Bytecodes too:
work moved into fewer, longer functions (a call inlined, a ledger row written out at its
call site) lowers the calls and not the work, and only the bytecodes show it (issue 43:
W4 through a backlog made 21 % fewer calls than 446005f and ran 12 % more bytecodes, and
the bench's W4 rows were 5-11 % slower). Blocks held in flight are the same on every run too, but they
move with the order in which the interpreter reuses freed blocks (its free lists), so a
change elsewhere in the path can shift them by a tenth either way: their guard is 25 %,
which still catches a message that holds more objects.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUDGET_FILE = ROOT / "bench" / "hotpath_budget.json"
TOLERANCE = {"calls": 1.02, "c_calls": 1.02, "blocks": 1.25, "bytecodes": 1.02}
BUDGETS = {name: b for name, b in json.loads(BUDGET_FILE.read_text()).items() if not name.startswith("_")}

# one worker of pytest-xdist runs them all, so that the meter runs once (session scope:
# a module fixture is set up again when the worker runs other modules' tests in between,
# about 45 s each time); slow: the meter runs every workload of the bench
pytestmark = [pytest.mark.xdist_group("hotpath"), pytest.mark.slow]


@pytest.fixture(scope="session")
def counts(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("hotpath") / "counts.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "hotpath.py"), "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def test_every_path_of_the_meter_has_a_budget(counts: dict) -> None:
    assert sorted(counts) == sorted(BUDGETS)


@pytest.mark.parametrize("path", sorted(BUDGETS))
@pytest.mark.parametrize("what", ["calls", "c_calls", "blocks", "bytecodes"])
def test_path_within_its_budget(counts: dict, path: str, what: str) -> None:
    count, budget, tolerance = counts[path][what], BUDGETS[path][what], TOLERANCE[what]
    assert count <= budget * tolerance, (
        f"{path}: {count} {what} per message, budget {budget} "
        f"(+{round(100 * (tolerance - 1))}% = {budget * tolerance:.2f})")
