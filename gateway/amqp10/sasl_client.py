"""The client side of 1.0 SASL for SCRAM-SHA-256 (sans-I/O), in front of proton's engine.

Why ours: proton's bundled SASL client offers PLAIN, ANONYMOUS and EXTERNAL only (SCRAM
needs Cyrus SASL, which the wheel does not link). A forwarder configured with
``sasl_mechanism: SCRAM-SHA-256`` therefore negotiates SASL here, with ``scramp``'s client
(the library the server side uses too), and hands proton, which then runs without a SASL
layer, every byte from the server's ``AMQP 0 1 0 0`` header on. The frames are the ones
the server side encodes and decodes (``gateway.amqp10.sasl``).

    AWAIT_HEADER --"AMQP 3 1 0 0"--> AWAIT_MECHANISMS --sasl-mechanisms--> (sasl-init)
    AWAIT_CHALLENGE --sasl-challenge--> (sasl-response) AWAIT_OUTCOME
    AWAIT_OUTCOME --sasl-outcome ok + a server signature that verifies--> DONE
    anything else --> FAILED (``failure`` says why; the caller drops the connection)

The server's signature is checked: a remote that does not know the password's keys cannot
pass itself off as the partner (SCRAM's mutual authentication, which PLAIN lacks).
"""
from __future__ import annotations

import enum
import logging

import scramp
from proton import Array, symbol

from gateway.amqp10.conditions import SaslCode
from gateway.amqp10.sasl import (AMQP_HEADER, SASL_CHALLENGE, SASL_HEADER, SASL_INIT,
                                 SASL_MAX_FRAME_SIZE, SASL_MECHANISMS, SASL_OUTCOME,
                                 SASL_RESPONSE, SaslFrameError, decode_sasl_frames,
                                 encode_sasl_frame)

__all__ = ["SCRAM_SHA_256", "ScramSaslClient", "ScramClientState"]

log = logging.getLogger(__name__)

SCRAM_SHA_256 = "SCRAM-SHA-256"


class ScramClientState(enum.Enum):
    AWAIT_HEADER = "await-header"
    AWAIT_MECHANISMS = "await-mechanisms"
    AWAIT_CHALLENGE = "await-challenge"
    AWAIT_OUTCOME = "await-outcome"
    DONE = "done"
    FAILED = "failed"


def _text(value: object) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8")
    raise SaslFrameError(f"expected binary SCRAM data, got {type(value).__name__}")


class ScramSaslClient:
    """Feed the server's bytes to :meth:`receive_data`, send :meth:`data_to_send`. When
    ``state`` is DONE, ``leftover`` holds the bytes for proton (from the server's AMQP
    header on); when FAILED, ``failure`` says why. Never raises out of
    :meth:`receive_data`. ``hostname`` goes in sasl-init (as proton's client puts its
    connection hostname there)."""

    def __init__(self, user: str, password: str, hostname: str | None = None, *,
                 max_frame_size: int = SASL_MAX_FRAME_SIZE) -> None:
        self._scram = scramp.ScramClient([SCRAM_SHA_256], user, password)
        self._hostname = hostname
        self._max_frame_size = max_frame_size
        self._in = bytearray()
        self._out = bytearray(SASL_HEADER)
        self.state = ScramClientState.AWAIT_HEADER
        self.failure: str | None = None
        self.leftover = b""

    def data_to_send(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out

    def receive_data(self, data: bytes) -> None:
        if self.state in (ScramClientState.DONE, ScramClientState.FAILED):
            if self.state is ScramClientState.DONE:
                self.leftover += data
            return
        self._in += data
        try:
            self._process()
        except SaslFrameError as exc:
            self._fail(f"malformed SASL from the remote: {exc.text}")
        except scramp.ScramException as exc:
            self._fail(f"SCRAM-SHA-256 exchange failed: {exc}")
        except UnicodeDecodeError:
            self._fail("SCRAM-SHA-256 exchange failed: the remote's message is not UTF-8")

    def _process(self) -> None:
        if self.state is ScramClientState.AWAIT_HEADER:
            if len(self._in) < 8:
                return
            header = bytes(self._in[:8])
            del self._in[:8]
            if header != SASL_HEADER:
                what = "AMQP without SASL" if header == AMQP_HEADER else repr(header)
                self._fail(f"the remote answered {what}, not SASL")
                return
            self.state = ScramClientState.AWAIT_MECHANISMS
        # one frame at a time: what follows the outcome is the server's AMQP header
        while self.state not in (ScramClientState.DONE, ScramClientState.FAILED):
            frames = decode_sasl_frames(self._in, self._max_frame_size, 1) if self._in else []
            if not frames:
                return
            self._on_frame(*frames[0])
        if self.state is ScramClientState.DONE:
            self.leftover = bytes(self._in)
            self._in.clear()

    def _on_frame(self, descriptor: int, fields: list) -> None:
        state = self.state
        if state is ScramClientState.AWAIT_MECHANISMS and descriptor == SASL_MECHANISMS:
            offered = fields[0] if fields else None
            if isinstance(offered, Array):  # an array of symbols, or one symbol alone
                offered = offered.elements
            names = [str(m) for m in offered] if isinstance(offered, (list, tuple)) \
                else ([str(offered)] if offered is not None else [])
            if SCRAM_SHA_256 not in names:
                self._fail(f"the remote does not offer {SCRAM_SHA_256} "
                           f"(it offers: {', '.join(names) or 'nothing'})")
                return
            first = self._scram.get_client_first().encode("utf-8")
            self._out += encode_sasl_frame(SASL_INIT, [symbol(SCRAM_SHA_256), first, self._hostname])
            self.state = ScramClientState.AWAIT_CHALLENGE
        elif state is ScramClientState.AWAIT_CHALLENGE and descriptor == SASL_CHALLENGE:
            self._scram.set_server_first(_text(fields[0] if fields else None))
            final = self._scram.get_client_final().encode("utf-8")
            self._out += encode_sasl_frame(SASL_RESPONSE, [final])
            self.state = ScramClientState.AWAIT_OUTCOME
        elif descriptor == SASL_OUTCOME and state in (ScramClientState.AWAIT_CHALLENGE,
                                                       ScramClientState.AWAIT_OUTCOME):
            self._on_outcome(fields)
        else:
            raise SaslFrameError(f"unexpected SASL performative 0x{descriptor:x} "
                                 f"in state {state.value}")

    def _on_outcome(self, fields: list) -> None:
        code = int(fields[0]) if fields and fields[0] is not None else None
        if code != SaslCode.OK:
            name = SaslCode(code).name.lower().replace("_", "-") \
                if code in SaslCode._value2member_map_ else str(code)
            self._fail(f"the remote refused the {SCRAM_SHA_256} login (sasl-outcome {name})")
            return
        if self.state is not ScramClientState.AWAIT_OUTCOME or len(fields) < 2 or fields[1] is None:
            self._fail("the remote accepted the login without proving it knows the password "
                       "(no SCRAM server signature)")
            return
        self._scram.set_server_final(_text(fields[1]))  # raises if the signature is wrong
        self.state = ScramClientState.DONE

    def _fail(self, reason: str) -> None:
        log.debug("SCRAM client: %s", reason)
        self.failure = reason
        self.state = ScramClientState.FAILED
        self._in.clear()
