"""Method codecs: hypothesis round trips of every row, pamqp cross-checks, decode errors."""
from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given, settings
from pamqp import commands as pamqp_commands

from gateway.amqp091 import methods as m
from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.methods import METHOD_CLASSES, decode_method, method_class, methods_source
from gateway.amqp091.spec import METHODS, Domain, ReplyCode
from tests.support.amqp091_strategies import method_instances, methods_of_spec
from tests.support.example_counts import examples


def _round_trip_test(spec):
    @settings(max_examples=examples(25))
    @given(methods_of_spec(spec))
    def test(method) -> None:
        raw = method.encode()
        assert raw[:4] == struct.pack(">HH", spec.class_id, spec.method_id)
        assert decode_method(raw) == method

    return test


# one hypothesis test per spec row (generated: pytest-twisted does not mix parametrize and given)
for _spec in METHODS:
    globals()[f"test_round_trip_{_spec.name.replace('.', '_').replace('-', '_')}"] = _round_trip_test(_spec)
del _spec


@given(method_instances())
def test_any_method_round_trips(method) -> None:
    assert decode_method(method.encode()) == method


@pytest.mark.parametrize("spec", METHODS, ids=lambda s: s.name)
def test_class_attributes_come_from_the_row(spec) -> None:
    cls = method_class(spec.name)
    assert (cls.NAME, cls.CLASS_ID, cls.METHOD_ID, cls.CONTENT) == (
        spec.name, spec.class_id, spec.method_id, spec.content)
    assert getattr(m, cls.__name__) is cls
    assert cls.__name__ in m.__all__


_SAMPLES = {Domain.OCTET: 1, Domain.SHORT: 2, Domain.LONG: 3, Domain.LONGLONG: 4, Domain.TIMESTAMP: 5,
            Domain.SHORTSTR: "abc", Domain.LONGSTR: b"xyz", Domain.BIT: True, Domain.TABLE: {"k": "v"}}
# reserved arguments that pamqp insists on leaving at their defaults
_RESERVED = {"ticket": 0, "capabilities": "", "insist": False, "known_hosts": "", "out_of_band": "0",
             "channel_id": b"0", "cluster_id": ""}  # pamqp's reserved channel values are "0"


@pytest.mark.parametrize(
    "spec", [s for s in METHODS if (s.class_id << 16 | s.method_id) in pamqp_commands.INDEX_MAPPING],
    ids=lambda s: s.name)
def test_encoding_agrees_with_pamqp(spec) -> None:
    ours = METHOD_CLASSES[(spec.class_id, spec.method_id)](
        **{a.name: _RESERVED.get(a.name, _SAMPLES[a.domain]) for a in spec.arguments})
    raw = ours.encode()
    theirs = pamqp_commands.INDEX_MAPPING[spec.class_id << 16 | spec.method_id]()
    theirs.unmarshal(raw[4:])
    assert theirs.marshal() == raw[4:]


def test_sample_values_match_pamqp() -> None:
    pairs = [
        (m.BasicPublish(exchange="ex", routing_key="rk", mandatory=True, immediate=False),
         pamqp_commands.Basic.Publish(exchange="ex", routing_key="rk", mandatory=True)),
        (m.BasicDeliver(consumer_tag="ct", delivery_tag=2**40, redelivered=True, exchange="e", routing_key="r"),
         pamqp_commands.Basic.Deliver(consumer_tag="ct", delivery_tag=2**40, redelivered=True, exchange="e",
                                      routing_key="r")),
        (m.BasicNack(delivery_tag=7, multiple=True, requeue=False),
         pamqp_commands.Basic.Nack(delivery_tag=7, multiple=True, requeue=False)),
        (m.QueueDeclare(queue="q", durable=True, auto_delete=True, arguments={"x-max-length": 10}),
         pamqp_commands.Queue.Declare(queue="q", durable=True, auto_delete=True, arguments={"x-max-length": 10})),
        (m.ConnectionTune(channel_max=2047, frame_max=131072, heartbeat=60),
         pamqp_commands.Connection.Tune(channel_max=2047, frame_max=131072, heartbeat=60)),
    ]
    for ours, theirs in pairs:
        assert decode_method(struct.pack(">HH", ours.CLASS_ID, ours.METHOD_ID) + theirs.marshal()) == ours


