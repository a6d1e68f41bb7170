"""OpenTelemetry spans of the worker runtime (``pip install 'tenure[otel]'``).

Without ``opentelemetry-api`` installed this module is a silent no-op: `job_spans` returns
None and `claim_span` a shared null context, so the worker pays one test per job. With the
API but no tracer provider set (no SDK configured), it is the same no-op: the API's spans
would record nothing, so none is made (the application, not a library, decides to trace).
Once the application sets the SDK's `TracerProvider`, the next job is traced. Spans, named
the way the messaging semantic conventions name them:

- ``receive <queue>`` (kind CLIENT) around each claim call of the claim loop, with the number
  of jobs it took (``messaging.batch.message_count``);
- ``process <queue>`` (kind CONSUMER) around the handler, current while it runs (spans the
  handler opens are its children), status ERROR when it raised, died, timed out or lost
  its lease, or its result was refused (not JSON), with an event ``tenure.lease_lost`` when
  the lease is lost. It continues the trace of the job's submit (issue #20): its parent is
  the context extracted from the job's headers (`opentelemetry.propagate.extract`; what
  `Store.submit` injected while a span was current), and that context (its baggage too) is
  current while the handler runs;
- ``settle <queue>`` (kind CLIENT), the handler span's child, around complete, fail or
  release (``tenure.settle.action``: the call sent to the store, ``none`` when none was),
  status ERROR when the lease was lost by then (a call the store rejected as stale too).

Attributes: ``messaging.system`` ``tenure``, ``messaging.destination.name`` the queue,
``messaging.message.id`` the job id, ``messaging.operation.type``, and ``tenure.generation``,
``tenure.attempt``, ``tenure.owner``. No payload, result or lease secret is ever recorded.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..models import Job, Lease

if TYPE_CHECKING:
    from ._lease import LeaseHandle
    from ._outcome import Outcome

try:
    from opentelemetry import context as _context
    from opentelemetry import trace as _trace
except ImportError:  # the otel extra is optional: no spans at all
    _trace = None  # type: ignore[assignment]

__all__ = [
    "JobSpans",
    "claim_span",
    "continued",
    "current_carrier",
    "job_spans",
    "tracing",
]

SYSTEM = "tenure"
_NULL = contextlib.nullcontext()
# Outcome kinds whose handler span ends with status ERROR.
_ERRORS = frozenset({"error", "died", "lost"})


_cached: tuple[Any, Any] | None = None  # (provider, its tracer of tenure)
# The environment named no tracer provider (`_enabled`); `_UNSET`: the API has no such global.
_environment_names_none = False
_UNSET = object()


def _tracer() -> Any:
    global _cached
    from .. import __version__

    assert _trace is not None
    provider = _trace.get_tracer_provider()
    if _cached is None or _cached[0] is not provider:
        _cached = (provider, provider.get_tracer("tenure", __version__))
    return _cached[1]


def _enabled() -> bool:
    """Whether the application set a real `TracerProvider` (the SDK's): until it does, the
    API's spans record nothing, so none is made at all (checked per claim, so a
    provider set later is used from the next claim on)."""
    global _environment_names_none
    if _trace is None:
        return False
    # `get_tracer_provider` reads the environment (OTEL_PYTHON_TRACER_PROVIDER) at each call
    # while no provider is set, a microsecond a claim. A provider set in code is in the
    # API's global at once; the environment is read at the first claim only, as nobody
    # sets that variable in a running process.
    if _environment_names_none and getattr(_trace, "_TRACER_PROVIDER", _UNSET) is None:
        return False
    provider = _trace.get_tracer_provider()
    if isinstance(provider, (_trace.ProxyTracerProvider, _trace.NoOpTracerProvider)):
        _environment_names_none = True
        return False
    return True


def _destination(queues: Sequence[str]) -> str:
    return queues[0] if len(queues) == 1 else ",".join(queues)


def claim_span(owner: str, queues: Sequence[str]) -> Any:
    """A context manager around one claim call: the span (or None without OTel)."""
    if not _enabled():
        return _NULL
    return _claim_span(owner, queues)


@contextlib.contextmanager
def _claim_span(owner: str, queues: Sequence[str]) -> Iterator[Any]:
    assert _trace is not None
    destination = _destination(queues)
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "receive",
        "messaging.operation.name": "claim",
        "messaging.destination.name": destination,
        "tenure.owner": owner,
    }
    with _tracer().start_as_current_span(
        f"receive {destination}", kind=_trace.SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield span


class JobSpans:
    """The spans of one job in flight: its handler span, then its settle span."""

    def __init__(self, job: Job, lease: Lease) -> None:
        assert _trace is not None
        self._attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": job.queue,
            "messaging.message.id": job.job_id,
            "tenure.generation": lease.generation,
            "tenure.attempt": lease.attempt,
            "tenure.owner": lease.owner,
        }
        self.queue = job.queue
        self.handler: Any = None
        self.settle: Any = None
        # What the settle did, told by `Settler`: the store call it sent last ("none": none),
        # the store's rejection of it as stale, the error of a result the store refused.
        self._action = "none"
        self._rejected: str | None = None
        self._refused: BaseException | None = None
        # When a handler that returned ended (`time.time_ns`): its span, still open, waits
        # for the settle to say whether its result took effect (`_settled`).
        self._returned_at: int | None = None
        # The trace of the job's submit, None: the job carries none (a job submitted with no
        # span current, or before headers existed). The handler span is its child, not a
        # new trace with a link to it: a trace runs from the request that enqueued to the
        # work done (issue #20), every attempt a child of the one submit. (A claim takes
        # jobs of many traces at once, so the claim span stays a trace of its own.)
        self.parent: Any = _extracted(job.headers) if job.headers else None

    @contextlib.contextmanager
    def handling(self) -> Iterator[None]:
        """The handler span, current while the handler runs (ended by `handled`)."""
        assert _trace is not None
        self.handler = _tracer().start_span(
            f"process {self.queue}",
            context=self.parent,
            kind=_trace.SpanKind.CONSUMER,
            attributes={**self._attributes, "messaging.operation.type": "process"},
        )
        # The submit's context is current under the span: its baggage reaches the handler.
        token = None if self.parent is None else _context.attach(self.parent)
        try:
            with _trace.use_span(self.handler, end_on_exit=False, record_exception=False):
                yield
        except BaseException:
            # Only the worker's own cancellation gets here (a handler's exception is its
            # outcome): the job is given back.
            self.handler.set_status(_trace.Status(_trace.StatusCode.ERROR, "worker cancelled"))
            self.handler.end()
            self.handler = None
            raise
        finally:
            if token is not None:
                _context.detach(token)

    def handled(self, outcome: Outcome, handle: LeaseHandle) -> None:
        span = self.handler
        if span is None:
            return
        span.set_attribute("tenure.outcome", outcome.kind)
        lost = _lost(handle, "revoked")
        if lost is not None and outcome.kind not in _ERRORS:
            # It returned, but after its lease was lost (nothing it did is settled) or past
            # its timeout (the attempt is failed).
            span.set_status(_trace.Status(_trace.StatusCode.ERROR, lost))
        elif outcome.kind in _ERRORS:
            _failed(span, outcome.error if outcome.error is not None else outcome.kind)
        elif outcome.kind == "ok":
            # OK unless the settle finds its result refused or its lease lost: `_settled`
            # says which, and ends the span at this time.
            self._returned_at = time.time_ns()
            return
        span.end()

    @contextlib.contextmanager
    def settling(self, handle: LeaseHandle) -> Iterator[None]:
        """The settle span, the handler span's child: its action is the store call the
        settle sent (`sent`), ``none`` when it sent none; ERROR when the lease was lost by
        the time the settle ended, or the store rejected the call as stale (nothing, or not
        all, took effect)."""
        assert _trace is not None
        parent = _trace.set_span_in_context(self.handler) if self.handler is not None else None
        self._action = "none"
        self.settle = _tracer().start_span(
            f"settle {self.queue}",
            context=parent,
            kind=_trace.SpanKind.CLIENT,
            attributes={**self._attributes, "messaging.operation.type": "settle"},
        )
        try:
            yield
        finally:
            self._settled(handle)

    def sent(self, action: str) -> None:
        """The settle sends ``action`` (complete, fail, release) to the store."""
        self._action = action

    def rejected(self, error: BaseException) -> None:
        """The store rejected the settle's call as stale: the lease was lost there."""
        self._rejected = str(error)[:300] or "lease lost"

    def refused(self, error: BaseException) -> None:
        """The store refused the handler's result (not JSON, too large) before it was sent:
        nothing was completed, the attempt is failed instead, and the handler span is an
        ERROR with ``error`` as a handler's exception."""
        self._action = "none"
        self._refused = error

    def _settled(self, handle: LeaseHandle) -> None:
        """End the settle span, and the span of a handler that returned (at the time it
        did): ERROR when the lease was lost (the settle span: not at a timeout, when the
        attempt is failed), the handler span also when its result was refused."""
        assert _trace is not None
        settle, action = self.settle, self._action
        settle.set_attributes({"messaging.operation.name": action, "tenure.settle.action": action})
        lost = self._rejected or _lost(handle, "timed_out", "revoked")
        if lost is not None:
            settle.set_status(_trace.Status(_trace.StatusCode.ERROR, lost))
        settle.end()
        returned_at, self._returned_at = self._returned_at, None
        span = self.handler
        if returned_at is None or span is None:
            return
        lost = self._rejected or _lost(handle, "revoked")
        if lost is not None:
            span.set_status(_trace.Status(_trace.StatusCode.ERROR, lost))
        elif self._refused is not None:
            _failed(span, self._refused, returned_at)
        else:
            span.set_status(_trace.Status(_trace.StatusCode.OK))
        span.end(end_time=returned_at)

    def lost(self, handle: LeaseHandle) -> None:
        """Any thread, once: the lease was lost; an event on the span open now."""
        attributes = {
            "tenure.lease.lost_kind": str(handle.lost_kind),
            "tenure.lease.lost_reason": str(handle.lost_reason),
        }
        for span in (self.settle, self.handler):
            if span is not None and span.is_recording():
                span.add_event("tenure.lease_lost", attributes)
                return


