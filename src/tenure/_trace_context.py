"""The trace context a submit carries into its job's headers (issue #20).

With OpenTelemetry in use and a span current, `Store.submit` (and `submit_many`, each job)
adds the current context to the job's headers through the application's propagator
(`opentelemetry.propagate.inject`: W3C ``traceparent`` and ``tracestate``, and ``baggage``
by default), so that the worker's handler span continues the trace of the request that
enqueued (tenure.worker's telemetry extracts it again). Headers the caller passed win over
the injected ones of the same name.

OpenTelemetry is an optional extra and nothing here imports it unless it is in use: no
span can be current unless ``opentelemetry.trace`` was imported already, so without it a
submit pays one dictionary look-up.
"""

from __future__ import annotations

import sys
from typing import Any

from ._validate import MAX_HEADERS, MAX_HEADERS_SIZE, validate_headers

__all__ = ["job_headers", "trace_headers"]


def trace_headers() -> dict[str, str]:
    """The current trace context as headers, or {} (OpenTelemetry not installed or not
    imported, no valid span current, or a propagator that failed or broke the headers'
    rules)."""
    trace: Any = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return {}
    try:
        if not trace.get_current_span().get_span_context().is_valid:
            return {}
        from opentelemetry import propagate

        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        # Held to the rules of the caller's own headers: a propagator's odd output is
        # dropped, not stored.
        return validate_headers(carrier)
    except Exception:  # a propagator of the application's that failed: submit all the same
        return {}


def job_headers(explicit: dict[str, str], injected: dict[str, str]) -> dict[str, str]:
    """A job's headers: the injected trace context under the caller's own (a name the
    caller gave keeps the caller's value). The injected ones are left out if the two
    together would break the headers' bounds (the caller's were checked alone)."""
    if not injected:
        return explicit
    merged = {**injected, **explicit}
    size = sum(len(name) + len(value) for name, value in merged.items())
    if len(merged) > MAX_HEADERS or size > MAX_HEADERS_SIZE:
        return explicit
    return merged
