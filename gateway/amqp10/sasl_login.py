"""``SaslLogin``: the SASL phase of one 1.0 connection, with the login throttle.

Our SASL layer (``sasl.SaslServer``) does the exchange. With a ``LoginThrottle`` (its module
holds the rules) each password check is gated first (the throttle's ``check_attempt``), a
login that succeeds is reported to it, and a refused login's ``sasl-outcome`` is held
back until the time ``refuse_login`` gives (late for a likely password guesser, never
after the handshake deadline): :meth:`SaslLogin.receive` returns what may be sent now, and
:meth:`SaslLogin.due` the held outcome once ``release_at`` has come. The engine drives the
timer; nothing here sleeps.
"""
from __future__ import annotations

from typing import Callable, Optional

from gateway.amqp10.sasl import SaslServer, SaslState
from gateway.auth import Authenticator, LoginThrottle, refuse_login

__all__ = ["SaslLogin"]


class SaslLogin:
    """See the module docstring. ``peer`` is ``host:port`` for logs."""

    __slots__ = ("server", "release_at", "_held", "_throttle", "_peer_host", "_peer", "_clock",
                 "_connection_id", "_told")

    def __init__(self, authenticator: Authenticator, *, peer_host: str, peer: str,
                 allow_anonymous: bool, tls_peer_subject: Optional[str],
                 throttle: Optional[LoginThrottle], connection_id: Optional[int] = None) -> None:
        self._throttle = throttle
        self._connection_id = connection_id
        self._peer_host = peer_host
        self._peer = peer
        #: the time of the current input, for the gate (a list the gate shares: a gate that
        #: were a method of this object would hold it in a cycle with the SASL layer)
        self._clock = [0.0]
        #: when the held answer to a refused login is due (seconds), else None
        self.release_at: Optional[float] = None
        self._held = b""
        #: the throttle was told of the success (at the outcome, not at the AMQP header:
        #: a client may log in and hang up)
        self._told = False
        self.server = SaslServer(authenticator, peer_host=peer_host,
                                 allow_anonymous=allow_anonymous,
                                 tls_peer_subject=tls_peer_subject,
                                 gate=_gate(throttle, peer_host, peer, self._clock)
                                 if throttle is not None else None)

    @property
    def state(self) -> SaslState:
        return self.server.state

    def greeting(self) -> bytes:
        """Our SASL header and mechanisms, queued by the server at construction."""
        return self.server.data_to_send()

    def receive(self, data: bytes, now: float, answer_by: Optional[float]) -> bytes:
        """Feed client bytes at ``now``; returns what to send now (a refused login's
        outcome may be held back instead, until ``release_at``)."""
        self._clock[0] = now
        sasl = self.server
        sasl.receive_data(data)
        out = sasl.data_to_send()
        if sasl.result is not None:
            if self._throttle is not None and not self._told:
                self._told = True
                self._throttle.succeeded(self._peer_host, sasl.result.user.name, now)
        elif sasl.state is SaslState.FAILED and sasl.refusal is not None:
            answer_at = refuse_login(
                self._throttle, sasl.refusal, address=self._peer_host, peer=self._peer,
                user=sasl.claimed_user, protocol="AMQP 1.0", mechanism=sasl.mechanism_name,
                now=now, answer_by=answer_by, connection_id=self._connection_id)
            if answer_at > now:
                # answer a suspected password guesser late (a timer, never a sleep)
                self._held += out
                self.release_at = answer_at
                return b""
        return out

    def due(self, now: float) -> bytes:
        """The held outcome if ``release_at`` has come (then nothing is held), else b""."""
        if self.release_at is None or now < self.release_at:
            return b""
        out, self._held, self.release_at = self._held, b"", None
        return out


def _gate(throttle: LoginThrottle, peer_host: str, peer: str, clock: list[float]) -> Callable[[str], None]:
    """The throttle's check before a password check by ``user``, at ``clock[0]``."""
    def gate(user: str) -> None:
        throttle.check_attempt(peer_host, user, peer, clock[0])
    return gate