def _lost(handle: LeaseHandle, *spared: str) -> str | None:
    """Why ``handle``'s lease is lost (a span's status description), None if it is not or
    was lost in a way of ``spared``."""
    if handle.is_lost() and handle.lost_kind not in spared:
        return (handle.lost_reason or "lease lost")[:300]
    return None


def _failed(span: Any, error: BaseException | str, at: int | None = None) -> None:
    """``span`` is an ERROR for ``error`` (with an exception event when it is one)."""
    assert _trace is not None
    if isinstance(error, BaseException):
        span.record_exception(error, timestamp=at)
    span.set_status(_trace.Status(_trace.StatusCode.ERROR, str(error)[:300]))


def _extracted(headers: Mapping[str, str]) -> Any:
    """The context carried in ``headers`` (a job's, or `current_carrier`'s) through the
    application's propagator (W3C trace context by default), or None when a propagator of
    its own failed on them."""
    try:
        # Imported here: it loads the configured propagators (10-20 ms), which a worker
        # whose jobs carry no headers never needs.
        from opentelemetry import propagate

        return propagate.extract(headers)
    except Exception:  # the job runs all the same, in a trace of its own
        return None


def current_carrier() -> dict[str, str] | None:
    """The current trace context (its baggage too) as propagator headers, for a handler's
    child process (`isolation="process"`), or None when no span is current. The child
    cannot share the worker's context variables, so the context crosses the pipe as the
    headers a job carries cross the store."""
    if _trace is None or not _trace.get_current_span().get_span_context().is_valid:
        return None
    try:
        from opentelemetry import propagate

        carrier: dict[str, str] = {}
        propagate.inject(carrier)
    except Exception:  # a propagator of the application's own failed: no trace, same job
        return None
    return carrier or None


@contextlib.contextmanager
def continued(carrier: dict[str, str] | None) -> Iterator[None]:
    """In a handler's child process: the worker's handler span (from `current_carrier`)
    current while the handler runs, so spans it opens are that span's children and the
    submit's baggage reaches it, as with the other isolation modes."""
    extracted = _extracted(carrier) if carrier and _trace is not None else None
    # None: the handler runs all the same, in a trace of its own.
    token = None if extracted is None else _context.attach(extracted)
    try:
        yield
    finally:
        if token is not None:
            _context.detach(token)


def tracing() -> bool:
    """Whether jobs are traced now (OpenTelemetry installed and a tracer provider set):
    asked once per claim, as finding the provider reads the environment."""
    return _enabled()


def job_spans(job: Job, lease: Lease) -> JobSpans | None:
    """The spans of a job about to run, or None when OpenTelemetry is not installed or no
    tracer provider is set."""
    if not _enabled():
        return None
    return JobSpans(job, lease)
