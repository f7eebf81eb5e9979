"""Missing Java or PySpark: a clear error naming the package, before Spark starts."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from pipeline import environment
from pipeline.cli import report_main
from pipeline.environment import PipelineEnvironmentError, check_environment, find_java


def test_missing_java_names_the_debian_package(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_java() is None
    with pytest.raises(PipelineEnvironmentError) as info:
        check_environment()
    assert "openjdk-17-jre-headless" in str(info.value)
    assert info.value.package == "openjdk-17-jre-headless"


def test_java_home_wins_over_path(monkeypatch, tmp_path):
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert find_java() == str(java)


def test_missing_pyspark_names_the_command_that_installs_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(environment.importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyspark" else real(name, *a))
    with pytest.raises(PipelineEnvironmentError) as info:
        check_environment(need_java=False)
    assert str(info.value) == (f"pyspark is not installed; install the report's packages with: "
                               f"{sys.executable} -m pip install 'pyspark>=3.5' 'pyarrow>=14' 'matplotlib>=3.8'")


def test_without_pip_the_command_starts_with_ensurepip(monkeypatch):
    """The Debian package's virtual environment has no pip."""
    real = importlib.util.find_spec
    monkeypatch.setattr(environment.importlib.util, "find_spec",
                        lambda name, *a: None if name == "pip" else real(name, *a))
    assert environment.install_hint().startswith(f"{sys.executable} -m ensurepip && {sys.executable} -m pip "
                                                 "install 'pyspark>=3.5'")


def test_amqp_gateway_report_without_pyspark_says_how_to_install_it_in_one_line(tmp_path):
    """Issue 46: the package's ``report`` failed with "No module named 'pyspark'" and no
    hint (a module that imports PySpark was imported before the check)."""
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    code = ("import sys; sys.modules['pyspark'] = None; from gateway.cli import main; "
            f"sys.exit(main(['report', '--ledger', {str(ledger)!r}, '--out', {str(tmp_path / 'out')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("error: pyspark is not installed; install the report's packages with: ")
    assert "-m pip install 'pyspark>=3.5'" in line


def test_cli_reports_missing_java_with_status_2(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    status = report_main(["--ledger", str(tmp_path), "--out", str(tmp_path / "out")])
    assert status == 2
    err = capsys.readouterr().err
    assert "openjdk-17-jre-headless" in err and err.startswith("error: ")


def test_cli_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        report_main(["--out", "x"])
    assert info.value.code == 2
    assert "--ledger" in capsys.readouterr().err
