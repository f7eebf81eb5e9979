"""Typed exceptions carry the wire code, text and failing ids."""
from __future__ import annotations

import pytest

from gateway.amqp091.errors import ChannelException, ConnectionException
from gateway.amqp091.spec import ReplyCode


def test_connection_exception_fields() -> None:
    exc = ConnectionException(501, "bad frame", 60, 40, send_close=False)
    assert exc.code is ReplyCode.FRAME_ERROR
    assert (exc.text, exc.class_id, exc.method_id, exc.send_close) == ("bad frame", 60, 40, False)
    assert exc.reply_text == "FRAME_ERROR - bad frame"


def test_channel_exception_reply_text_fits_a_shortstr() -> None:
    exc = ChannelException(ReplyCode.NOT_FOUND, "é" * 300)
    assert len(exc.reply_text.encode("utf-8")) <= 255
    assert exc.reply_text.startswith("NOT_FOUND - ")


def test_unknown_codes_are_refused() -> None:
    with pytest.raises(ValueError):
        ChannelException(999, "x")
