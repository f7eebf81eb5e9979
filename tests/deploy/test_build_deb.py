"""``make deb`` from an unpacked source tarball, where there is no git (issue 46: the
build listed its sources with ``git ls-files``). The tarball is what ``make dist`` packs
(the repository's files), here taken from the work tree so that uncommitted changes are
what is tested; the build runs ``deploy/build-deb`` as ``make deb`` does."""
from __future__ import annotations

import os
import shutil
import subprocess
import tarfile

import pytest

from tests.support.gateway_process import REPO

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]  # a whole package build


def _can_build() -> str:
    """Why the build cannot run here ("" when it can)."""
    if not os.path.exists("/usr/bin/python3.11") or not os.path.exists("/usr/lib/python3.11/ensurepip"):
        return "needs Debian's python3.11 and python3.11-venv"
    if shutil.which("dpkg-deb") is None or shutil.which("unshare") is None:
        return "needs dpkg-deb and unshare"
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True)
    return "" if probe.returncode == 0 else "no mount namespaces here"


@pytest.mark.skipif(bool(_can_build()), reason=_can_build() or "-")
def test_make_deb_builds_from_a_source_tarball_without_git(tmp_path) -> None:
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    tarball = tmp_path / "amqp-gateway-src.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        for name in filter(None, files):
            if os.path.exists(os.path.join(REPO, name)):
                tar.add(os.path.join(REPO, name), arcname=f"amqp-gateway/{name}")
    with tarfile.open(tarball) as tar:
        tar.extractall(tmp_path / "unpacked", filter="tar")
    source = tmp_path / "unpacked" / "amqp-gateway"
    assert not (source / ".git").exists()
    env = dict(os.environ, DEB_OUT=str(tmp_path / "out"), GIT_DIR=str(tmp_path / "no-git"),
               GIT_CEILING_DIRECTORIES=str(tmp_path))
    built = subprocess.run(["make", "deb"], cwd=source, capture_output=True, text=True, env=env, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    [deb] = list((tmp_path / "out").glob("amqp-gateway_*.deb"))
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    for path in ("./opt/amqp-gateway/venv/bin/amqp-gateway", "/site-packages/gateway/cli.py",
                 "/site-packages/pipeline/environment.py", "./etc/amqp-gateway/config.yaml"):
        assert path in listing, path
    assert "/site-packages/tests/" not in listing and "/site-packages/bench/" not in listing
