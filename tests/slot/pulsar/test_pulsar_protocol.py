"""The pulsar's frames and feedback vocabulary: round trips, one named error, fields added later."""
from __future__ import annotations

import pytest

from slot.pulsar.errors import PermitFrameError
from slot.pulsar.protocol import (
    OK,
    SLOW_DOWN,
    AcquireRequest,
    Feedback,
    FeedbackKind,
    GrantReply,
    ReportRequest,
    decode_reply,
    decode_request,
    pause,
)


def test_requests_and_replies_round_trip_through_their_frames() -> None:
    request = ReportRequest(id=3, limiter="ga", outcome=FeedbackKind.PAUSE, pause_s=60)
    assert decode_request(request.encode()) == request
    assert request.feedback() == pause(60)
    reply = GrantReply(id=4, granted=2, retry_after_s=0.25)
    assert decode_reply(reply.encode()) == reply


@pytest.mark.parametrize("frame", [
    b"not json",
    b'{"op": "acquire", "id": 1, "limiter": "ga", "n": 0}',
    b'{"op": "acquire", "id": 1, "limiter": "bad name!"}',
    b'{"op": "report", "id": 1, "limiter": "ga", "outcome": "pause"}',
    b'{"op": "report", "id": 1, "limiter": "ga", "outcome": "ok", "pause_s": 5}',
    b'{"op": "launch", "id": 1}',
])
def test_a_bad_request_frame_is_one_named_error(frame: bytes) -> None:
    with pytest.raises(PermitFrameError, match="bad pulsar request frame"):
        decode_request(frame)


def test_feedback_is_ok_slow_down_or_a_pause_with_seconds() -> None:
    assert (OK.kind, SLOW_DOWN.kind, pause(2).pause_s) == (FeedbackKind.OK, FeedbackKind.SLOW_DOWN, 2.0)
    with pytest.raises(ValueError, match="only a pause has pause_s"):
        Feedback(FeedbackKind.OK, 1.0)


def test_a_frame_sends_a_later_field_only_when_it_is_set() -> None:
    # A pulsar of the release before (extra fields forbidden) reads a request without one.
    assert b"reserve_s" not in AcquireRequest(id=1, limiter="geo").encode()
    assert b'"reserve_s":0.25' in AcquireRequest(id=1, limiter="geo", reserve_s=0.25).encode()
    assert b"start_after_s" not in GrantReply(id=1, granted=1, retry_after_s=0).encode()
