"""SIGHUP reloads the users from the config file; connections already open stay up, and
a users section that does not load keeps the previous users (and the log says why)."""
from __future__ import annotations

import re
import signal

import pika
import pika.exceptions
import pytest
from proton import ConnectionException
from proton.utils import BlockingConnection

from tests.support.amqp091_clients import pika_params
from tests.support.gateway_process import default_config

pytestmark = pytest.mark.integration

TIMEOUT = 10
RELOADED = r"users reloaded: (\d+) user\(s\)"
KEPT = r"users not reloaded, keeping the previous ones: "


def _login_091(gw, user: str, password: str) -> None:
    pika.BlockingConnection(pika_params(gw, user=user, password=password)).close()


def _refused_091(gw, user: str, password: str) -> None:
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        _login_091(gw, user, password)


def _login_10(gw, user: str, password: str) -> None:
    BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user=user, password=password,
                       allowed_mechs="PLAIN", sasl_enabled=True, allow_insecure_mechs=True,
                       virtual_host="vhost:/", timeout=TIMEOUT).close()


def _sighup(gw, pattern: str) -> str:
    """Send SIGHUP and wait for the next log line matching ``pattern``; return it."""
    seen = gw.count_log(pattern)
    gw.signal(signal.SIGHUP)
    assert gw.wait_for_log_count(pattern, seen + 1), gw.log
    return [line for line in gw.log_lines if re.search(pattern, line)][-1]


def _rewrite(gw, text: str) -> None:
    with open(gw.config_path, "w", encoding="utf-8") as f:
        f.write(text)


@pytest.mark.process
def test_sighup_reloads_users_and_keeps_them_when_the_new_ones_are_broken(fresh_gateway):
    gw = fresh_gateway(process=True, config_text=default_config(
        users={"guest": ("guest", True), "alice": ("secret", False)}))
    _login_091(gw, "alice", "secret")
    _refused_091(gw, "bob", "bob-pw")
    established = pika.BlockingConnection(pika_params(gw, user="alice", password="secret"))
    channel = established.channel()

    changed = default_config(users={"guest": ("guest", True), "alice": ("new-secret", False),
                                    "bob": ("bob-pw", False)})
    _rewrite(gw, changed)
    assert _sighup(gw, RELOADED).rstrip().endswith("users reloaded: 3 user(s)")
    _login_091(gw, "bob", "bob-pw")                     # the new user
    _login_10(gw, "bob", "bob-pw")
    _refused_091(gw, "alice", "secret")                 # the old password
    _login_091(gw, "alice", "new-secret")
    # the connection opened with the old password is still up and served
    q = channel.queue_declare("", exclusive=True).method.queue
    channel.basic_publish("", q, b"still here")
    method, _, body = channel.basic_get(q, auto_ack=True)
    assert body == b"still here"

    # broken YAML: the users of the last good load stay, and the log says why
    _rewrite(gw, changed.replace("users:\n", "users: [\n", 1))
    line = _sighup(gw, KEPT)
    assert "not valid YAML" in line and gw.config_path in line
    _login_091(gw, "bob", "bob-pw")
    _refused_091(gw, "alice", "secret")

    # a hash that is no hash: same
    _rewrite(gw, changed.replace(changed.split('password_hash: "')[3].split('"')[0], "nope"))
    line = _sighup(gw, KEPT)
    assert "users[2].password_hash" in line and "not a password hash" in line
    _login_091(gw, "bob", "bob-pw")
    _login_091(gw, "alice", "new-secret")
    with pytest.raises(ConnectionException):
        _login_10(gw, "alice", "secret")

    assert established.is_open
    channel.basic_publish("", q, b"after the broken reloads")
    assert channel.basic_get(q, auto_ack=True)[2] == b"after the broken reloads"
    established.close()


@pytest.mark.process
def test_update_secret_after_a_reload_takes_the_new_password_and_permissions(fresh_gateway):
    """A rotated password reaches an open connection through connection.update-secret:
    the old one is refused (403), the new one is taken, and the connection's permissions
    are the reloaded record's from then on (until then, the record it logged in with)."""
    gw = fresh_gateway(process=True, config_text=default_config(users={"alice": ("old-pw", False)}))  # SIGHUP
    established = pika.BlockingConnection(pika_params(gw, user="alice", password="old-pw"))
    stale = pika.BlockingConnection(pika_params(gw, user="alice", password="old-pw"))
    channel = established.channel()
    channel.confirm_delivery()
    channel.basic_publish("amq.fanout", "", b"allowed")

    rotated = default_config(users={"alice": ("new-pw", False)})
    everything = '/: {configure: ".*", write: ".*", read: ".*"}'
    assert rotated.count(everything) == 1
    _rewrite(gw, rotated.replace(everything, '/: {configure: ".*", write: "^amq\\\\.fanout$", read: ".*"}'))
    _sighup(gw, RELOADED)
    channel.basic_publish("amq.direct", "", b"still the old record")

    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as closed:
        stale.update_secret("old-pw", "rotation")
    assert closed.value.reply_code == 403 and "user 'alice'" in closed.value.reply_text

    established.update_secret("new-pw", "rotation")
    channel.basic_publish("amq.fanout", "", b"allowed")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
        channel.basic_publish("amq.direct", "", b"refused now")        # allowed (and cached) before
    assert refused.value.reply_code == 403
    assert "write access to resource 'amq.direct' in vhost '/' refused for user 'alice'" in refused.value.reply_text
    established.close()
