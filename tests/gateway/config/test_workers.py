"""``workers``: its values, and check-config's rule that more than one needs every vhost proxied."""
from __future__ import annotations

import pytest

from gateway.config import ConfigError, load_config_text
from gateway.config.root import VhostConfig
from gateway.config.workers import worker_count, workers_problem


def test_one_worker_is_the_default_and_needs_nothing():
    assert load_config_text("vhosts: [/]\n").workers == 1
    assert load_config_text("workers: 1\nvhosts: [/]\n").workers == 1


@pytest.mark.parametrize("value", ["2", "auto"])
def test_more_than_one_worker_with_an_embedded_vhost_is_refused_naming_both_places(value):
    text = f"listeners:\n  - port: 0\nvhosts:\n  - /\n  - other\nworkers: {value}\n"
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, source="gw.yaml")
    error = caught.value
    assert (error.key_path, error.line) == ("workers", 6)
    assert f"workers: {value} runs several gateway processes, but vhost '/' (vhosts[0], line 4) " \
           "has no backend" in error.message
    assert "set workers: 1" in error.message


def test_the_default_vhost_is_embedded_too():
    with pytest.raises(ConfigError) as caught:
        load_config_text("workers: 3\n")
    assert "vhost '/' (the default vhosts) has no backend" in caught.value.message


@pytest.mark.parametrize("value,problem", [
    ("0", "0 is neither a number of processes"), ("many", "'many' is neither"),
    ("true", "expected an integer or a string, got True"), ("1.5", "got 1.5")])
def test_bad_values_name_the_key_and_line(value, problem):
    with pytest.raises(ConfigError) as caught:
        load_config_text(f"vhosts: [/]\nworkers: {value}\n")
    assert (caught.value.key_path, caught.value.line) == ("workers", 2)
    assert problem in caught.value.message


def test_every_vhost_proxied_allows_any_number():
    assert workers_problem(4, [VhostConfig("/", "rabbit"), VhostConfig("b", "rabbit")]) is None
    assert workers_problem("auto", [VhostConfig("/", "rabbit"), VhostConfig("b", "")]).startswith(
        "workers: auto runs several gateway processes, but vhost 'b' (vhosts[1])")


def test_auto_is_the_cpu_count():
    assert worker_count("auto", cpus=8) == 8
    assert worker_count("auto", cpus=0) == 1
    assert worker_count(3) == 3


def test_check_config_refuses_and_says_why(tmp_path, capsys, monkeypatch):
    from gateway import cli
    from gateway.cli import EXIT_CONFIG, main

    # main() would set up the root logger of the CLI's own process: here, a handler on this
    # test's captured stderr that in-process gateways of later tests would write to
    monkeypatch.setattr(cli, "setup_logging", lambda *args, **kwargs: None)

    path = tmp_path / "gw.yaml"
    path.write_text("vhosts:\n  - /\n  - name: edge\n    backend: rabbit\nbackends:\n  - name: rabbit\n"
                    "    kind: amqp091\n    nodes: [\"127.0.0.1:5672\"]\n    credentials: passthrough\n"
                    "workers: auto\n")
    assert main(["check-config", str(path)]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert f"{path}:10: workers: workers: auto runs several gateway processes, but vhost '/' " \
           "(vhosts[0], line 2) has no backend" in err
    path.write_text(path.read_text().replace("  - /\n", ""))
    assert main(["check-config", str(path)]) == 0
