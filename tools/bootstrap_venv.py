"""Create ``.venv`` even where Debian's python3 lacks ensurepip (no python3-venv), and
make sure python-qpid-proton can be compiled.

``python3 -m venv`` needs the ``python3-venv`` package on Debian. When it fails, this
creates the environment without pip and installs pip from its wheel on PyPI (a wheel is
a zip that Python can run), which needs nothing but the standard library.

python-qpid-proton is published on PyPI only as a source package: pip compiles it, which
needs a C compiler, Python's headers and OpenSSL's headers (for proton's SSL). On a fresh
Debian they are missing; as root with apt-get we install them, otherwise we stop with the
list of packages to install instead of letting pip fail with a compiler traceback.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import urllib.request

VENV = sys.argv[1] if len(sys.argv) > 1 else ".venv"


BUILD_PACKAGES = ("gcc", "python3-dev", "libssl-dev", "pkg-config")


def missing_build_tools() -> list[str]:
    """What compiling python-qpid-proton lacks here, as Debian package names."""
    missing = []
    if not (shutil.which("cc") or shutil.which("gcc")):
        missing.append("gcc")
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        missing.append("python3-dev")
    if not os.path.exists("/usr/include/openssl/ssl.h"):
        missing.append("libssl-dev")
    if not shutil.which("pkg-config"):
        missing.append("pkg-config")
    return missing


def ensure_build_tools() -> None:
    missing = missing_build_tools()
    if not missing:
        return
    if shutil.which("apt-get") and os.geteuid() == 0:
        print(f"installing what python-qpid-proton needs to compile: {' '.join(missing)}",
              file=sys.stderr)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.check_call(["apt-get", "update", "-qq"], env=env)
        subprocess.check_call(["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                               *missing], env=env)
        return
    sys.exit("python-qpid-proton is compiled from source by pip and this machine lacks: "
             f"{' '.join(missing)}\ninstall them first, e.g. sudo apt-get install "
             f"{' '.join(BUILD_PACKAGES)}")


def main() -> int:
    ensure_build_tools()
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
