"""Received strings that are not UTF-8, in the engine pumped in memory (no socket).

Frames are encoded by proton with a placeholder and the placeholder's bytes replaced, as
proton will not encode an invalid ``str``.
"""
from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from proton import Described, Event, uint, ulong

from gateway.amqp10 import Amqp10Engine
from gateway.amqp10.conditions import Scope
from gateway.amqp10.received_strings import link_name, undecodable
from gateway.amqp10.sasl import AMQP_HEADER
from tests.support.amqp10_socket_client import amqp_frame, parse_performatives

OPEN, BEGIN, ATTACH, DETACH, CLOSE = 0x10, 0x11, 0x12, 0x16, 0x18
MARK = "@@MARK@@"
BAD = b"\xff\xfeab\xc3(\xed\xa0"


def _engine(broker, authenticator) -> Amqp10Engine:
    """An engine past the header, logged in as guest (1.0 without SASL)."""
    return Amqp10Engine(header=AMQP_HEADER, broker=broker, authenticator=authenticator,
                        peer_host="127.0.0.1", now=0.0, container_id="gw", allow_anonymous=False,
                        anonymous_user=None, default_user="guest", default_vhost="/",
                        allow_without_sasl=True)


def _open(container="client", hostname="vhost:/") -> bytes:
    return amqp_frame(OPEN, [container, hostname])


def _begin() -> bytes:
    return amqp_frame(BEGIN, [None, uint(0), uint(100), uint(100)])


def _attach(name="link", handle=0, target="/topic/t", source=None) -> bytes:
    return amqp_frame(ATTACH, [name, uint(handle), False, None, None,
                               Described(ulong(0x28), [source]), Described(ulong(0x29), [target]),
                               None, None, uint(0)])


def _exchange(engine: Amqp10Engine, data: bytes) -> list[tuple[int, list]]:
    engine.receive_data(data.replace(MARK.encode(), BAD))
    out = engine.data_to_send()
    return parse_performatives(out[8:] if out.startswith(b"AMQP") else out)


def _error(fields: list, index: int) -> tuple[str, str]:
    error = fields[index].value
    return str(error[0]), str(error[1])


@pytest.mark.parametrize("field,attach", [
    ("attach.name", dict(name=MARK)),
    ("attach.target.address", dict(target=MARK)),
    ("attach.source.address", dict(source=MARK)),
])
def test_an_attach_string_that_is_not_utf8_refuses_the_link_only(broker, authenticator, caplog,
                                                                  field, attach):
    caplog.set_level(logging.INFO)
    engine = _engine(broker, authenticator)
    _exchange(engine, _open() + _begin())
    frames = _exchange(engine, _attach(**attach))
    assert [d for d, _f in frames] == [ATTACH, DETACH]
    assert _error(frames[1][1], 2) == (
        "amqp:invalid-field", f"{field} is not valid UTF-8 (byte 0xff at offset 0)")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    # the session lives on: the next link is attached (and given credit)
    answer = [d for d, _f in _exchange(engine, _attach(name="ok", handle=1))]
    assert answer[0] == ATTACH and DETACH not in answer
    assert not engine.closed


@pytest.mark.parametrize("field,opened", [
    ("open.container-id", dict(container=MARK)),
    ("open.hostname", dict(hostname=MARK)),
])
def test_an_open_string_that_is_not_utf8_closes_with_invalid_field(broker, authenticator, caplog,
                                                                   field, opened):
    caplog.set_level(logging.INFO)
    engine = _engine(broker, authenticator)
    # begin and attach behind it must not replace the first error ("no vhost" did)
    frames = _exchange(engine, _open(**opened) + _begin() + _attach())
    assert [d for d, _f in frames][-1] == CLOSE
    assert _error(frames[-1][1], 0) == ("amqp:invalid-field",
                                        f"{field} is not valid UTF-8 (byte 0xff at offset 0)")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def test_the_safety_net_names_the_performative_with_the_event_scope():
    with pytest.raises(UnicodeDecodeError) as info:
        BAD.decode("utf-8")
    exc = info.value
    link = SimpleNamespace(type=Event.LINK_FLOW, link=object(), session=object())
    session = SimpleNamespace(type=Event.SESSION_REMOTE_OPEN, link=None, session=object())
    connection = SimpleNamespace(type=Event.CONNECTION_REMOTE_CLOSE, link=None, session=None)
    assert undecodable(link, exc).scope is Scope.LINK
    assert undecodable(session, exc).scope is Scope.SESSION
    error = undecodable(connection, exc)
    assert error.scope is Scope.CONNECTION
    assert error.description == "a string of close is not valid UTF-8 (byte 0xff at offset 0)"


def test_link_name_for_logs_shows_the_bytes():
    class BadName:
        @property
        def name(self):
            return BAD.decode("utf-8")

    assert link_name(SimpleNamespace(name="ok")) == "'ok'"
    assert link_name(BadName()) == repr(BAD)
