"""The verdict on an outcome answered "not running" after a failover (slot/outcome_check.py):
applied before the failover, or a lock lost. Pure, and the slot's source against a real
queue server."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from queue_server.client import QueueClient
from queue_server.protocol.job_info import JobInfo
from queue_server.protocol.replies import Job
from slot.outcome_check import applied, not_running
from slot.source import ClientSource
from slot.wake import Waker
from tests.queue_server.server_proc import running_queue_server

JOB = Job("q", 7, 0, b"x", key="k", attempt=2)


def info(state: str, attempts: int = 2, error: str | None = None) -> JobInfo:
    return JobInfo(key="k", queue="q", state=state, priority=0, attempts=attempts, error=error,  # type: ignore[arg-type]
                   data_len=1, data="x")


def test_a_done_is_applied_when_no_job_holds_its_key_and_lost_when_one_does() -> None:
    assert applied("DONE", JOB, None)
    assert not applied("DONE", JOB, info("ready"))
    level, text = not_running("DONE", 7, JOB, info("failed", 2, "lock expired after 60 s"))
    assert level == logging.WARNING and "lock was lost" in text and "now failed, attempt 2" in text


def test_later_and_fail_are_applied_only_with_this_hand_outs_attempt_and_their_own_state() -> None:
    assert applied("LATER", JOB, info("delayed")) and not applied("LATER", JOB, info("delayed", 3))
    assert not applied("LATER", JOB, info("failed"))
    assert applied("FAIL", JOB, info("dead", 2, "ValueError: bad"))
    assert not applied("FAIL", JOB, info("failed", 2, "lock expired after 60 s"))
    assert not applied("FAIL", JOB, None)


def test_without_a_key_or_an_answer_the_loss_is_reported_as_before() -> None:
    level, text = not_running("FAIL", 7, None, None)
    assert level == logging.WARNING and "no key" in text
    level, text = not_running("DONE", 7, JOB, "the queue server could not say: 500 Offline Mode")
    assert level == logging.WARNING and "could not say" in text


def test_the_source_tells_a_done_applied_before_from_a_lock_lost(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    with running_queue_server(tmp_path, "--fsync", "never") as server, QueueClient(server.address) as client:
        client.put("q", b"a", key="applied")
        client.put("q", b"b", key="lost")
        source = ClientSource(client, Waker())
        applied_job, lost_job = source.fetch("q", count=2, lock_s=60.0) or []
        client.done(applied_job.id)  # the first DONE, applied (and replicated) before a failover
        client.later(lost_job.id)  # its lock gone: the job waits again
        with caplog.at_level(logging.INFO, logger="slot.source"):
            source.done([applied_job.id, lost_job.id])
    lines = {record.levelno: record.getMessage() for record in caplog.records}
    assert "key applied" in lines[logging.INFO] and "already applied" in lines[logging.INFO]
    assert "key lost" in lines[logging.WARNING] and "lock was lost (now ready" in lines[logging.WARNING]
