"""Forwarding annotations: added on the way out, read back by the receiver, loops broken."""
from __future__ import annotations

import pytest
from proton import Message

from gateway.forward.annotations import (MAX_HOPS, Forwarded, LoopError, forward_annotations,
                                         forwarded_of)
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
