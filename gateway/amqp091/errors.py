"""Typed 0-9-1 errors: every exception carries the reply code and text that go on the wire.

``ConnectionException`` is a hard error (connection.close, or a bare socket close when
``send_close`` is False, e.g. after a bad frame-end octet); ``ChannelException`` is a soft
error that closes one channel. Names avoid shadowing the builtin ``ConnectionError``.
``DecodeError`` is raised by the primitive decoders, which do not know which method they are
decoding; the method and property decoders turn it into a ``ConnectionException``.
"""
from __future__ import annotations

from gateway.amqp091.spec import ReplyCode

__all__ = ["AmqpException", "ConnectionException", "ChannelException", "DecodeError"]


class AmqpException(Exception):
    """Base: ``code`` (ReplyCode), ``text`` (<= 255 octets on the wire), failing ids."""

    def __init__(self, code: ReplyCode | int, text: str, class_id: int = 0, method_id: int = 0) -> None:
        self.code = ReplyCode(code)
        self.text = text
        self.class_id = class_id
        self.method_id = method_id
        super().__init__(f"{self.code.value} {self.code.name} - {text}")

    @property
    def reply_text(self) -> str:
        """``"NOT_FOUND - no queue 'q'"`` cut to fit a shortstr, RabbitMQ style."""
        full = f"{self.code.name} - {self.text}"
        raw = full.encode("utf-8")
        if len(raw) <= 255:
            return full
        return raw[:255].decode("utf-8", "ignore")


class ConnectionException(AmqpException):
    """A hard error. ``send_close=False`` means close the socket without a close method
    (fatal framing errors, REQUIREMENTS 2.1 / 4.2)."""

    def __init__(
        self,
        code: ReplyCode | int,
        text: str,
        class_id: int = 0,
        method_id: int = 0,
        send_close: bool = True,
    ) -> None:
        super().__init__(code, text, class_id, method_id)
        self.send_close = send_close


class ChannelException(AmqpException):
    """A soft error: channel.close(code, text, class_id, method_id) on one channel."""

    def __init__(self, code: ReplyCode | int, text: str, class_id: int = 0, method_id: int = 0) -> None:
        super().__init__(code, text, class_id, method_id)


class DecodeError(ValueError):
    """Malformed or truncated input found by a primitive decoder; the text names the problem."""
