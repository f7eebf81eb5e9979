"""The Dockerfile, checked without a Docker engine (the development machine has none:
``docker build`` fails to reach a daemon; ``deploy/check-image`` builds and runs the image
where one is available, CI included): what it copies exists and is not excluded by
``.dockerignore``, it copies every package pyproject.toml installs, its final stage is
Debian slim and runs as a user that is not root, its healthcheck is ``amqp-gateway
ping``, the config it ships passes ``check-config``, and the Debian packages it installs
exist."""
from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instruction in _instructions():
        if instruction[0] == "FROM":
            stages.append([])
        stages[-1].append(instruction)
    return stages


def _copies() -> list[tuple[list[str], str]]:
    """(sources, destination) of every COPY from the build context."""
    out = []
    for word, rest in _instructions():
        if word != "COPY":
            continue
        args = [a for a in shlex.split(rest) if not a.startswith("--")]
        if "--from=" in rest:
            continue
        out.append((args[:-1], args[-1]))
    return out


def _ignored(path: str) -> bool:
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    parts = Path(path).parts
    return any(fnmatch.fnmatch("/".join(parts[:i]), pattern.removeprefix("**/"))
               or fnmatch.fnmatch(parts[i - 1], pattern.removeprefix("**/"))
               for pattern in patterns for i in range(1, len(parts) + 1))


def test_every_copied_file_exists_and_reaches_the_build_context() -> None:
    copies = _copies()
    assert copies
    for sources, _ in copies:
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
            assert not _ignored(source), f"COPY {source}: excluded by .dockerignore"


def test_the_image_gets_every_package_pyproject_installs() -> None:
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)
    wanted = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = {source.rstrip("/") for sources, _ in _copies() for source in sources}
    assert wanted <= copied, wanted - copied
    assert {"pyproject.toml", project["project"]["readme"]} <= copied


def test_debian_slim_a_user_that_is_not_root_and_a_ping_healthcheck() -> None:
    final = _stages()[-1]
    assert re.fullmatch(r"debian:[a-z]+-slim", final[0][1]), final[0]
    words = [word for word, _ in final]
    users = [rest for word, rest in final if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert words.index("USER") < words.index("ENTRYPOINT")
    [healthcheck] = [rest for word, rest in final if word == "HEALTHCHECK"]
    command = healthcheck.split("CMD", 1)[1]
    assert '"amqp-gateway", "ping", "--config", "/etc/amqp-gateway/config.yaml"' in command


def test_the_shipped_config_passes_check_config() -> None:
    [(sources, _)] = [c for c in _copies() if c[1] == "/etc/amqp-gateway/config.yaml"]
    done = subprocess.run([sys.executable, "-m", "gateway.cli", "check-config", str(ROOT / sources[0])],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "state_dir: /var/lib/amqp-gateway" in (ROOT / sources[0]).read_text()


@pytest.mark.skipif(shutil.which("apt-cache") is None, reason="no apt-cache here")
def test_the_debian_packages_it_installs_exist() -> None:
    packages = set()
    for word, rest in _instructions():
        if word == "RUN" and "apt-get install" in rest:
            for command in rest.split("&&"):
                if "apt-get install" in command:
                    packages |= {a for a in command.split("apt-get install", 1)[1].split() if not a.startswith("-")}
    assert {"python3.11", "python3.11-venv", "libssl3"} <= packages
    # one apt-cache run for all of them (each run reads the whole package cache): every
    # package must have a record of its own (for a missing one apt-cache may still exit 0)
    shown = subprocess.run(["apt-cache", "show", *sorted(packages)], capture_output=True, text=True,
                           timeout=60)
    found = set(re.findall(r"^Package: (\S+)$", shown.stdout, re.M))
    for package in sorted(packages):
        assert package in found, f"no Debian package {package}: {shown.stderr.strip()}"
    assert shown.returncode == 0, shown.stderr
