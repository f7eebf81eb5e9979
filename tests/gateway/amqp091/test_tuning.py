"""Negotiation of channel-max, frame-max and heartbeat."""
from __future__ import annotations

import pytest

from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.spec import ReplyCode
from gateway.amqp091.tuning import CHANNEL_MAX_LIMIT, TuneParameters, negotiate

SERVER = TuneParameters(channel_max=2047, frame_max=131072, heartbeat=60)


def test_client_may_lower_every_limit() -> None:
    assert negotiate(SERVER, TuneParameters(10, 8192, 5)) == TuneParameters(10, 8192, 5)


def test_client_zero_accepts_the_server_limits() -> None:
    assert negotiate(SERVER, TuneParameters(0, 0, 0)) == TuneParameters(2047, 131072, 0)


def test_client_heartbeat_wins_when_server_proposes_one() -> None:
    assert negotiate(SERVER, TuneParameters(0, 0, 600)).heartbeat == 600


def test_server_heartbeat_zero_disables() -> None:
    server = TuneParameters(2047, 131072, 0)
    assert negotiate(server, TuneParameters(0, 0, 30)).heartbeat == 0


@pytest.mark.parametrize(("client", "needle"), [
    (TuneParameters(4096, 131072, 60), "channel_max=4096 > 2047"),
    (TuneParameters(0, 262144, 60), "frame_max=262144 > 131072"),
    (TuneParameters(0, 1024, 60), "frame_max=1024 < 4096"),
])
def test_raising_a_limit_is_530_without_close_method(client, needle) -> None:
    with pytest.raises(ConnectionException) as info:
        negotiate(SERVER, client)
    assert info.value.code is ReplyCode.NOT_ALLOWED
    assert needle in info.value.text
    assert info.value.send_close is False


def test_server_without_limits() -> None:
    server = TuneParameters(0, 0, 60)
    tune = negotiate(server, TuneParameters(0, 10**9, 60))
    assert tune.frame_max == 10**9
    assert tune.effective_channel_max == CHANNEL_MAX_LIMIT
