"""Traces across jobs (issue 26 point 6), with the real OpenTelemetry SDK: a producer's span
(kept by the SDK's InMemorySpanExporter here), its job's span in a real forked slot, and the
follow-up job that handler put form one trace, each span the child of the one before."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from master_procs import StartMaster, poll_until
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from queue_server.client import QueueClient


def test_a_producer_its_job_and_the_jobs_follow_up_form_one_trace(
    start_master: StartMaster, queue_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    trace_dir = tmp_path / "spans"
    trace_dir.mkdir()
    monkeypatch.setenv("SM_TRACE_DIR", str(trace_dir))  # the master and its slots inherit it
    exporter = InMemorySpanExporter()
    provider = TracerProvider()  # this test's own provider: the global one is left alone
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with QueueClient(queue_server.address) as client:
        with provider.get_tracer("test").start_as_current_span("produce"):
            client.put("traced_parent", b"{}", key="p1")
        client.put("traced_parent", b"{}", key="untraced")  # no span: a trace of its own
    [producer] = exporter.get_finished_spans()
    master = start_master(modules=["sm_test_traced"],
                          static_slots={"traced_parent": 1, "traced_child": 1})

    poll_until(lambda: _count(trace_dir) == 4, timeout_s=60.0,
               what=lambda: f"4 job spans exported\n{master.log_tail()}")
    by_key = {span["attributes"]["slotmap.key"]: span for span in _spans(trace_dir)}
    assert set(by_key) == {"p1", "p1:child", "untraced", "untraced:child"}
    trace_id = f"{producer.context.trace_id:032x}"
    job, child = by_key["p1"], by_key["p1:child"]
    assert (job["name"], job["kind"], job["attributes"]) == (
        "slotmap.job traced_parent", "CONSUMER",
        {"slotmap.queue": "traced_parent", "slotmap.key": "p1", "slotmap.attempt": 1})
    assert job["trace_id"] == trace_id and job["parent_id"] == f"{producer.context.span_id:016x}"
    assert child["name"] == "slotmap.job traced_child"
    assert child["trace_id"] == trace_id and child["parent_id"] == job["span_id"]
    # The job put without a span starts a trace in its slot, which its child continues.
    untraced, untraced_child = by_key["untraced"], by_key["untraced:child"]
    assert untraced["parent_id"] is None and untraced["trace_id"] != trace_id
    assert untraced_child["trace_id"] == untraced["trace_id"]
    assert untraced_child["parent_id"] == untraced["span_id"]


def _spans(trace_dir: Path) -> list[dict[str, Any]]:
    """The job spans the slots exported (a line per span, written when it ended)."""
    return [json.loads(line) for path in trace_dir.glob("spans-*.jsonl")
            for line in path.read_text().splitlines()]


def _count(trace_dir: Path) -> int:
    return len(_spans(trace_dir))
