"""The spec table is self-consistent and complete."""
from __future__ import annotations

from gateway.amqp091.spec import (
    FRAME_END,
    FRAME_MIN_SIZE,
    METHODS,
    METHODS_BY_ID,
    METHODS_BY_NAME,
    REFUSED_CLASSES,
    ClassId,
    Direction,
    ErrorLevel,
    FrameType,
    ReplyCode,
)


def test_ids_and_names_are_unique() -> None:
    assert len(METHODS_BY_ID) == len(METHODS)
    assert len(METHODS_BY_NAME) == len(METHODS)


def test_every_response_names_a_method_of_the_same_class() -> None:
    for spec in METHODS:
        assert spec.synchronous == bool(spec.responses), spec.name
        for name in spec.responses:
            assert METHODS_BY_NAME[name].class_id == spec.class_id, spec.name


def test_class_ids_match_names() -> None:
    for spec in METHODS:
        assert ClassId[spec.class_name.upper()] == spec.class_id


def test_the_brief_s_method_list_is_present() -> None:
    expected = {
        (10, 10), (10, 11), (10, 20), (10, 21), (10, 30), (10, 31), (10, 40), (10, 41), (10, 50), (10, 51),
        (10, 60), (10, 61), (10, 70), (10, 71), (20, 10), (20, 11), (20, 20), (20, 21), (20, 40), (20, 41),
        (30, 10), (30, 11), (40, 10), (40, 11), (40, 20), (40, 21), (40, 30), (40, 31), (40, 40), (40, 51),
        (50, 10), (50, 11), (50, 20), (50, 21), (50, 30), (50, 31), (50, 40), (50, 41), (50, 50), (50, 51),
        (60, 10), (60, 11), (60, 20), (60, 21), (60, 30), (60, 31), (60, 40), (60, 50), (60, 60), (60, 70),
        (60, 71), (60, 72), (60, 80), (60, 90), (60, 100), (60, 110), (60, 111), (60, 120),
        (85, 10), (85, 11), (90, 10), (90, 11), (90, 20), (90, 21), (90, 30), (90, 31),
    }
    assert set(METHODS_BY_ID) == expected


def test_content_methods() -> None:
    assert {s.name for s in METHODS if s.content} == {
        "basic.publish", "basic.return", "basic.deliver", "basic.get-ok"}


def test_server_only_methods_are_never_synchronous_requests_from_the_client() -> None:
    for spec in METHODS:
        if spec.direction is Direction.SERVER and spec.synchronous:
            assert spec.class_id == ClassId.CONNECTION, spec.name


def test_reply_codes_and_levels() -> None:
    assert sorted(int(c) for c in ReplyCode) == [
        200, 311, 312, 313, 320, 402, 403, 404, 405, 406, 501, 502, 503, 504, 505, 506, 530, 540, 541]
    assert ReplyCode.NOT_FOUND.level is ErrorLevel.CHANNEL and not ReplyCode.NOT_FOUND.is_hard()
    assert ReplyCode.FRAME_ERROR.is_hard() and ReplyCode.CONNECTION_FORCED.is_hard()
    assert ReplyCode.REPLY_SUCCESS.level is ErrorLevel.NONE


def test_frame_constants() -> None:
    assert (FrameType.METHOD, FrameType.HEADER, FrameType.BODY, FrameType.HEARTBEAT) == (1, 2, 3, 8)
    assert FRAME_END == 0xCE and FRAME_MIN_SIZE == 4096
    assert REFUSED_CLASSES == {70: "file", 80: "stream", 100: "dtx", 110: "tunnel", 120: "message"}
