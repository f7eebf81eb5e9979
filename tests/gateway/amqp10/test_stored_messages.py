"""1.0 messages and annotations as the store keeps them: rebuilt by the transfer scanner."""
from __future__ import annotations

from proton import symbol, ulong

from gateway.amqp10.stored_messages import container_from_stored, decode_annotations, encode_annotations
from gateway.broker import Encoding
from gateway.store import MessageRow, StoredMessage
from tests.support.amqp10_pump import encode_message


def test_routing_fields_come_back_from_the_encoded_message() -> None:
    encoded = encode_message("hello", durable=True, priority=7, ttl=30, id="m-1", correlation_id="c-1",
                             properties={"k": "v"})
    row = MessageRow(9, "amqp10", None, encoded, "amq.topic", "a.b", 4.0, 0, 7, None)
    message = container_from_stored(StoredMessage(row, {symbol("x-opt-a"): ulong(1)}))
    assert message.origin is Encoding.AMQP10 and message.payload == encoded
    assert (message.exchange, message.routing_key, message.created_at, message.gateway_id) == (
        "amq.topic", "a.b", 4.0, 9)
    assert (message.durable, message.priority, message.ttl_ms) == (True, 7, 30000)
    assert (message.message_id, message.correlation_id) == ("m-1", "c-1")
    assert message.headers == {"k": "v"}
    assert message.annotations == {symbol("x-opt-a"): ulong(1)}


def test_deaths_remove_the_ttl() -> None:
    encoded = encode_message("x", durable=True, ttl=30)
    row = MessageRow(9, "amqp10", None, encoded, "", "q", 4.0, 0, None, [{"queue": "q", "reason": "expired"}])
    assert container_from_stored(StoredMessage(row, None)).ttl_ms is None


def test_annotations_keep_symbols_and_typed_values() -> None:
    annotations = {symbol("x-opt-reason"): "retry", "x-opt-count": ulong(3), ulong(5): symbol("s")}
    back = decode_annotations(encode_annotations(annotations))
    assert back == {symbol("x-opt-reason"): "retry", symbol("x-opt-count"): ulong(3), ulong(5): symbol("s")}
    assert all(type(k) in (symbol, ulong) for k in back)
    assert type(back[symbol("x-opt-count")]) is ulong


def test_annotations_are_encoded_as_proton_encodes_them_arrays_by_proton() -> None:
    """The pure-Python encoder writes what proton's ``Data`` writes (the store's commit
    thread encodes one map per outbox row, issue 45); an array is left to proton."""
    from proton import UNDESCRIBED, Array, Data

    from gateway.forward.annotations import forward_annotations
    for annotations in (forward_annotations("org-a", 1_750_000_000_000_000_123, None),
                        {symbol("x-opt-reason"): "retry", "x-opt-count": ulong(3), ulong(5): symbol("s")},
                        {"x-opt-array": Array(UNDESCRIBED, Data.INT, 1, 2)}):
        data = Data()
        data.put_object({(symbol(k) if type(k) is str else k): v for k, v in annotations.items()})
        assert encode_annotations(annotations) == bytes(data.encode())


def test_annotations_differing_in_one_integer_are_encoded_as_proton_encodes_them() -> None:
    """After a map with one integer past one octet, the next one differing in that
    integer alone is the last one's octets with it put in (an outbox row per forwarded
    message, issue 45); equal values of another type (a symbol for a str, in a list too),
    other keys or another key order are encoded again, as proton encodes them."""
    from proton import Data

    from gateway.forward.annotations import GATEWAY_ID, HOPS, ORIGIN, forward_annotations

    def proton_octets(annotations: dict) -> bytes:
        data = Data()
        data.put_object({(symbol(k) if type(k) is str else k): v for k, v in annotations.items()})
        return bytes(data.encode())

    first = forward_annotations("org-a", 1000, None)
    maps = [first, *(forward_annotations("org-a", gid, None) for gid in (1001, 5, -400, 1 << 40)),
            {**first, ORIGIN: symbol("org-a")},
            {**first, HOPS: [symbol("org-a")]},
            {**first, GATEWAY_ID: True},
            dict(reversed(list(first.items()))),
            {**first, "x-opt-other": "x"},
            forward_annotations("org-b", 1002, None)]
    for annotations in maps:
        assert encode_annotations(annotations) == proton_octets(annotations), annotations
