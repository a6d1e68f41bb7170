"""OpenTelemetry spans of the worker runtime, recorded by the SDK's in-memory exporter, on
every store: claim, handler and settle spans with their attributes, ERROR on failures, an
event when the lease is lost; the trace context a submit puts in its job's headers, and
the handler span that continues that trace (issue #20)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import tenure
from tenure.worker import JobContext
from tests.worker import apps
from tests.worker._support import run_burst, running, until_lost, wait_until

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import baggage, context, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

MakeWorker = Callable[..., tenure.Worker]
TTL = 10.0
_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The exporter of the process's one SDK provider (OTel allows setting it once)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def _named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def _one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = _named(exporter, name)
    assert len(found) == 1, [span.name for span in exporter.get_finished_spans()]
    return found[0]


def test_claim_handler_and_settle_spans_carry_the_job(
    make_worker: MakeWorker, store: tenure.Store, spans: InMemorySpanExporter
) -> None:
    worker = make_worker(owner="W")
    inner: list[Any] = []

    @worker.handler("q")
    def handle(ctx: JobContext) -> str:
        # The handler span is current: a span the handler opens is its child.
        with trace.get_tracer("app").start_as_current_span("work") as span:
            inner.append(span.get_span_context())
        return "ok"

    store.submit("J1", {"secret": "not recorded"}, queue="q")
    run_burst(worker)
    assert store.get("J1").state == "done"

    process = _one(spans, "process q")
    assert process.kind == SpanKind.CONSUMER
    assert process.status.status_code == StatusCode.OK
    attributes = dict(process.attributes or {})
    assert attributes == {
        "messaging.system": "tenure",
        "messaging.destination.name": "q",
        "messaging.message.id": "J1",
        "messaging.operation.type": "process",
        "tenure.generation": 1,
        "tenure.attempt": 1,
        "tenure.owner": "W",
        "tenure.outcome": "ok",
    }
    work = _one(spans, "work")
    assert work.parent is not None
    assert work.parent.span_id == process.context.span_id
    assert work.context.trace_id == process.context.trace_id

    settle = _one(spans, "settle q")
    assert settle.parent is not None
    assert settle.parent.span_id == process.context.span_id
    assert settle.attributes is not None
    assert settle.attributes["tenure.settle.action"] == "complete"
    assert settle.attributes["messaging.operation.type"] == "settle"
    assert settle.status.status_code == StatusCode.UNSET

    receives = _named(spans, "receive q")
    assert receives, "no claim span"
    counts = [span.attributes["messaging.batch.message_count"] for span in receives]  # type: ignore[index]
    assert sum(counts) == 1
    assert all(span.kind == SpanKind.CLIENT for span in receives)
    # No payload, result or secret in any attribute.
    for span in spans.get_finished_spans():
        assert "not recorded" not in repr(dict(span.attributes or {}))


def test_a_failing_handler_span_is_an_error_and_the_settle_a_fail(
    make_worker: MakeWorker, store: tenure.Store, spans: InMemorySpanExporter
) -> None:
    worker = make_worker()

    @worker.handler("q")
    def handle(ctx: JobContext) -> None:
        raise ValueError("boom")

    store.submit("J2", queue="q", max_attempts=1)
    run_burst(worker)
    assert store.get("J2").state == "dead"
    process = _one(spans, "process q")
    assert process.status.status_code == StatusCode.ERROR
    assert "boom" in (process.status.description or "")
    assert [event.name for event in process.events] == ["exception"]
    assert process.attributes is not None
    assert process.attributes["tenure.outcome"] == "error"
    settle = _one(spans, "settle q")
    assert settle.attributes is not None
    assert settle.attributes["tenure.settle.action"] == "fail"


def test_a_lost_lease_is_an_event_and_an_error(
    make_worker: MakeWorker,
    store: tenure.Store,
    clock: tenure.ManualClock,
    spans: InMemorySpanExporter,
) -> None:
    worker = make_worker(owner="A")
    started: list[bool] = []

    @worker.handler("q")
    def loop_until_lost(ctx: JobContext) -> str:
        started.append(True)
        deadline = time.monotonic() + 10
        while not ctx.lost and time.monotonic() < deadline:
            time.sleep(0.002)
        return "stale"

    store.submit("J3", queue="q")
    with running(worker):
        wait_until(lambda: started, what="handler start")
        clock.suspend(2 * TTL)  # the store sees the lease expired; another owner takes it
        lease_b = store.claim_next("B", TTL, queues=["q"])
        assert lease_b is not None
        clock.advance(TTL / 2.5)  # a renewal falls due and is rejected
        wait_until(lambda: worker.stats()["completions_refused"] == 1, what="refusal")
    process = _one(spans, "process q")
    lost = [event for event in process.events if event.name == "tenure.lease_lost"]
    assert len(lost) == 1
    assert lost[0].attributes is not None
    assert lost[0].attributes["tenure.lease.lost_kind"] == "renewal_rejected"
    assert process.status.status_code == StatusCode.ERROR
    settle = _one(spans, "settle q")
    assert settle.status.status_code == StatusCode.ERROR
    store.complete(lease_b, "by B")


# -- what the settle span says was sent: the action the store got, or none -------------


def _settled(spans: InMemorySpanExporter) -> tuple[ReadableSpan, ReadableSpan, str]:
    """The job's handler span, its settle span and the settle's action."""
    settle = _one(spans, "settle q")
    assert settle.attributes is not None
    action = settle.attributes["tenure.settle.action"]
    assert settle.attributes["messaging.operation.name"] == action
    return _one(spans, "process q"), settle, str(action)


@pytest.mark.parametrize("kind", ["async", "thread", "process"])
def test_a_timed_out_attempt_is_settled_with_a_fail(
    make_worker: MakeWorker,
    store: tenure.Store,
    clock: tenure.ManualClock,
    spans: InMemorySpanExporter,
    tmp_path: Path,
    kind: str,
) -> None:
    # The lease is still the worker's at the timeout: the attempt is failed, not dropped.
    worker = make_worker()
    started = threading.Event()

    async def hung(ctx: JobContext) -> None:
        started.set()
        await anyio.sleep(60)

    def hung_sync(ctx: JobContext) -> str:
        started.set()
        deadline = time.monotonic() + 10
        while not ctx.lost and time.monotonic() < deadline:
            time.sleep(0.002)
        return "stale"

    if kind == "process":
        worker.register("q", apps.never_returns, isolation="process", timeout=5)
    else:
        worker.register("q", hung if kind == "async" else hung_sync, timeout=5)
    events = tmp_path / "events.jsonl"
    store.submit("J", {"events": str(events)}, queue="q", max_attempts=1)
    with running(worker):
        wait_until(lambda: started.is_set() or apps.read_events(events), what="handler start")
        clock.advance(5.1)
        wait_until(lambda: worker.stats()["dead"] == 1, what="the failed attempt")
    assert store.get("J").error == "timeout: handler ran longer than 5 s"
    process, settle, action = _settled(spans)
    assert action == "fail"
    assert settle.status.status_code == StatusCode.UNSET  # the fail took effect
    assert process.status.status_code == StatusCode.ERROR


def test_a_handler_that_returns_after_its_lease_was_lost_settles_nothing(
    make_worker: MakeWorker,
    store: tenure.Store,
    clock: tenure.ManualClock,
    spans: InMemorySpanExporter,
) -> None:
    worker = make_worker()
    started = threading.Event()
    worker.register("q", until_lost(started, {}))
    store.submit("J", queue="q")
    with running(worker):
        assert started.wait(10)
        store.cancel("J", "operator said so")
        clock.advance(TTL / 2.5)  # a renewal falls due and is refused
        wait_until(lambda: worker.stats()["completions_refused"] == 1, what="refusal")
    assert store.get("J").state == "cancelled"
    process, settle, action = _settled(spans)
    assert action == "none"  # the result was discarded: nothing went to the store
    assert settle.status.status_code == StatusCode.ERROR
    assert process.status.status_code == StatusCode.ERROR


def test_a_result_the_store_refuses_fails_the_attempt_as_a_raise_does(
    make_worker: MakeWorker, store: tenure.Store, spans: InMemorySpanExporter
) -> None:
    worker = make_worker()
    worker.register("q", lambda ctx: {1, 2})  # not JSON
    store.submit("J", queue="q", max_attempts=1)
    run_burst(worker)
    job = store.get("J")
    assert job.state == "dead"
    assert "refused" in (job.error or "")
    process, settle, action = _settled(spans)
    assert action == "fail"
    assert settle.status.status_code == StatusCode.UNSET
    assert process.status.status_code == StatusCode.ERROR
    assert process.attributes is not None
    assert process.attributes["tenure.outcome"] == "ok"  # it returned, and what it returned
    assert [event.name for event in process.events] == ["exception"]  # was refused


def test_a_completion_rejected_as_stale_is_an_error(
    make_worker: MakeWorker, store: tenure.Store, spans: InMemorySpanExporter
) -> None:
    # Cancelled while the handler runs, which returns before any renewal finds out: the
    # completion is sent, and the store rejects it, the lease being lost there.
    worker = make_worker()
    started, cancelled = threading.Event(), threading.Event()

    def handle(ctx: JobContext) -> str:
        started.set()
        assert cancelled.wait(10)
        return "late"

    worker.register("q", handle)
    store.submit("J", queue="q")
    with running(worker):
        assert started.wait(10)
        store.cancel("J", "operator said so")
        cancelled.set()
        wait_until(lambda: worker.stats()["stale_rejections"] == 1, what="the rejection")
    assert store.get("J").state == "cancelled"
    assert worker.stats()["completed"] == 0
    process, settle, action = _settled(spans)
    assert action == "complete"  # sent, and rejected
    assert settle.status.status_code == StatusCode.ERROR
    assert process.status.status_code == StatusCode.ERROR


def test_without_the_api_nothing_is_traced(
    make_worker: MakeWorker,
    store: tenure.Store,
    spans: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As if opentelemetry-api were not installed: the module's import found nothing.
    from tenure.worker import _telemetry

    monkeypatch.setattr(_telemetry, "_trace", None)
    worker = make_worker()
    worker.register("q", lambda ctx: "ok")
    store.submit("J4", queue="q")
    run_burst(worker)
    assert store.get("J4").state == "done"
    assert spans.get_finished_spans() == ()


# -- trace context from submit to handler (issue #20) ------------------------------------


def test_the_handler_span_continues_the_trace_of_the_submit(
    make_worker: MakeWorker, store: tenure.Store, spans: InMemorySpanExporter
) -> None:
    worker = make_worker()
    seen: list[Any] = []

    @worker.handler("q")
    def handle(ctx: JobContext) -> str:
        # The worker runs on a thread of its own: what reaches the handler came in the job.
        seen.append((dict(ctx.job.headers), baggage.get_baggage("tenant")))
        return "ok"

    with trace.get_tracer("app").start_as_current_span("request") as request:
        token = context.attach(baggage.set_baggage("tenant", "t1"))
        try:
            job = store.submit("J", queue="q")
        finally:
            context.detach(token)
    assert job.headers["traceparent"].split("-")[1] == format(
        request.get_span_context().trace_id, "032x"
    )
    run_burst(worker)
    assert store.get("J").state == "done"

    submit = _one(spans, "request")
    process = _one(spans, "process q")
    assert process.context.trace_id == submit.context.trace_id
    assert process.parent is not None
    assert process.parent.span_id == submit.context.span_id
    assert process.parent.is_remote  # extracted from the job's headers
    settle = _one(spans, "settle q")
    assert settle.context.trace_id == submit.context.trace_id
    [(headers, tenant)] = seen
    assert headers == dict(job.headers)
    assert set(headers) == {"traceparent", "baggage"}
    assert tenant == "t1"  # the submit's baggage is current in the handler


def test_a_process_handler_continues_the_handler_span(
    make_worker: MakeWorker, store: tenure.Store, spans: InMemorySpanExporter
) -> None:
    # isolation="process": the handler span (and the submit's baggage) is current in the
    # child too, so spans the child opens join the trace.
    worker = make_worker()
    worker.register("q", apps.trace_seen, isolation="process")
    with trace.get_tracer("app").start_as_current_span("request") as request:
        token = context.attach(baggage.set_baggage("tenant", "t1"))
        try:
            store.submit("J", queue="q")
        finally:
            context.detach(token)
    run_burst(worker)
    job = store.get("J")
    assert job.state == "done", job.error
    process = _one(spans, "process q")
    assert process.context.trace_id == request.get_span_context().trace_id
    assert job.result["pid"] != os.getpid()
    assert job.result["trace_id"] == format(process.context.trace_id, "032x")
    assert job.result["span_id"] == format(process.context.span_id, "016x")
    assert job.result["tenant"] == "t1"


def test_submit_injects_the_current_context_unless_given(
    store: tenure.Store, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store.submit("none").headers == {}  # no span current: nothing injected
    mine = "00-11111111111111111111111111111111-2222222222222222-01"
    with trace.get_tracer("app").start_as_current_span("request") as request:
        trace_id = format(request.get_span_context().trace_id, "032x")
        own = store.submit("own", headers={"traceparent": mine, "x-tenant": "t"})
        [a, b] = store.submit_many([{"job_id": "a"}, {"job_id": "b", "headers": {"x-tenant": "u"}}])
        # As if opentelemetry were not installed: no module, nothing injected, no error.
        monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)  # type: ignore[arg-type]
        without = store.submit("without", headers={"k": "v"})
        [batch] = store.submit_many([{"job_id": "c"}])
        monkeypatch.undo()
    assert own.headers == {"traceparent": mine, "x-tenant": "t"}  # the caller's own wins
    assert a.headers["traceparent"].split("-")[1] == trace_id
    assert b.headers["traceparent"] == a.headers["traceparent"]
    assert b.headers["x-tenant"] == "u"
    assert (without.headers, batch.headers) == ({"k": "v"}, {})
    assert store.get("b").headers == b.headers


def test_a_job_without_headers_is_a_trace_of_its_own(
    make_worker: MakeWorker, store: tenure.Store, spans: InMemorySpanExporter
) -> None:
    worker = make_worker()
    worker.register("q", lambda ctx: "ok")
    store.submit("J", queue="q", headers={"traceparent": "not a trace context"})
    run_burst(worker)
    process = _one(spans, "process q")
    assert process.parent is None


def test_a_provider_set_in_code_is_seen_at_the_next_claim_without_reading_the_environment(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `tracing()` runs once per claim: with no provider set, the API's
    # get_tracer_provider reads the environment each time; tenure reads it once.
    from tenure.worker import _telemetry

    sdk_provider = trace.get_tracer_provider()
    assert isinstance(sdk_provider, TracerProvider)
    monkeypatch.delenv("OTEL_PYTHON_TRACER_PROVIDER", raising=False)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)  # as in a process that set none
    monkeypatch.setattr(_telemetry, "_environment_names_none", False)
    asked: list[object] = []
    real = trace.get_tracer_provider

    def counted() -> Any:
        asked.append(None)
        return real()

    monkeypatch.setattr(trace, "get_tracer_provider", counted)
    assert [_telemetry.tracing() for _ in range(5)] == [False] * 5
    assert len(asked) == 1
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", sdk_provider)  # set_tracer_provider's work
    assert _telemetry.tracing() is True
