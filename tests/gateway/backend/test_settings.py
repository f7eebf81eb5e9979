"""``backends:`` and ``vhosts[].backend`` in the config: every problem with its key path and line."""
from __future__ import annotations

import pytest

from gateway.backend.settings import split_node
from gateway.config import ConfigError, load_config_text

GOOD = """\
vhosts:
  - /
  - name: edge
    backend: rabbit
backends:
  - name: rabbit
    nodes: ["10.0.0.1:5672", "[::1]:5673", "mq3"]
    vhost: prod
    credentials: passthrough
    heartbeat: 30
    prefetch: 50
"""


def test_a_proxied_vhost_and_its_backend_load() -> None:
    cfg = load_config_text(GOOD)
    assert cfg.vhost_names == ("/", "edge")
    assert cfg.local_vhosts == ("/",)
    backend = cfg.backend_of("edge")
    assert backend is not None and backend.passthrough and backend.vhost == "prod"
    assert backend.addresses() == [("10.0.0.1", 5672), ("::1", 5673), ("mq3", 5672)]
    assert cfg.backend_of("/") is None


def _problems(text: str) -> list[tuple[str, int, str]]:
    with pytest.raises(ConfigError) as info:
        load_config_text(text)
    return [(e.key_path, e.line, e.message) for e in info.value.errors]


def test_an_unknown_backend_is_named_with_its_line() -> None:
    [(path, line, message)] = _problems(GOOD.replace("backend: rabbit", "backend: rabit"))
    assert (path, line) == ("vhosts[1].backend", 4)
    assert "'rabit' is not the name of a backend (rabbit)" in message


def test_a_vhost_on_an_amqp10_backend_loads_with_its_address_templates() -> None:
    text = (GOOD + "  - name: amq\n    kind: amqp10\n    nodes: [a]\n    user: svc\n"
            "    address:\n      queue: \"queue://{queue}\"\n      exchange: \"topic://{key}\"\n"
            "      exchanges: {celery: \"queue://{key}\"}\n").replace("backend: rabbit", "backend: amq")
    backend = load_config_text(text).backend_of("edge")
    assert backend is not None and backend.kind == "amqp10"
    assert (backend.address.queue, backend.address.exchange) == ("queue://{queue}", "topic://{key}")
    assert dict(backend.address.exchanges) == {"celery": "queue://{key}"}


@pytest.mark.parametrize("templates, key, text", [
    ('queue: "queue://{name}"', "backends[0].address.queue", "may name only {queue}"),
    ('queue: "queue://fixed"', "backends[0].address.queue", "must contain {queue}"),
    ('exchange: "topic://{queue}"', "backends[0].address.exchange", "may name only {exchange}, {key}"),
    ('exchanges: {x: "topic://{"}', "backends[0].address.exchanges.x", "is not a template"),
])
def test_a_bad_address_template_is_named(templates: str, key: str, text: str) -> None:
    [(path, _line, message)] = _problems(GOOD.replace("    heartbeat: 30\n", f"    heartbeat: 30\n    kind: amqp10\n"
                                                     f"    address:\n      {templates}\n"))
    assert path == key and text in message, message


@pytest.mark.parametrize("old, new, key, text", [
    ("    credentials: passthrough\n", "", "backends[0].credentials", "needs credentials: passthrough (or anonymous), or user"),
    ("credentials: passthrough", "credentials: anonymous", "backends[0].credentials", "is for kind amqp10"),
    ("credentials: passthrough", "credentials: anonymous\n    kind: amqp10\n    user: x", "backends[0].credentials",
     "logs in with no user"),
    ("credentials: passthrough", "credentials: passthrough\n    user: x", "backends[0].credentials",
     "leave out user"),
    ("credentials: passthrough", "credentials: shared", "backends[0].credentials", "is not 'passthrough' or 'anonymous'"),
    ("10.0.0.1:5672", "10.0.0.1:0", "backends[0].nodes", "is not a port"),
    ("prefetch: 50", "prefetch: 0", "backends[0].prefetch", "not a positive number"),
    ("vhost: prod", "vhost: prod\n    tls_ca_file: /nonexistent/ca.pem", "backends[0].tls_ca_file",
     "does not exist"),
])
def test_bad_backend_settings(old: str, new: str, key: str, text: str) -> None:
    problems = _problems(GOOD.replace(old, new))
    assert any(path == key and text in message and line > 5 for path, line, message in problems), problems


def test_a_vhost_listed_twice_and_a_backend_listed_twice() -> None:
    text = GOOD.replace("  - name: edge\n", "  - edge\n  - name: edge\n") + \
        "  - name: rabbit\n    nodes: [b]\n    credentials: passthrough\n"
    paths = {path for path, _, _ in _problems(text)}
    assert {"vhosts[2]", "backends[1].name"} <= paths


@pytest.mark.parametrize("node, expected", [
    ("h:1", ("h", 1)), ("h", ("h", 5672)), ("[::1]:5", ("::1", 5)), ("[fe80::1]", ("fe80::1", 5672)),
])
def test_split_node(node: str, expected: tuple[str, int]) -> None:
    assert split_node(node) == expected


@pytest.mark.parametrize("node", ["", ":5672", "h:x", "h:70000", "[::1"])
def test_split_node_refuses(node: str) -> None:
    with pytest.raises(ValueError):
        split_node(node)


def test_an_amqp10_backend_may_log_in_anonymously() -> None:
    cfg = load_config_text(GOOD.replace("credentials: passthrough", "credentials: anonymous\n    kind: amqp10"))
    backend = cfg.backend_of("edge")
    assert backend is not None and backend.anonymous and not backend.passthrough
