"""``backend_login``: passthrough takes the client's PLAIN credentials, else the service account."""
from __future__ import annotations

import pytest

from gateway.backend.contract import BackendFailure, FailureKind, backend_login, lost_text
from gateway.backend.settings import BackendSettings


def test_passthrough_uses_the_clients_credentials() -> None:
    settings = BackendSettings("rabbit", nodes=("h",), vhost="prod", credentials="passthrough")
    login = backend_login(settings, "ann", "pw", service_password="", connection_name="c")
    assert (login.user, login.password, login.vhost) == ("ann", "pw", "prod")
    with pytest.raises(BackendFailure) as info:   # EXTERNAL or SCRAM: nothing to pass on
        backend_login(settings, "ann", None, service_password="", connection_name="c")
    assert info.value.kind is FailureKind.LOGIN_REFUSED and "log in with PLAIN" in info.value.text


def test_a_service_account_ignores_the_clients_credentials() -> None:
    settings = BackendSettings("rabbit", nodes=("h",), user="svc")
    login = backend_login(settings, "ann", "pw", service_password="s3", connection_name="c")
    assert (login.user, login.password, login.vhost) == ("svc", "s3", "/")
    assert lost_text("rabbit", "socket closed") == "backend rabbit lost: socket closed"


def test_anonymous_logs_in_with_no_user() -> None:
    settings = BackendSettings("mini", kind="amqp10", nodes=("h",), credentials="anonymous")
    login = backend_login(settings, "ann", "pw", service_password="", connection_name="c")
    assert (login.user, login.password, login.mechanism) == ("", "", "ANONYMOUS")
