"""Guards refuse to act for a lease the worker runtime has marked lost.

The worker runtime (`tenure.worker`) keeps a process-wide registry of the leases its
handlers hold and decides loss there (renewal rejected, local deadline passed, revoked at
shutdown). Every guard of `tenure.fence` that acts *for* a lease (the SQL fence, the effect
ledger, complete-with-effect, the HTTP client auth) asks it first, and again right before it
commits, and raises `LeaseLost` instead of acting. A token no worker of this process knows
passes: the destination's own fence judges it.

This is a local, best-effort stop (it ends a stale holder's work at its first effect); the
guarantee is still the destination's fence.
"""

from __future__ import annotations

from ..models import FencingToken

__all__ = ["refuse_if_lost"]


def refuse_if_lost(token: FencingToken) -> None:
    """Raise `LeaseLost` if a worker of this process lost (or already settled) the lease
    behind ``token``, or if the running handler's own context says it is lost."""
    from ..worker import check_token, current_context

    check_token(token)
    context = current_context()  # a handler in a child process has no registry entry
    if context is not None and context.token == token:
        context.check()
