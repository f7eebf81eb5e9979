"""The AMQP 1.0 SASL layer (spec part 5.3), ours, in front of proton's engine.

Theory of operation
-------------------
The sniffer has already read the client's ``AMQP 3 1 0 0`` header. On construction the
server queues its own ``AMQP 3 1 0 0`` header and a ``sasl-mechanisms`` frame listing
what ``Authenticator.mechanisms(protocol="amqp10", ...)`` offers. Then::

    AWAIT_INIT --sasl-init--> (step) --Challenge--> AWAIT_RESPONSE --sasl-response--> (step) ...
                                  \\--Authenticated--> sasl-outcome ok   --> AWAIT_AMQP_HEADER
                                  \\--AuthenticationFailed--> sasl-outcome auth --> FAILED
    AWAIT_AMQP_HEADER --any bytes--> DONE (every byte from the client's ``AMQP 0 1 0 0``
                                          header on is kept in ``leftover`` for proton)

Nothing is decoded after the outcome: the bytes that follow (the client may pipeline
its ``AMQP 0 1 0 0`` header and ``open`` right behind the ``sasl-init``) are handed to
proton untouched, which checks the header itself. Malformed input (bad frame header,
oversized frame, a frame that is not SASL, an undecodable or unexpected performative)
ends in FAILED with ``failure`` set: there is no AMQP connection yet to carry a close,
so the engine just drops the socket after writing what is queued.

A login refused by the login throttle's gate (``LoginThrottled``: too many failed
logins in the user's name, the password was not checked) gets the outcome ``sys-temp``
(a temporary condition: try again later) instead of ``auth``; ``refusal`` keeps the
exception and ``claimed_user`` the name the peer gave, for the engine's throttle and log.
Refused logins are logged by the engine (once each); this layer logs malformed input.

SASL frames are AMQP frames of type 0x01 on channel 0 (ignored); their bodies are
described lists with descriptors 0x40 (mechanisms) .. 0x44 (outcome), encoded and
decoded with ``proton.Data``. Frames larger than ``max_frame_size`` (64 KiB by default;
the spec's 512 octets is too small for some SCRAM exchanges) are refused.
"""
from __future__ import annotations

import enum
import logging
import struct
from dataclasses import dataclass, field

from proton import UNDESCRIBED, Array, Data, Described, symbol, ubyte, ulong

from gateway.amqp10.conditions import SaslCode
from gateway.auth import (
    Authenticated,
    AuthenticationFailed,
    Authenticator,
    Challenge,
    LoginThrottled,
    User,
)
from gateway.auth.mechanisms import Gate

__all__ = [
    "SASL_HEADER",
    "AMQP_HEADER",
    "SASL_MAX_FRAME_SIZE",
    "SaslState",
    "SaslResult",
    "SaslServer",
    "encode_sasl_frame",
    "decode_sasl_frames",
    "SaslFrameError",
]

log = logging.getLogger(__name__)

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
#: default upper bound for one SASL frame (bytes)
SASL_MAX_FRAME_SIZE = 65536
_FRAME_TYPE_SASL = 0x01
_FRAME_HEADER = struct.Struct(">IBBH")

# performative descriptors (spec 5.3.3)
SASL_MECHANISMS = 0x40
SASL_INIT = 0x41
SASL_CHALLENGE = 0x42
SASL_RESPONSE = 0x43
SASL_OUTCOME = 0x44


