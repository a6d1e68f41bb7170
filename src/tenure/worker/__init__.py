"""The worker runtime: run handlers under leases, renew in the background, stop at loss.

::

    import tenure

    worker = tenure.Worker("sqlite:///tenure.db", concurrency=4, ttl=30)

    @worker.handler("emails")
    async def send(ctx: tenure.JobContext) -> None:
        await mailer.send(ctx.payload, idempotency_key=str(ctx.token))

    worker.run()          # or: tenure worker myapp:worker

See docs/worker.md. For fenced destinations: `token_state` / `check_token` tell whether a
worker of this process still holds the lease behind a token.
"""

from ._config import Handler, Isolation, default_owner
from ._context import JobContext, current_context
from ._keeper import LeaseKeeper, Renewer
from ._lease import REGISTRY, LeaseHandle, TokenState, check_token, token_state
from ._loop import LoopCaller
from ._metrics import MetricsServer, WorkerCollector, serve_metrics
from ._periodic import SCHEDULES_EVERY
from ._stats import COUNTERS, HANDLER_BUCKETS, Stats
from ._worker import Worker

__all__ = [
    "COUNTERS",
    "HANDLER_BUCKETS",
    "Handler",
    "Isolation",
    "JobContext",
    "LeaseHandle",
    "LeaseKeeper",
    "LoopCaller",
    "MetricsServer",
    "REGISTRY",
    "Renewer",
    "SCHEDULES_EVERY",
    "Stats",
    "TokenState",
    "Worker",
    "WorkerCollector",
    "check_token",
    "current_context",
    "default_owner",
    "serve_metrics",
    "token_state",
]
