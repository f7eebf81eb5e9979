"""``forwarded_form``: a message as it goes to another gateway, with as little encoding
per message as the sender's repetition allows."""
from __future__ import annotations

import pytest
from proton import Message

from translators import to_amqp10
from translators import forwarded_form as ff
from translators.amqp10_sections import with_message_annotations, with_to
from translators.basic_properties import BasicProperties
from translators.forwarded_form import forwarded_form

_ID = "x-opt-forward-id"


def _cases() -> list[bytes]:
    plain = [to_amqp10(BasicProperties(delivery_mode=2), b"x" * n, exchange="", routing_key="q@b")
             for n in (0, 5, 100, 300, 5000)]
    with_headers = to_amqp10(BasicProperties(headers={"a": 1}), b"y" * 9, exchange="e", routing_key="k")
    annotated = Message(body=b"z" * 50, address="q@b")
    annotated.annotations = {"x-opt-a": 1}
    annotated.inferred = True
    value_body = Message(body="text").encode()
    return [*plain, with_headers, annotated.encode(), value_body]


@pytest.mark.parametrize("varying", [None, _ID])
def test_forwarded_form_is_the_two_splices_with_one_encode_per_message(varying) -> None:
    """A repeated prefix is split once and then only the annotations section is encoded
    (issue 45); every message still equals ``with_to`` then ``with_message_annotations``,
    ids small and large, with the id named as ``varying`` or not."""
    cases = _cases()
    for to in (None, "q@b"):
        for n in range(3):  # a second and third message with the same prefix take the kept split
            for i, encoded in enumerate(cases):
                for first in (0, 1_750_000_000_000_000_000, -(1 << 62)):
                    annotations = {"x-opt-forward-origin": "a", _ID: first + 1000 * n + i,
                                   "x-opt-forward-hops": ["a"]}
                    expected = with_message_annotations(with_to(encoded, to) if to else encoded,
                                                        annotations)
                    assert forwarded_form(encoded, to, annotations, varying) == expected


def test_a_stream_that_differs_in_its_id_alone_is_encoded_once(monkeypatch) -> None:
    """With the id named as ``varying``, the annotations section of a stream of messages
    whose other annotations recur is encoded for the first (and its check) only; the
    next ones put their id in. Another origin, or a small id, is encoded again."""
    (encoded,) = _cases()[2:3]
    monkeypatch.setattr(ff, "_last_forwarded", None)
    monkeypatch.setattr(ff, "_last_varying", None)
    encodes = []
    real = ff.encode_described_map
    monkeypatch.setattr(ff, "encode_described_map", lambda *a: encodes.append(1) or real(*a))
    first = 1_750_000_000_000_000_000
    stream = [("a", first + n) for n in range(5)] + [("c", first + 9), ("c", first + 10), ("c", 7)]
    for origin, gid in stream:
        annotations = {"x-opt-forward-origin": origin, _ID: gid, "x-opt-forward-hops": [origin]}
        expected = with_message_annotations(with_to(encoded, "q@b"), annotations)
        assert forwarded_form(encoded, "q@b", annotations, _ID) == expected
    # origin a: the split's message (spliced, not encoded here), then the slot's first and
    # its check; origin c: a slot again, first and check; the small id: encoded (no slot)
    assert len(encodes) == 2 + 2 + 1
