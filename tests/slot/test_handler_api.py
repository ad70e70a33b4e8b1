"""The developer's side: @handler registration and what a job offers."""
from __future__ import annotations

from collections.abc import Sequence

import pytest

from slot.errors import HandlerRegistrationError, JobResolutionError
from slot.handler import (
    MAX_ERROR_CHARS,
    Handler,
    Outcome,
    SlotJob,
    error_text,
    handler,
    registered_handlers,
)


def job(item: str | None = "_1", data: bytes = b'{"photo": 7}') -> SlotJob:
    return SlotJob(queue="resize_photo", id=11, priority=3, data=data, item=item)


def test_decorated_class_is_registered_for_its_queue() -> None:
    @handler("api_test_queue")
    class Resize(Handler):
        batch_size = 20

        def handle(self, jobs: Sequence[SlotJob]) -> None:
            return None

    assert registered_handlers()["api_test_queue"] is Resize
    assert Resize.queue == "api_test_queue"
    assert Resize.output_queue() == "api_test_queue_reply"


def test_a_second_class_cannot_take_a_registered_queue() -> None:
    @handler("api_taken_queue")
    class First(Handler):
        pass

    with pytest.raises(HandlerRegistrationError, match="already has handler"):
        @handler("api_taken_queue")
        class Second(Handler):
            pass


def test_bad_queue_names_and_non_handlers_are_refused() -> None:
    with pytest.raises(HandlerRegistrationError, match="must match"):
        handler("bad name")
    with pytest.raises(HandlerRegistrationError, match="Handler subclass"):
        handler("api_plain")(object)  # type: ignore[type-var]


def test_job_exposes_its_fields_and_json_helpers() -> None:
    one = job()
    assert (one.queue, one.id, one.priority, one.item) == ("resize_photo", 11, 3, "_1")
    assert one.json() == {"photo": 7}
    assert one.text == '{"photo": 7}'
    assert one.outcome is Outcome.DONE


def test_later_records_the_delay() -> None:
    one = job()
    one.later(delay_s=30)
    assert (one.outcome, one.delay_s) == (Outcome.LATER, 30)


def test_reply_needs_an_item_and_a_job_resolves_once() -> None:
    with pytest.raises(JobResolutionError, match="no item"):
        job(item=None).reply(b"x")
    one = job()
    one.reply_json({"ok": True})
    assert one.reply_data == b'{"ok":true}'
    with pytest.raises(JobResolutionError, match="already resolved"):
        one.later()


def test_later_takes_the_documented_delay_keyword() -> None:
    from slot.handler import SlotJob

    job = SlotJob(queue="q", id=1, priority=0, data=b"x", item=None)
    job.later(delay=30)
    assert job.delay_s == 30


def test_fail_takes_a_text_or_an_exception_with_its_traceback() -> None:
    texted = job()
    texted.fail("photo missing")
    assert (texted.outcome, texted.error, texted.give_up) == (Outcome.FAILED, "photo missing", False)
    photos: dict[str, int] = {}
    try:
        photos["photo"]
    except KeyError as exc:
        raised = job()
        raised.fail(exc, dead=True)
    assert raised.error is not None and raised.give_up
    assert raised.error.startswith("Traceback (most recent call last):")
    assert raised.error.endswith("KeyError: 'photo'")
    with pytest.raises(JobResolutionError, match="already resolved"):
        raised.done()


def test_a_huge_error_is_cut_in_the_middle_keeping_both_ends() -> None:
    text = error_text("start " + "x" * 100_000 + " end")
    assert len(text) <= MAX_ERROR_CHARS
    assert text.startswith("start ") and text.endswith(" end") and "characters cut" in text


def test_a_job_carries_its_key_and_attempt() -> None:
    one = SlotJob(queue="q", id=3, priority=0, data=b"", item=None, key="photo:7", attempt=2)
    assert (one.key, one.attempt, one.resolved) == ("photo:7", 2, False)
    one.done()
    assert one.resolved and one.outcome is Outcome.DONE
