"""Chaos testing: prove the lease guarantees under faults (``tenure chaos`` / ``tenure check``).

`run_chaos` starts real worker processes (`tenure.Worker`) against a store, the reference
fenced sink, and a seeded nemesis (pauses, claim storms, clock skew, kills, network and
store faults, restarts of a store server of the run's own); it records every operation as
a JSON-lines history. `check_history` verifies the invariants I1-I5 of docs/design.md §5
on such a history, and `write_report` draws it. `PostgresServer` and `RedisServer` are the
throwaway servers it restarts (the tests' too). See docs/reliability.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._checker import INVARIANTS, Verdict, Violation, check_history
    from ._harness import ChaosOptions, ChaosResult, run_chaos, schedule_for, store_kind
    from ._history import Recorder, read_history
    from ._nemesis import KINDS, Fault, make_schedule
    from ._report import CHROMIUM_HINT, chromium, run_origin, write_report
    from ._servers import PostgresServer, RedisServer, ServerMissing, free_port

__all__ = [
    "CHROMIUM_HINT",
    "ChaosOptions",
    "ChaosResult",
    "Fault",
    "INVARIANTS",
    "KINDS",
    "PostgresServer",
    "Recorder",
    "RedisServer",
    "Verdict",
    "ServerMissing",
    "Violation",
    "check_history",
    "chromium",
    "free_port",
    "make_schedule",
    "read_history",
    "run_chaos",
    "run_origin",
    "schedule_for",
    "store_kind",
    "write_report",
]

# Each name is imported from its module when first asked for: a chaos worker or storm
# process imports `tenure.chaos._proc`, and a submodule's package runs first; with eager
# imports each of them paid for the harness, the checker and the report (about 0.1 s of
# CPU a process, some ten processes a run on two cores).
_WHERE = {
    "CHROMIUM_HINT": "_report",
    "ChaosOptions": "_harness",
    "ChaosResult": "_harness",
    "Fault": "_nemesis",
    "INVARIANTS": "_checker",
    "KINDS": "_nemesis",
    "PostgresServer": "_servers",
    "Recorder": "_history",
    "RedisServer": "_servers",
    "ServerMissing": "_servers",
    "Verdict": "_checker",
    "Violation": "_checker",
    "check_history": "_checker",
    "chromium": "_report",
    "free_port": "_servers",
    "make_schedule": "_nemesis",
    "read_history": "_history",
    "run_chaos": "_harness",
    "run_origin": "_report",
    "schedule_for": "_harness",
    "store_kind": "_harness",
    "write_report": "_report",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # asked once
    return value
