"""Test handler module for issue 26 point 6: a traced parent job puts a follow-up child. Each
slot exports its finished spans as JSON lines to `$SM_TRACE_DIR/spans-<pid>.jsonl` (the slot
is another process than the test: the test reads the files), through the real OpenTelemetry
SDK (a SimpleSpanProcessor, so a span is written when it ends)."""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from slot.handler import Handler, SlotJob, handler

_configured = False


class FileExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        path = Path(os.environ["SM_TRACE_DIR"]) / f"spans-{os.getpid()}.jsonl"
        with path.open("a") as out:
            for span in spans:
                context = span.get_span_context()
                out.write(json.dumps({
                    "name": span.name,
                    "trace_id": f"{context.trace_id:032x}",
                    "span_id": f"{context.span_id:016x}",
                    "parent_id": None if span.parent is None else f"{span.parent.span_id:016x}",
                    "kind": span.kind.name,
                    "attributes": dict(span.attributes or {}),
                }) + "\n")
        return SpanExportResult.SUCCESS


def _configure() -> None:
    """Once per slot process, after the fork (setup())."""
    global _configured
    if not _configured:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(FileExporter()))
        trace.set_tracer_provider(provider)
        _configured = True


@handler("traced_parent")
class Parent(Handler):
    batch_size = 1

    def setup(self) -> None:
        _configure()

    def handle_job(self, job: SlotJob) -> None:
        self.put("traced_child", job.data, key=f"{job.key}:child")


@handler("traced_child")
class Child(Handler):
    batch_size = 1

    def setup(self) -> None:
        _configure()

    def handle_job(self, job: SlotJob) -> None:
        pass
