"""Handlers the worker tests run: in the test process, in worker subprocesses started with
``tenure worker tests.worker.apps:app``, and in handler child processes (so they live at
the top level of an importable module).

Handlers report what they do as JSON lines appended to the file named by the payload's
``events`` key: ``{"what", "job", "gen", "owner", "pid", "t"}``, where ``t`` is
``time.monotonic()``, one clock for every process of the host. A payload's ``hold`` is how
long the handler works when the job's generation is at most ``hold_generations``
(default 1): so a job is slow for the first worker and quick for the one that takes over.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio

import tenure
from tenure.worker import JobContext

app = tenure.Worker()


def event(ctx: JobContext, what: str, **extra: Any) -> None:
    path = ctx.payload.get("events") if isinstance(ctx.payload, dict) else None
    if not path:
        return
    record = {
        "what": what,
        "job": ctx.job_id,
        "gen": ctx.lease.generation,
        "owner": ctx.lease.owner,
        "pid": os.getpid(),
        "t": time.monotonic(),
        **extra,
    }
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")


def read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]


def _hold(ctx: JobContext) -> float:
    payload = ctx.payload if isinstance(ctx.payload, dict) else {}
    if ctx.lease.generation <= payload.get("hold_generations", 1):
        return float(payload.get("hold", 0.0))
    return 0.0


def _result(ctx: JobContext) -> dict[str, Any]:
    return {"owner": ctx.lease.owner, "generation": ctx.lease.generation}


@app.handler("sync")
def hold_sync(ctx: JobContext) -> Any:
    """Works for `hold` seconds, checking ctx.lost as it goes; returns a stale result if
    the lease is lost (which the worker must refuse to complete)."""
    event(ctx, "start")
    end = time.monotonic() + _hold(ctx)
    while time.monotonic() < end:
        if ctx.lost:
            event(ctx, "lost", reason=ctx.lost_reason)
            return {"stale": True, **_result(ctx)}
        time.sleep(0.002)
    event(ctx, "done")
    return _result(ctx)


@app.handler("async")
async def hold_async(ctx: JobContext) -> Any:
    """Works for `hold` seconds in small awaits; records its cancellation."""
    event(ctx, "start")
    try:
        await anyio.sleep(_hold(ctx))
    except anyio.get_cancelled_exc_class():
        event(ctx, "cancelled", lost=ctx.lost)
        raise
    event(ctx, "done")
    return _result(ctx)


@app.handler("proc", isolation="process")
def hold_process(ctx: JobContext) -> Any:
    """Runs in a child process and writes a heartbeat every 5 ms while it works."""
    event(ctx, "start")
    end = time.monotonic() + _hold(ctx)
    while time.monotonic() < end:
        event(ctx, "alive")
        time.sleep(0.005)
    event(ctx, "done")
    return _result(ctx)


@app.handler("poison")
def poison(ctx: JobContext) -> None:
    """Kills the whole worker process, every time."""
    event(ctx, "start")
    os.kill(os.getpid(), signal.SIGKILL)


@app.handler("poison-proc", isolation="process")
def poison_process(ctx: JobContext) -> None:
    """Kills its own (child) process, every time."""
    event(ctx, "start")
    os.kill(os.getpid(), signal.SIGKILL)


def trace_seen(ctx: JobContext) -> dict[str, Any]:
    """The trace context current in the handler (run with process isolation: the child's)."""
    from opentelemetry import baggage, trace

    span = trace.get_current_span().get_span_context()
    return {
        "trace_id": format(span.trace_id, "032x"),
        "span_id": format(span.span_id, "016x"),
        "tenant": baggage.get_baggage("tenant"),
        "pid": os.getpid(),
    }


def write_pid_and_sleep(ctx: JobContext) -> str:
    """For process isolation with a ManualClock: the first attempt sleeps until killed."""
    if ctx.lease.generation > 1:
        return "second"
    event(ctx, "start")
    for _ in range(6000):
        time.sleep(0.005)
    return "first"


def return_payload(ctx: JobContext) -> Any:
    return ctx.payload


def never_returns(ctx: JobContext) -> str:
    """For timeouts with process isolation: records its start and its pid, then sleeps
    (never looking at ctx.lost) until killed, at most 60 s."""
    event(ctx, "start")
    for _ in range(12_000):
        time.sleep(0.005)
    return "returned"
