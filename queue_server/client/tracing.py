"""W3C trace context across a job (issue 26 point 6), OpenTelemetry being optional.

A producer's PUT carries its current span as `TRACE <traceparent>` (PROTOCOL.md Part B);
the slot runs the job in a span that continues it (`job_span`), and a handler's follow-up
PUTs, made inside that span, carry it on. `opentelemetry-api` is the `otel` extra: nothing
here imports it at module import time (INSTALLED only asks the import system whether it
is there); without it a PUT tests that one constant and is the plain PUT
(bench/client_put_trace.py).
"""
from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import ModuleType
from typing import Any

from queue_server.protocol.keyed import TRACEPARENT_RE

SPAN_PREFIX = "slotmap.job "


def _installed() -> bool:
    try:
        return importlib.util.find_spec("opentelemetry") is not None
    except (ImportError, ValueError):
        return False


# Whether opentelemetry can be imported (found, not imported: imported at the first use).
INSTALLED = _installed()
_api: ModuleType | None = None
_absent = not INSTALLED  # or its import failed at the first use


def _otel() -> ModuleType | None:
    """opentelemetry.trace, imported at the first use; None when not installed."""
    global _api, _absent
    if _api is None and not _absent:
        try:
            from opentelemetry import trace
        except ImportError:
            _absent = True
            return None
        _api = trace
    return _api


def current_traceparent() -> bytes | None:
    """The current span's context as a traceparent (version 00), or None: no OpenTelemetry,
    or no valid span (the API's default no-op tracer makes none)."""
    if _absent:
        return None
    trace = _otel()
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return b"00-%032x-%016x-%02x" % (context.trace_id, context.span_id, context.trace_flags)


def _parent(traceparent: str | None) -> Any:
    """The remote parent context of a traceparent the server checked (None: a new trace)."""
    trace = _api
    if traceparent is None or trace is None or TRACEPARENT_RE.fullmatch(traceparent.encode()) is None:
        return None
    _version, trace_id, span_id, flags = traceparent.split("-")
    parent = trace.SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True,
                               trace_flags=trace.TraceFlags(int(flags, 16)))
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


_NO_SPAN = nullcontext()  # reusable: enters to None, holds nothing


def job_span(queue: str, key: str | None, attempt: int | None,
             traceparent: str | None) -> AbstractContextManager[Any]:
    """Run a job inside the span `slotmap.job <queue>` (a CONSUMER span continuing the
    producer's trace; attributes queue, key, attempt); an exception escaping it is
    recorded on the span and goes on. Without OpenTelemetry: a shared no-op context."""
    if _absent or _otel() is None:
        return _NO_SPAN
    return _job_span(queue, key, attempt, traceparent)


@contextmanager
def _job_span(queue: str, key: str | None, attempt: int | None,
              traceparent: str | None) -> Iterator[Any]:
    trace = _api
    assert trace is not None
    attributes: dict[str, Any] = {"slotmap.queue": queue}
    if key is not None:
        attributes["slotmap.key"] = key
    if attempt is not None:
        attributes["slotmap.attempt"] = attempt
    tracer = trace.get_tracer("slotmap")
    with tracer.start_as_current_span(SPAN_PREFIX + queue, context=_parent(traceparent),
                                      kind=trace.SpanKind.CONSUMER,
                                      attributes=attributes) as span:
        yield span


def enabled() -> bool:
    """Whether OpenTelemetry is installed (a slot then asks for traces: GET ... TRACES)."""
    return _otel() is not None
