"""Which management API ``ctl`` asks (``gateway/ctl/target.py``)."""
from __future__ import annotations

import pytest

from gateway.ctl.client import DEFAULT_URL
from gateway.ctl.target import NoManagementListener, management_url


def _config(tmp_path, text: str) -> str:
    path = tmp_path / "gw.yaml"
    path.write_text(text)
    return str(path)


def test_url_then_config_then_the_environment_then_the_default(tmp_path):
    cfg = _config(tmp_path, "management: {enabled: true, host: 0.0.0.0, port: 15700}\n")
    other = _config(tmp_path / "..", "management: {enabled: true, port: 15800}\n")
    env = {"AMQP_GATEWAY_CONFIG": other}
    assert management_url("http://h:1", cfg, env) == "http://h:1"
    assert management_url(None, cfg, env) == "http://127.0.0.1:15700"   # wildcard: loopback
    assert management_url(None, None, env) == "http://127.0.0.1:15800"
    assert management_url(None, None, {}) == DEFAULT_URL


def test_a_config_without_a_management_listener_is_a_usage_error(tmp_path):
    cfg = _config(tmp_path, "listeners: [{port: 5673}]\n")
    with pytest.raises(NoManagementListener) as info:
        management_url(None, cfg, {})
    assert info.value.exit_status == 2
    assert "does not turn on the management listener (management.enabled)" in str(info.value)
    with pytest.raises(NoManagementListener) as info:
        management_url(None, None, {"AMQP_GATEWAY_CONFIG": cfg})
    assert "($AMQP_GATEWAY_CONFIG)" in str(info.value)


def test_an_unreadable_config_names_the_file(tmp_path):
    with pytest.raises(NoManagementListener) as info:
        management_url(None, str(tmp_path / "missing.yaml"), {})
    assert "missing.yaml" in str(info.value)