class SaslFrameError(Exception):
    """Malformed SASL input; ``text`` says what was wrong."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class SaslState(enum.Enum):
    AWAIT_INIT = "await-init"
    AWAIT_RESPONSE = "await-response"
    AWAIT_AMQP_HEADER = "await-amqp-header"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class SaslResult:
    """A successful login: the user, the mechanism and the sasl-init ``hostname`` (and the
    password, kept only for edge mode's passthrough: ``Authenticated.password``)."""

    user: User
    mechanism: str
    hostname: str | None
    password: str | None = field(default=None, repr=False)


def encode_sasl_frame(descriptor: int, fields: list) -> bytes:
    """One SASL frame (type 0x01, channel 0) holding the described list ``fields``.

    ``fields`` are Python/proton values (``None`` is encoded as null); trailing nulls
    are kept, which the spec allows.
    """
    data = Data()
    data.put_object(Described(ulong(descriptor), fields))
    body = data.encode()
    return _FRAME_HEADER.pack(8 + len(body), 2, _FRAME_TYPE_SASL, 0) + body


def decode_sasl_frames(buffer: bytearray, max_frame_size: int,
                       max_frames: int | None = None) -> list[tuple[int, list]]:
    """Remove whole frames (at most ``max_frames``) from ``buffer``; return
    ``(descriptor, fields)`` for each.

    Empty frames (no body, as heartbeats) are consumed and skipped. An incomplete frame
    stays in ``buffer`` (so an empty list means "need more bytes"). Raises
    :class:`SaslFrameError` on a bad size, data offset or frame type, or an undecodable
    body.
    """
    frames: list[tuple[int, list]] = []
    while len(buffer) >= 8 and (max_frames is None or len(frames) < max_frames):
        size, doff, ftype, _channel = _FRAME_HEADER.unpack_from(buffer)
        if size < 8 or doff < 2 or doff * 4 > size:
            raise SaslFrameError(f"malformed frame header (size {size}, doff {doff})")
        if size > max_frame_size:
            raise SaslFrameError(f"SASL frame of {size} bytes exceeds {max_frame_size}")
        if ftype != _FRAME_TYPE_SASL:
            raise SaslFrameError(f"frame type {ftype} during SASL negotiation")
        if len(buffer) < size:
            break
        body = bytes(buffer[doff * 4:size])
        del buffer[:size]
        if body:
            frames.append(_decode_performative(body))
    return frames


def _decode_performative(body: bytes) -> tuple[int, list]:
    data = Data()
    try:
        used = data.decode(body)
        value = data.get_object()
    except Exception as exc:  # proton raises DataException and, on odd input, others
        raise SaslFrameError(f"undecodable SASL frame body: {exc}") from None
    if used != len(body):
        raise SaslFrameError("trailing bytes after the SASL performative")
    if not isinstance(value, Described) or not isinstance(value.value, list):
        raise SaslFrameError("SASL frame body is not a described list")
    descriptor = value.descriptor
    if not isinstance(descriptor, int):
        raise SaslFrameError(f"unsupported descriptor {descriptor!r}")
    # proton hands binaries out as memoryviews into the Data's own buffer, which dies
    # with ``data``: copy them now
    fields = [bytes(f) if isinstance(f, memoryview) else f for f in value.value]
    return int(descriptor), fields


def _field(fields: list, index: int) -> object:
    return fields[index] if index < len(fields) else None


class SaslServer:
    """Server side of the SASL negotiation; sans-I/O.

    Feed client bytes to :meth:`receive_data` and send :meth:`data_to_send`. When
    ``state`` is DONE, ``result`` holds the login and ``leftover`` the bytes for proton
    (starting with the client's AMQP header). When FAILED, ``failure`` holds the reason
    (the ``auth`` outcome has been queued if it was a login failure); the caller closes
    after writing the output. Never raises out of :meth:`receive_data`.
    """

    def __init__(
        self,
        authenticator: Authenticator,
        *,
        peer_host: str,
        allow_anonymous: bool,
        tls_peer_subject: str | None = None,
        max_frame_size: int = SASL_MAX_FRAME_SIZE,
        gate: Gate | None = None,
    ) -> None:
        self._auth = authenticator
        self._gate = gate
        self._peer_host = peer_host
        self._allow_anonymous = allow_anonymous
        self._tls_peer_subject = tls_peer_subject
        self._max_frame_size = max_frame_size
        self._in = bytearray()
        self._out = bytearray(SASL_HEADER)
        self.mechanisms = authenticator.mechanisms(
            protocol="amqp10", allow_anonymous=allow_anonymous, tls_peer_subject=tls_peer_subject
        )
        self._out += encode_sasl_frame(
            SASL_MECHANISMS, [Array(UNDESCRIBED, Data.SYMBOL, *(symbol(m) for m in self.mechanisms))]
        )
        self.state = SaslState.AWAIT_INIT
        self.result: SaslResult | None = None
        self.failure: str | None = None
        #: a refused login's exception (an outcome is queued; ``LoginThrottled`` when it was
        #: refused unchecked), as opposed to malformed input (None): only refused logins
        #: count for login throttling
        self.refusal: AuthenticationFailed | None = None
        self.leftover = b""
        self._exchange = None
        self._mechanism = ""
        self._hostname: str | None = None

    def data_to_send(self) -> bytes:
        """Bytes queued for the peer since the last call (may be empty)."""
        out = bytes(self._out)
        self._out.clear()
        return out

    def receive_data(self, data: bytes) -> None:
        """Consume client bytes; see the class docstring for the outcome."""
        if self.state in (SaslState.DONE, SaslState.FAILED):
            if self.state is SaslState.DONE:
                self.leftover += data
            return
        self._in += data
        try:
            self._process()
        except SaslFrameError as exc:
            self._fail(exc.text)

    def _process(self) -> None:
        # one frame at a time: what follows the frame that ends the negotiation is
        # the client's pipelined AMQP header, not a SASL frame
        while self.state in (SaslState.AWAIT_INIT, SaslState.AWAIT_RESPONSE):
            frames = decode_sasl_frames(self._in, self._max_frame_size, 1) if self._in else []
            if not frames:
                return
            descriptor, fields = frames[0]
            if self.state is SaslState.AWAIT_INIT and descriptor == SASL_INIT:
                self._on_init(fields)
            elif self.state is SaslState.AWAIT_RESPONSE and descriptor == SASL_RESPONSE:
                self._step(_field(fields, 0))
            else:
                raise SaslFrameError(
                    f"unexpected SASL performative 0x{descriptor:x} in state {self.state.value}"
                )
        if self.state is SaslState.AWAIT_AMQP_HEADER and self._in:
            self.leftover = bytes(self._in)
            self._in.clear()
            self.state = SaslState.DONE

    def _on_init(self, fields: list) -> None:
        mechanism = _field(fields, 0)
        hostname = _field(fields, 2)
        if not isinstance(mechanism, str):
            raise SaslFrameError("sasl-init without a mechanism")
        self._mechanism = str(mechanism)
        self._hostname = str(hostname) if isinstance(hostname, str) else None
        try:
            self._exchange = self._auth.start(
                self._mechanism,
                peer_host=self._peer_host,
                protocol="amqp10",
                allow_anonymous=self._allow_anonymous,
                tls_peer_subject=self._tls_peer_subject,
                gate=self._gate,
            )
        except AuthenticationFailed as exc:
            self._refuse(exc)
            return
        self._step(_field(fields, 1))

    @property
    def mechanism_name(self) -> str:
        """The mechanism the peer chose (cut to 40 characters; empty before sasl-init)."""
        return self._mechanism[:40]

    @property
    def claimed_user(self) -> str | None:
        """The user name the peer claimed (None before the mechanism parsed one)."""
        return self._exchange.claimed_user if self._exchange is not None else None

    def _step(self, response: object) -> None:
        if response is not None and not isinstance(response, (bytes, bytearray, memoryview)):
            raise SaslFrameError("SASL response is not binary")
        assert self._exchange is not None
        try:
            reply = self._exchange.step(bytes(response) if response is not None else b"")
        except AuthenticationFailed as exc:
            self._refuse(exc)
            return
        if isinstance(reply, Challenge):
            self._out += encode_sasl_frame(SASL_CHALLENGE, [reply.data])
            self.state = SaslState.AWAIT_RESPONSE
            return
        assert isinstance(reply, Authenticated)
        fields: list = [ubyte(SaslCode.OK)]
        if reply.additional_data is not None:
            fields.append(reply.additional_data)
        self._out += encode_sasl_frame(SASL_OUTCOME, fields)
        self.result = SaslResult(reply.user, self._mechanism, self._hostname, reply.password)
        self.state = SaslState.AWAIT_AMQP_HEADER
        log.debug("SASL %s login of %r from %s", self._mechanism, reply.user.name, self._peer_host)

    def _refuse(self, exc: AuthenticationFailed) -> None:
        """A refused login: the outcome (``sys-temp`` when throttled, else ``auth``)."""
        code = SaslCode.SYS_TEMP if isinstance(exc, LoginThrottled) else SaslCode.AUTH
        self._out += encode_sasl_frame(SASL_OUTCOME, [ubyte(code)])
        self.refusal = exc
        self._end(exc.reason)

    def _fail(self, reason: str) -> None:
        """Malformed input: no outcome (there is no AMQP connection to close either)."""
        log.info("SASL negotiation with %s failed: %s", self._peer_host, reason)
        self._end(reason)

    def _end(self, reason: str) -> None:
        self.failure = reason
        self.state = SaslState.FAILED
        self._in.clear()