def test_bits_are_packed_low_order_first_and_share_an_octet() -> None:
    raw = m.ExchangeDeclare(exchange="x", type="t", passive=True, durable=False, auto_delete=True,
                            internal=False, nowait=True).encode()
    # ticket(2) "x"(2) "t"(2) bits(1) table(4)
    assert raw[4 + 6] == 0b10101


def test_struct_fast_path_is_generated_from_the_row() -> None:
    source = methods_source("basic.deliver")
    assert ".pack(60, 60," in source and "unpack_from" in source


def test_refused_class_is_540_and_named() -> None:
    with pytest.raises(ConnectionException) as info:
        decode_method(struct.pack(">HH", 100, 10))
    assert info.value.code is ReplyCode.NOT_IMPLEMENTED
    assert "dtx" in info.value.text
    assert (info.value.class_id, info.value.method_id) == (100, 10)


@pytest.mark.parametrize("ids", [(60, 999), (999, 10), (30, 20)])
def test_unknown_method_is_503(ids) -> None:
    with pytest.raises(ConnectionException) as info:
        decode_method(struct.pack(">HH", *ids))
    assert info.value.code is ReplyCode.COMMAND_INVALID


def test_truncated_arguments_are_502_naming_the_method() -> None:
    raw = m.BasicPublish(exchange="exchange", routing_key="key").encode()
    for cut in range(4, len(raw)):
        with pytest.raises(ConnectionException) as info:
            decode_method(raw[:cut])
        assert info.value.code is ReplyCode.SYNTAX_ERROR
        assert "basic.publish" in info.value.text


def test_trailing_octets_are_502() -> None:
    with pytest.raises(ConnectionException) as info:
        decode_method(m.BasicAck(delivery_tag=1).encode() + b"\x00")
    assert info.value.code is ReplyCode.SYNTAX_ERROR


def test_invalid_utf8_short_string_is_502() -> None:
    raw = struct.pack(">HHH", 60, 40, 0) + b"\x01\xff\x00\x00"
    with pytest.raises(ConnectionException) as info:
        decode_method(raw)
    assert info.value.code is ReplyCode.SYNTAX_ERROR
    assert "UTF-8" in info.value.text


def test_payload_shorter_than_ids_is_a_frame_error() -> None:
    with pytest.raises(ConnectionException) as info:
        decode_method(b"\x00")
    assert info.value.code is ReplyCode.FRAME_ERROR


def test_encode_refuses_overlong_short_strings() -> None:
    with pytest.raises(ValueError):
        m.BasicPublish(routing_key="k" * 256).encode()


def test_methods_are_frozen() -> None:
    ack = m.BasicAck(delivery_tag=1)
    with pytest.raises(AttributeError):
        ack.delivery_tag = 2  # type: ignore[misc]


def test_make_is_the_constructor_for_every_method() -> None:
    for cls in METHOD_CLASSES.values():
        values = [f.default for f in dataclasses.fields(cls)]
        made = cls.make(*values)  # type: ignore[attr-defined]
        assert type(made) is cls and made == cls(*values) and hash(made) == hash(cls(*values))
        if values:
            with pytest.raises(AttributeError):  # still frozen
                setattr(made, dataclasses.fields(cls)[0].name, values[0])
    deliver = m.BasicDeliver.make("c", 7, True, "x", "k")
    assert deliver == m.BasicDeliver(consumer_tag="c", delivery_tag=7, redelivered=True,
                                     exchange="x", routing_key="k")


def test_a_repeated_publish_is_decoded_once_and_shared() -> None:
    payload = m.BasicPublish(exchange="amq.topic", routing_key="a.b", mandatory=True).encode()
    first = decode_method(bytes(payload))
    again = decode_method(bytes(payload))
    assert again is first
    assert first == m.BasicPublish(exchange="amq.topic", routing_key="a.b", mandatory=True)
    other = decode_method(m.BasicPublish(exchange="amq.topic", routing_key="a.c").encode())
    assert other.routing_key == "a.c" and other is not first
    # other methods are decoded every time (a delivery tag is new in every ack)
    ack = m.BasicAck(delivery_tag=5).encode()
    assert decode_method(ack) is not decode_method(ack)


def test_the_publish_cache_is_bounded() -> None:
    from gateway.amqp091 import methods as module
    for i in range(module.PUBLISHES_MAX + 10):
        decode_method(m.BasicPublish(exchange="", routing_key=f"q{i}").encode())
        assert len(module._PUBLISHES) <= module.PUBLISHES_MAX
