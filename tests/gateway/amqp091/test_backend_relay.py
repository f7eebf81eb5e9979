"""``backend_failure``: what a backend connection that ended before it opened means."""
from __future__ import annotations

from gateway.amqp091.backend_relay import backend_failure
from gateway.amqp091.client_events import ConnectionLost
from gateway.backend.contract import FailureKind


def test_a_refused_login_or_vhost_is_final_and_anything_else_tries_the_next_node() -> None:
    login = ConnectionLost("close 403", (), 403, "ACCESS_REFUSED - Login was refused", 10, 11, True)
    vhost = ConnectionLost("close 530", (), 530, "NOT_ALLOWED - vhost x not found", 10, 40, True)
    booting = ConnectionLost("close 320", (), 320, "CONNECTION_FORCED - shutdown", 0, 0, True)
    socket = ConnectionLost("connection refused", ())
    assert backend_failure("rabbit", login).kind is FailureKind.LOGIN_REFUSED
    assert backend_failure("rabbit", login).text == "backend rabbit: ACCESS_REFUSED - Login was refused"
    assert backend_failure("rabbit", vhost).kind is FailureKind.ACCESS_REFUSED
    assert backend_failure("rabbit", booting).kind is FailureKind.UNREACHABLE
    assert backend_failure("rabbit", socket).kind is FailureKind.UNREACHABLE
