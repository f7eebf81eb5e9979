import os
import subprocess
import sys

import pytest

from gateway.broker import UnroutablePolicy
from gateway.config.schema_walker import LOADER_FIELDS
from gateway.config import (
    ConfigError, GatewayConfig, TlsMode, load_config, load_config_text, parse_host_port,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(REPO, "config.example.yaml")


def error_of(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config_text(text, "gw.yaml")
    return info.value


def test_example_config_loads_with_rabbitmq_like_defaults():
    cfg = load_config(EXAMPLE)
    assert cfg.vhost_names == ("/",)
    assert [(l.host, l.port, l.tls) for l in cfg.listeners] == [("127.0.0.1", 5672, TlsMode.OFF)]
    guest = cfg.users[0]
    assert guest.name == "guest" and guest.loopback_only
    assert guest.password_hash.startswith("SCRAM-SHA-256$")
    assert "guest" not in guest.password_hash.split("$", 1)[1]
    assert (cfg.metrics.host, cfg.metrics.port, cfg.metrics.path) == ("127.0.0.1", 9419, "/metrics")


def test_example_documents_every_key_with_its_default():
    """Every dataclass field appears in config.example.yaml, and the example's values are the defaults."""
    text = open(EXAMPLE).read()
    import dataclasses

    import typing

    def names(cls):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.name in LOADER_FIELDS:
                continue
            yield f.name
            tp = hints[f.name]
            inner = [a for a in typing.get_args(tp) if dataclasses.is_dataclass(a)]
            for sub in ([tp] if dataclasses.is_dataclass(tp) else inner):
                yield from names(sub)

    seen = list(names(GatewayConfig))
    assert "sniff_timeout" in seen and "max_message_size" in seen and "configure" in seen
    assert "server_name" in seen
    for name in seen:
        assert f"{name}:" in text, name
    cfg = load_config(EXAMPLE)
    default = GatewayConfig()
    assert cfg.limits == default.limits
    assert cfg.amqp10 == default.amqp10
    assert cfg.metrics == default.metrics
    assert cfg.listeners == default.listeners
    assert cfg.memory_high_watermark == default.memory_high_watermark
    assert cfg.memory_low_watermark_ratio == default.memory_low_watermark_ratio == 0.9
    assert default.limits.failed_login_max_pending == 8
    assert cfg.store == default.store


def test_empty_file_gives_defaults():
    assert load_config_text("") .listeners == GatewayConfig().listeners


@pytest.mark.parametrize("text,path,line,words", [
    ("listeners:\n  - host: 127.0.0.1\n    port: 70000\n", "listeners[0].port", 3, "not a valid port"),
    ("listeners:\n  - port: -1\n", "listeners[0].port", 2, "not a valid port"),
    ("listeners:\n  - port: five\n", "listeners[0].port", 2, "expected an integer"),
    ("\n\nlistners: []\n", "listners", 3, "unknown key 'listners'"),
    ("limits:\n  heartbeat: true\n", "limits.heartbeat", 2, "expected an integer"),
    ("limits:\n  frame_max: 1000\n", "limits.frame_max", 2, "minimum frame size 4096"),
    ("metrics:\n  enabled: yes please\n", "metrics.enabled", 2, "true or false"),
    ("listeners:\n  - tls: sometimes\n", "listeners[0].tls", 2, "not one of: off, on, auto"),
    ("listeners:\n  - tls: on\n", "listeners[0].tls_cert_file", 2, "tls: on needs tls_cert_file"),
    ("listeners:\n  - port: 1\n    tls: auto\n", "listeners[0].tls_cert_file", 3, "needs tls_cert_file"),
    ("listeners:\n  - tls_verify_client: required\n", "listeners[0].tls_ca_file", 2, "needs tls_ca_file"),
    ("listeners:\n  - tls_verify_client: maybe\n", "listeners[0].tls_verify_client", 2, "not one of"),
    ("listeners:\n  - tls_min_version: '1.0'\n", "listeners[0].tls_min_version", 2, "1.2 or 1.3"),
    ("listeners:\n  - mechanisms: [PLAIN, CRAM-MD5]\n", "listeners[0].mechanisms", 2, "CRAM-MD5"),
    ("listeners:\n  - tls_cert_file: /no/such/cert.pem\n", "listeners[0].tls_cert_file", 2,
     "does not exist"),
    ("users:\n  - name: bob\n    password_hash: hunter2\n", "users[0].password_hash", 3,
     "clear-text passwords are not accepted"),
    ("users:\n  - name: bob\n", "users[0].password_hash", 2, "required key"),
    ("listeners: 5\n", "listeners", 1, "expected a list"),
    ("users:\n  - name: bob\n    password_hash: x\n    permissions:\n      /: {read: '('}\n",
     "users[0].password_hash", 3, "not a password hash"),
    ("logging:\n  level: LOUD\n", "logging.level", 2, "not one of"),
    ("logging:\n  summary_interval: 0\n", "logging.summary_interval", 2, "must be"),
    ("management:\n  sample_interval: -5\n", "management.sample_interval", 2, "must be"),
    ("limits:\n  close_linger: -1\n", "limits.close_linger", 2, "must not be negative"),
    ("limits: {heartbeat: 1, heartbeat: 2}\n", "limits.heartbeat", 1, "given twice"),
    ("listeners:\n  - port: 1\n    max_connections: -1\n", "listeners[0].max_connections", 3,
     "must not be negative"),
    ("limits:\n  failed_login_max_pending: 0\n", "limits.failed_login_max_pending", 2,
     "must be greater than 0"),
    ("\nmemory_low_watermark_ratio: 1.5\n", "memory_low_watermark_ratio", 2,
     "not a fraction above 0.0 and at most 1.0"),
    ("memory_low_watermark_ratio: 0\n", "memory_low_watermark_ratio", 1, "not a fraction"),
    ("listeners:\n  - port: 1\n    backlog: 0\n", "listeners[0].backlog", 3, "must be greater than 0"),
    ("listeners:\n  - port: 1\n    backlog: many\n", "listeners[0].backlog", 3, "expected an integer"),
    ("amqp10:\n  default_vhost: /\n  unroutable: drop\n", "amqp10.unroutable", 3,
     "'drop' is not one of: accept, release, reject"),
    ("amqp10:\n  unroutable: [reject]\n", "amqp10.unroutable", 2, "expected a single value"),
    ("store:\n  sync_mode: sometimes\n", "store.sync_mode", 2, "not one of: full, normal"),
    ("store:\n  commit_interval: 5\n", "store.commit_interval", 2, "between 0 and 1 second"),
    ("store:\n  memory_budget: 0\n", "store.memory_budget", 2, "must be greater than 0"),
    ("store:\n  integrity_check: thorough\n", "store.integrity_check", 2, "quick, full, off"),
    ("store:\n  disk_free_limit: -1\n", "store.disk_free_limit", 2, "must not be negative"),
])
def test_errors_name_key_and_line(text, path, line, words):
    err = error_of(text)
    assert err.key_path == path
    assert err.line == line
    assert words in err.message
    assert str(err).startswith(f"gw.yaml:{line}: {path}: ")


def test_every_schema_error_is_reported_in_one_pass_in_file_order():
    err = error_of("users:\n"
                   "  - name: bob\n"                        # 2: no password_hash
                   "  - name: eve\n"
                   "    password_hash: nope\n"              # 4
                   "limits: {heartbeat: 1, heartbeat: 2}\n"  # 5
                   "listeners:\n"
                   "  - port: 70000\n"                      # 7
                   "    colour: red\n"                      # 8
                   "  - port: 1\n"
                   "    backlog: 0\n"                       # 10
                   "vhosts: 5\n")                           # 11
    assert [(e.line, e.key_path) for e in err.errors] == [
        (2, "users[0].password_hash"), (4, "users[1].password_hash"), (5, "limits.heartbeat"),
        (7, "listeners[0].port"), (8, "listeners[0].colour"), (10, "listeners[1].backlog"),
        (11, "vhosts")]
    assert (err.line, err.key_path) == (2, "users[0].password_hash")   # the first's
    assert str(err).count("gw.yaml:") == 7                            # one line for logs


def test_a_mapping_with_an_error_inside_is_not_cross_checked():
    # tls_cert_file is given (and wrong): no second, misleading "tls: on needs tls_cert_file"
    err = error_of("listeners:\n  - tls: on\n    tls_cert_file: /no/such.pem\n"
                   "    tls_key_file: /no/such.key\n")
    assert [(e.line, e.key_path) for e in err.errors] == [
        (3, "listeners[0].tls_cert_file"), (4, "listeners[0].tls_key_file")]


def test_a_file_that_cannot_be_read_is_named_without_line_or_key():
    with pytest.raises(ConfigError) as info:
        load_config("/no/such/gw.yaml")
    assert str(info.value) == "/no/such/gw.yaml: cannot read config file: No such file or directory"


def test_bad_regex_in_permissions():
    from tests.support.gateway_process import password_hash
    err = error_of(f"users:\n  - name: bob\n    password_hash: \"{password_hash('pw')}\"\n"
                   "    permissions:\n      /:\n        read: '('\n")
    assert err.key_path == "users[0].permissions['/'].read" and err.line == 6
    assert "regular expression" in err.message


def test_invalid_yaml_names_line():
    err = error_of("listeners:\n  - host: [\n")
    assert err.line >= 2 and "not valid YAML" in err.message


def test_a_listener_may_cap_its_own_connections():
    cfg = load_config_text("listeners:\n  - port: 1\n    max_connections: 7\n  - port: 2\n")
    assert [l.max_connections for l in cfg.listeners] == [7, None]   # None: limits.max_connections
    over = cfg.with_overrides(listen=[("127.0.0.1", 0)])
    assert over.listeners[0].max_connections == 7                  # the template's


def test_each_listener_has_its_own_backlog_4096_by_default():
    cfg = load_config_text("listeners:\n  - port: 1\n    backlog: 128\n  - port: 2\n")
    assert [l.backlog for l in cfg.listeners] == [128, 4096]
    assert cfg.with_overrides(listen=[("127.0.0.1", 0)]).listeners[0].backlog == 128  # the template's


def test_overrides_replace_listeners_and_metrics():
    cfg = load_config(EXAMPLE).with_overrides(listen=[("127.0.0.1", 0), ("::1", 5673)],
                                              metrics=("127.0.0.1", 0))
    assert [(l.host, l.port) for l in cfg.listeners] == [("127.0.0.1", 0), ("::1", 5673)]
    assert cfg.listeners[0].sniff_timeout == 10.0
    assert (cfg.metrics.host, cfg.metrics.port) == ("127.0.0.1", 0)


@pytest.mark.parametrize("text,expected", [("127.0.0.1:5672", ("127.0.0.1", 5672)),
                                           ("[::1]:0", ("::1", 0)), ("localhost:1", ("localhost", 1))])
def test_parse_host_port(text, expected):
    assert parse_host_port(text) == expected


@pytest.mark.parametrize("text", ["127.0.0.1", "127.0.0.1:99999", ":5672", "a b:1"])
def test_parse_host_port_rejects(text):
    with pytest.raises(ValueError):
        parse_host_port(text)


def run_cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], cwd=REPO, input=stdin,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.process  # runs the CLI as a process
def test_check_config_ok():
    r = run_cli("check-config", EXAMPLE)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout


@pytest.mark.process  # runs the CLI as a process
def test_check_config_error_exit_2_names_key_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("listeners:\n  - host: 127.0.0.1\n    port: 65536\n")
    r = run_cli("check-config", str(bad))
    assert r.returncode == 2
    assert f"{bad}:3: listeners[0].port: 65536 is not a valid port" in r.stderr


@pytest.mark.process  # runs the CLI as a process
def test_run_with_bad_config_exits_2_before_starting(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("listeners:\n  - tls: on\n")
    r = run_cli("run", "--config", str(bad))
    assert r.returncode == 2
    assert "listeners[0].tls_cert_file" in r.stderr and "needs" in r.stderr


@pytest.mark.process  # runs the CLI as a process
def test_check_config_missing_file():
    r = run_cli("check-config", "/no/such/file.yaml")
    assert r.returncode == 2 and "cannot read config file" in r.stderr


@pytest.mark.process  # runs the CLI as a process
def test_hash_password_output_verifies():
    from gateway.auth import verify_password
    r = run_cli("hash-password", "--password-stdin", stdin="s3cret\n")
    assert r.returncode == 0, r.stderr
    stored = r.stdout.strip()
    assert verify_password(stored, "s3cret") and not verify_password(stored, "other")
    assert "s3cret" not in stored


def test_users_file_adds_users_and_errors_name_its_lines(tmp_path):
    from tests.support.gateway_process import password_hash
    users = tmp_path / "users.yaml"
    users.write_text(f"users:\n  - name: carol\n    password_hash: \"{password_hash('pw')}\"\n"
                     "    max_connections: 3\n")
    cfg = load_config_text(f"users_file: {users}\n")
    assert [(u.name, u.max_connections) for u in cfg.users] == [("carol", 3)]
    users.write_text("users:\n  - name: carol\n    password_hash: nope\n")
    with pytest.raises(ConfigError) as info:
        load_config_text(f"users_file: {users}\n")
    assert info.value.source == str(users) and info.value.line == 3
    assert info.value.key_path == "users[0].password_hash"


def test_duplicate_users_refused_at_the_second_definition(tmp_path):
    from tests.support.gateway_process import password_hash
    h = password_hash("pw")
    err = error_of(f"users:\n  - name: a\n    password_hash: \"{h}\"\n  - name: a\n    password_hash: \"{h}\"\n")
    assert "defined twice: a" in err.message and "first defined at line 2" in err.message
    assert (err.key_path, err.line) == ("users[1].name", 4)
    assert str(err).startswith("gw.yaml:4: users[1].name: ")


def test_duplicate_user_in_the_users_file_names_that_file_and_line(tmp_path):
    from tests.support.gateway_process import password_hash
    h = password_hash("pw")
    users = tmp_path / "users.yaml"
    users.write_text(f"users:\n  - name: b\n    password_hash: \"{h}\"\n"
                     f"  - name: a\n    password_hash: \"{h}\"\n")
    err = error_of(f"users_file: {users}\nusers:\n  - name: a\n    password_hash: \"{h}\"\n")
    assert (err.source, err.key_path, err.line) == (str(users), "users[1].name", 4)
    assert "first defined at gw.yaml:3" in err.message


def test_unreadable_users_file_names_the_key_and_line(tmp_path, monkeypatch):
    import builtins

    import gateway.config.loading as loading_module

    users = tmp_path / "users.yaml"
    users.write_text("users: []\n")

    def no_permission(path, *args, **kwargs):   # chmod 0 would not stop root
        if str(path) == str(users):
            raise PermissionError(13, "Permission denied", str(path))
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(loading_module, "open", no_permission, raising=False)
    err = error_of(f"\nusers_file: {users}\n")
    assert (err.source, err.key_path, err.line) == ("gw.yaml", "users_file", 2)
    assert "cannot read users file: Permission denied" in err.message


# ------------------------------------------------------------------ checks after loading

@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    from tests.support.certificates import TestPKI
    d = str(tmp_path_factory.mktemp("config-pki"))
    ca = TestPKI(d)
    return {"ca": ca, "server": ca.issue("gateway.test"), "other": ca.issue("other.test")}


def _tls_yaml(cert, key, sni_cert=None, sni_key=None) -> str:
    text = ("# a TLS listener\n"
            "listeners:\n"
            "  - host: 127.0.0.1\n"
            "    port: 0\n"
            "    tls: on\n"
            f"    tls_cert_file: {cert}\n"           # line 6
            f"    tls_key_file: {key}\n")            # line 7
    if sni_cert:
        text += ("    tls_sni:\n"
                 "      - server_name: mq.example.org\n"
                 f"        cert_file: {sni_cert}\n"  # line 10
                 f"        key_file: {sni_key}\n")   # line 11
    return text + "ledger:\n  enabled: false\n"


@pytest.mark.process  # runs the CLI as a process
@pytest.mark.parametrize("case,key_path,line,words", [
    ("swapped", "listeners[0].tls_cert_file", 6, "cannot load certificate"),
    ("mismatch", "listeners[0].tls_key_file", 7, "cannot load private key"),
    ("sni", "listeners[0].tls_sni[0].key_file", 11, "cannot load private key"),
])
def test_tls_files_that_do_not_load_name_the_key_and_line(tmp_path, pki, case, key_path, line, words):
    srv, other = pki["server"], pki["other"]
    text = {"swapped": _tls_yaml(srv.key_file, srv.cert_file),
            "mismatch": _tls_yaml(srv.cert_file, other.key_file),
            "sni": _tls_yaml(srv.cert_file, srv.key_file, other.cert_file, other.cert_file)}[case]
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(text)
    for args in (("check-config", str(cfg)), ("run", "--config", str(cfg), "--metrics", "127.0.0.1:0")):
        r = run_cli(*args)
        assert r.returncode == 2, r.stderr
        assert f"{cfg}:{line}: {key_path}: {words}" in r.stderr
        assert "Traceback" not in r.stderr


@pytest.mark.process  # runs the CLI as a process
def test_run_with_listen_override_names_the_template_listener_line(tmp_path, pki):
    srv = pki["server"]
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(_tls_yaml(srv.key_file, srv.cert_file))
    r = run_cli("run", "--config", str(cfg), "--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0",
                "--metrics", "127.0.0.1:0")
    assert r.returncode == 2
    assert f"{cfg}:6: listeners[0].tls_cert_file: cannot load certificate" in r.stderr


@pytest.mark.parametrize("error", ["memory", "openssl"])
def test_unexpected_errors_building_tls_are_config_errors_not_tracebacks(tmp_path, pki, monkeypatch,
                                                                          capsys, error):
    from OpenSSL import SSL

    import gateway.service
    from gateway import cli

    def broken(listener):
        if error == "memory":
            raise MemoryError("no memory for the context")
        raise SSL.Error([("SSL routines", "", "internal error")])

    monkeypatch.setattr(gateway.service, "tls_server_for", broken)
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(_tls_yaml(pki["server"].cert_file, pki["server"].key_file))
    assert cli.check_config(str(cfg)) == 2
    err = capsys.readouterr().err
    assert f"{cfg}:5: listeners[0].tls: cannot build the TLS context: " in err
    assert ("MemoryError" if error == "memory" else "Error") in err


def _dir_yaml(key: str, value: str) -> str:
    if key == "state_dir":
        return f"# state\nstate_dir: {value}\nledger:\n  enabled: true\n"
    return f"# ledger\nledger:\n  enabled: true\n  directory: {value}\n"


@pytest.mark.process  # runs the CLI as a process
@pytest.mark.parametrize("key,line", [("state_dir", 2), ("ledger.directory", 4)])
@pytest.mark.parametrize("shape", ["under-a-file", "is-a-file", "not-writable"])
def test_unusable_directories_are_config_errors(tmp_path, key, line, shape):
    blocker = tmp_path / "blocker"
    blocker.write_text("a regular file")
    if shape == "under-a-file":
        target, words = blocker / "state", "is not a directory"
    elif shape == "is-a-file":
        target, words = blocker, "exists and is not a directory"
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        if os.access(locked, os.W_OK):
            pytest.skip("running as root: every directory is writable")
        target, words = locked / "state", "is not writable"
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(_dir_yaml(key, str(target)))
    for args in (("check-config", str(cfg)),
                 ("run", "--config", str(cfg), "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0")):
        r = run_cli(*args)
        assert r.returncode == 2, r.stderr
        assert f"{cfg}:{line}: {key}: " in r.stderr and words in r.stderr
        assert "Traceback" not in r.stderr


@pytest.mark.process  # runs the CLI as a process
def test_usable_directories_pass_check_config_and_are_not_created(tmp_path):
    target = tmp_path / "new" / "state"
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(_dir_yaml("state_dir", str(target)))
    r = run_cli("check-config", str(cfg))
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "new").exists()


def test_container_id_must_not_contain_at():
    err = error_of("container_id: gw@example\n")
    assert err.key_path == "container_id" and "must not contain '@'" in err.message


def test_directory_problem_reports_a_directory_it_cannot_write(tmp_path, monkeypatch):
    """The not-writable branch, also when the tests run as root (who may write anywhere)."""
    import gateway.config.checks as checks_module
    from gateway.config import directory_problem

    (tmp_path / "exists").mkdir()
    assert directory_problem(str(tmp_path / "exists")) is None
    assert directory_problem(str(tmp_path / "new" / "deeper")) is None
    denied = {str(tmp_path / "exists"), str(tmp_path)}
    real_access = os.access
    monkeypatch.setattr(checks_module.os, "access",
                        lambda p, mode: False if str(p) in denied else real_access(p, mode))
    assert "directory" in directory_problem(str(tmp_path / "exists"))
    assert "is not writable" in directory_problem(str(tmp_path / "exists"))
    problem = directory_problem(str(tmp_path / "new" / "deeper"))
    assert problem and "cannot create directory" in problem and "is not writable" in problem


@pytest.mark.parametrize("value", ["accept", "release", "reject"])
def test_amqp10_unroutable_takes_each_outcome(value):
    assert load_config_text(f"amqp10:\n  unroutable: {value}\n").amqp10.unroutable.value == value


def test_amqp10_unroutable_defaults_to_accept():
    assert GatewayConfig().amqp10.unroutable is UnroutablePolicy.ACCEPT
    assert load_config(EXAMPLE).amqp10.unroutable is UnroutablePolicy.ACCEPT


@pytest.mark.parametrize("forwarding, path, words", [
    ("  remotes:\n    - container: org-b\n      host: h\n      kind: smtp\n",
     "forwarding.remotes[0].kind", "not one of: gateway, amqp10, amqp091"),
    ("  remotes:\n    - container: org-b\n      host: h\n      kind: amqp10\n",
     "forwarding.remotes[0].address", "needs an address template with {node}: "
     "\"/amq/queue/{node}\" (rabbitmq-3), \"/queues/{node}\" (rabbitmq-4)"),
    ("  remotes:\n    - {container: org-b, host: h, kind: amqp10, broker: rabbitmq-4}\n",
     "forwarding.remotes[0].address", "needs an address template with {node}: "
     "\"/queues/{node}\" for rabbitmq-4"),
    ("  remotes:\n    - {container: org-b, host: h, kind: amqp10, broker: rabbitmq-3,"
     " address: '/queues/{node}'}\n", "forwarding.remotes[0].address",
     "rabbitmq-3 does not know the address '/queues/{node}' (it refuses the attach); "
     "use \"/amq/queue/{node}\" for rabbitmq-3"),
    ("  remotes:\n    - {container: org-b, host: h, kind: amqp091, broker: artemis,"
     " address: '/queue/{node}'}\n", "forwarding.remotes[0].kind",
     "artemis is not reached with kind amqp091; use kind amqp10"),
    ("  remotes:\n    - {container: org-b, host: h, broker: qpidd}\n",
     "forwarding.remotes[0].broker", "'qpidd' is not one of: rabbitmq-3, rabbitmq-4, activemq,"
     " artemis, amqp-gateway"),
    ("  remotes:\n    - container: org-b\n      host: h\n      password_file: /nonexistent/pw\n",
     "forwarding.remotes[0].password_file", "/nonexistent/pw"),
    ("  remotes:\n    - container: org-b\n      host: h\n  default_remote: org-z\n",
     "forwarding.default_remote", "'org-z' is not the container of a remote"),
    ("  remotes:\n    - {container: org-b, host: h}\n    - {container: org-b, host: i}\n",
     "forwarding.remotes[1].container", "listed twice"),
    ("  shovels:\n    - {name: s, queue: q, remote: org-q, node: n}\n",
     "forwarding.shovels[0].remote", "'org-q' is not the container of a remote"),
    ("  remotes:\n    - {container: org-b, host: h, kind: amqp091, address: '/queue/{node}',"
     " sasl_mechanism: SCRAM-SHA-256}\n", "forwarding.remotes[0].sasl_mechanism",
     "'SCRAM-SHA-256' is not one of: PLAIN, AMQPLAIN, EXTERNAL (for kind amqp091)"),
    ("  remotes:\n    - {container: org-b, host: h, sasl_mechanism: AMQPLAIN}\n",
     "forwarding.remotes[0].sasl_mechanism",
     "'AMQPLAIN' is not one of: PLAIN, SCRAM-SHA-256, EXTERNAL, ANONYMOUS (for kind gateway)"),
])
def test_forwarding_errors_name_the_key(forwarding, path, words):
    with pytest.raises(ConfigError) as info:
        load_config_text("forwarding:\n" + forwarding)
    assert info.value.key_path == path and words in info.value.message


def test_forwarding_remote_settings_and_shovels_parse():
    cfg = load_config_text(
        "container_id: org-a\nforwarding:\n  remotes:\n"
        "    - {container: org-b, host: gw.b, port: 5671, kind: amqp091, address: \"/queue/{node}\","
        " tls: on, sasl_mechanism: AMQPLAIN, credit: 10}\n"
        "  default_remote: org-b\n  dedupe_window: 30\n"
        "  shovels:\n    - {name: out, queue: outbound.orders, remote: org-b, node: orders}\n")
    remote = cfg.forwarding.remotes[0]
    assert (remote.container, remote.port, remote.kind, remote.tls, remote.credit) == (
        "org-b", 5671, "amqp091", True, 10)
    assert cfg.forwarding.remote("org-b") is remote and cfg.forwarding.dedupe_window == 30.0
    assert cfg.forwarding.shovels[0].queue == "outbound.orders"


def test_a_remote_with_our_own_container_id_is_refused():
    with pytest.raises(ConfigError, match="this gateway's own container_id"):
        load_config_text("container_id: org-a\nforwarding:\n  remotes:\n"
                         "    - {container: org-a, host: h}\n")


def test_rabbitmq_version_is_off_by_default_and_checked():
    assert GatewayConfig().rabbitmq_version == ""
    cfg = load_config(EXAMPLE)
    assert cfg.rabbitmq_version == "" and cfg.warnings == ()
    cfg = load_config_text('rabbitmq_version: "4.1.0"\n')
    assert cfg.rabbitmq_version == "4.1.0" and cfg.warnings == ()
    with pytest.raises(ConfigError, match="rabbitmq_version.*not a version"):
        load_config_text('rabbitmq_version: "four"\n')


def test_amqp10_rabbitmq_version_is_a_deprecated_alias_with_a_warning():
    cfg = load_config_text('amqp10:\n  rabbitmq_version: "4.1.0"\n', source="gw.yaml")
    assert cfg.rabbitmq_version == "4.1.0"
    assert cfg.warnings == ("gw.yaml:2: amqp10.rabbitmq_version is deprecated: use the top-level "
                            "rabbitmq_version (it applies to AMQP 0-9-1's server-properties too)",)
    same = load_config_text('rabbitmq_version: "4.1.0"\namqp10:\n  rabbitmq_version: "4.1.0"\n')
    assert same.rabbitmq_version == "4.1.0" and len(same.warnings) == 1
    with pytest.raises(ConfigError, match="amqp10.rabbitmq_version.*not a version"):
        load_config_text('amqp10:\n  rabbitmq_version: "four"\n')
    with pytest.raises(ConfigError) as both:
        load_config_text('rabbitmq_version: "4.1.0"\namqp10:\n  rabbitmq_version: "4.0.0"\n',
                         source="gw.yaml")
    assert str(both.value) == ("gw.yaml:3: amqp10.rabbitmq_version: the deprecated name of "
                               "rabbitmq_version, which says '4.1.0' (line 1): keep only "
                               "rabbitmq_version")


def test_the_loaders_fields_are_not_keys():
    for key in ("source", "warnings"):
        with pytest.raises(ConfigError, match=f"unknown key '{key}'"):
            load_config_text(f"{key}: x\n")


def test_management_alerts():
    assert GatewayConfig().management.alerts.queue_depth == 0
    cfg = load_config_text("management:\n  alerts:\n    queue_depth: 1000\n    queue_age: 30\n"
                           "    queues:\n      - pattern: '^orders\\.'\n        queue_depth: 10\n")
    alerts = cfg.management.alerts
    assert (alerts.queue_depth, alerts.queue_age) == (1000, 30.0)
    assert (alerts.queues[0].pattern, alerts.queues[0].queue_depth, alerts.queues[0].queue_age) == (
        r"^orders\.", 10, None)
    with pytest.raises(ConfigError, match="management.alerts.queue_depth"):
        load_config_text("management:\n  alerts:\n    queue_depth: -1\n")
    with pytest.raises(ConfigError, match="pattern"):
        load_config_text("management:\n  alerts:\n    queues:\n      - pattern: '('\n")


def test_logging_summary_interval_defaults_to_ten_seconds():
    assert GatewayConfig().logging.summary_interval == 10.0
    assert load_config_text("logging:\n  summary_interval: 0.5\n").logging.summary_interval == 0.5


def test_logging_format_is_text_or_json():
    assert GatewayConfig().logging.format == "text"
    assert load_config_text("logging:\n  format: json\n").logging.format == "json"
    with pytest.raises(ConfigError, match="logging.format.*'xml' is not one of text, json"):
        load_config_text("logging:\n  format: xml\n")
