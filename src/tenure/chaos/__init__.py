"""Chaos testing: prove the lease guarantees under faults (``tenure chaos`` / ``tenure check``).

`run_chaos` starts real worker processes (`tenure.Worker`) against a store, the reference
fenced sink, and a seeded nemesis (pauses, claim storms, clock skew, kills, network and
store faults, restarts of a store server of the run's own); it records every operation as
a JSON-lines history. `check_history` verifies the invariants I1-I5 of docs/design.md §5
on such a history, and `write_report` draws it. `PostgresServer` and `RedisServer` are the
throwaway servers it restarts (the tests' too). See docs/reliability.md.
"""

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
