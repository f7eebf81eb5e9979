"""Create ``.venv`` even where Debian's python3 lacks ensurepip (no python3-venv).

``python3 -m venv`` needs the ``python3-venv`` package on Debian. When it fails, this
creates the environment without pip and installs pip from its wheel on PyPI (a wheel is
a zip that Python can run), which needs nothing but the standard library.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.request

VENV = sys.argv[1] if len(sys.argv) > 1 else ".venv"


def main() -> int:
    py = os.path.join(VENV, "bin", "python")
    if os.path.exists(os.path.join(VENV, "bin", "pip")):
        return 0
    if subprocess.call([sys.executable, "-m", "venv", VENV]) == 0 and \
            os.path.exists(os.path.join(VENV, "bin", "pip")):
        return 0
    print("python3 -m venv could not install pip (no python3-venv?); fetching pip from PyPI",
          file=sys.stderr)
    subprocess.check_call([sys.executable, "-m", "venv", "--clear", "--without-pip", VENV])
    with urllib.request.urlopen("https://pypi.org/pypi/pip/json", timeout=60) as r:
        info = json.load(r)
    wheel = next(u for u in info["urls"] if u["filename"].endswith(".whl"))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, wheel["filename"])
        urllib.request.urlretrieve(wheel["url"], path)
        subprocess.check_call([py, os.path.join(path, "pip"), "install", "-q", path])
    return 0


if __name__ == "__main__":
    sys.exit(main())
