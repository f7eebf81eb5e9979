"""Forwarding annotations: added on the way out, read back by the receiver, loops broken."""
from __future__ import annotations

import pytest
from proton import Message

from gateway.forward.annotations import (MAX_HOPS, Forwarded, LoopError, annotations_section,
                                         forward_annotations, forwarded_of)
from translators.amqp10_sections import with_message_annotations


def test_a_new_message_starts_its_trace_here_and_reads_back() -> None:
    annotations = forward_annotations("org-a", 42, None)
    encoded = with_message_annotations(Message(body="x").encode(), annotations)
    assert forwarded_of(encoded) == Forwarded("org-a", 42, ("org-a",))


def test_a_forwarded_message_keeps_its_origin_and_adds_a_hop() -> None:
    assert forward_annotations("hub", 9, Forwarded("org-a", 42, ("org-a",))) == {
        "x-opt-forward-origin": "org-a", "x-opt-forward-id": 42,
        "x-opt-forward-hops": ["org-a", "hub"]}


def test_a_plain_message_has_no_forwarding_identity() -> None:
    assert forwarded_of(Message(body="x", annotations={"other": 1}).encode()) is None
    assert forwarded_of(Message(body="x").encode()) is None


@pytest.mark.parametrize("hops, words", [
    (("org-a", "hub"), "already passed container 'hub'"),
    (tuple(f"c{i}" for i in range(MAX_HOPS)), f"the most forwarding allows ({MAX_HOPS}"),
])
def test_loops_and_long_paths_are_refused(hops, words) -> None:
    with pytest.raises(LoopError, match=words.replace("(", r"\(")):
        forward_annotations("hub", 1, Forwarded("org-a", 1, hops))


def _forwarded_stream(body: bytes, ids, origin: str = "org-a", **properties) -> list[bytes]:
    from translators import to_amqp10
    from translators.forwarded_form import forwarded_form
    from translators.basic_properties import BasicProperties
    source = to_amqp10(BasicProperties(delivery_mode=2, **properties), body, exchange="",
                       routing_key="q@org-b")
    return [forwarded_form(source, "q", forward_annotations(origin, gid, None)) for gid in ids]


def _full(encoded: bytes):
    from translators.amqp10_sections import inspect_amqp10
    return inspect_amqp10(encoded), annotations_section(encoded)


def test_a_forwarded_stream_is_read_from_the_learnt_prefix_without_decoding(monkeypatch) -> None:
    """Messages whose sections before the body differ only in the gateway id are read by
    comparing octets (issue 45): the same summary and annotations as a full decode, for
    bodies of any size, and nothing is decoded."""
    from gateway.forward import annotations as fa
    first = 1_750_000_000_000_000_000
    stream = _forwarded_stream(b"x" * 100, range(first, first + 3)) + \
        _forwarded_stream(b"y" * 4096, (first + 7, -first))
    prefix = fa.ForwardedPrefix()
    assert prefix.read(stream[0]) is None
    learnt = prefix.learn(stream[0], *_full(stream[0]))
    assert learnt.slot is not None and learnt.key == fa.GATEWAY_ID
    expected = [_full(encoded) for encoded in stream]

    def no_decoding(*args, **kwargs):
        raise AssertionError("decoded")

    monkeypatch.setattr(fa, "decode_section_fast", no_decoding)
    monkeypatch.setattr(fa, "scan_sections", no_decoding)
    for encoded, (summary, section) in zip(stream, expected):
        read = prefix.read(encoded)
        assert read is not None
        assert read[0] == summary
        assert read[1][:3] == section[:3] and read[1].slot is learnt.slot
        assert fa.forwarded_in(read[1].annotations) == fa.forwarded_in(section.annotations) \
            == read[2]  # what the prefix says of the forwarding, without reading the map


def test_what_differs_elsewhere_is_decoded_and_a_small_id_teaches_nothing() -> None:
    from gateway.forward import annotations as fa
    first = 1_750_000_000_000_000_000
    prefix = fa.ForwardedPrefix()
    (one,) = _forwarded_stream(b"x", (first,))
    prefix.learn(one, *_full(one))
    others = (_forwarded_stream(b"x", (first + 1,), origin="org-c")
              + _forwarded_stream(b"x", (first + 1,), content_type="text/plain")
              + _forwarded_stream(b"x", (5,)))
    for encoded in others:
        assert prefix.read(encoded) is None
    with_footer = Message(body=b"x", address="q")
    with_footer.annotations = forward_annotations("org-a", first + 2, None)
    with_footer.footer = {"f": 1}
    assert prefix.read(with_footer.encode()) is None
    (small,) = _forwarded_stream(b"x", (5,))
    assert prefix.learn(small, *_full(small)).slot is None  # a one-octet long: no slot
    assert prefix.read(one) is None
