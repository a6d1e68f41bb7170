"""The suite in two phases on pytest-xdist workers: first everything that is round trips to
a store, spread over the workers; then the tests of real time, one after another on one
worker with the machine to itself.

Tests of real time with processes of their own (chaos runs, worker processes under pauses
and kills, throwaway servers, process races) have bounds about the code: a pause point
reached within 3 s, a loss noticed within 100 ms, no re-execution across a store restart.
On a 2-core machine they hold when nothing else runs; beside a second worker's tests they
did not always (two full runs under ``--dist loadgroup`` each had a load-explained failure:
an unsafe chaos run's pauses not reached, the HOT share of renewals at 84 of 480).
So the second phase starts only once every other worker has finished and left.
"""

from __future__ import annotations

from typing import Any

REAL_TIME_MODULES = (
    "tests/chaos/test_runs.py",
    "tests/chaos/test_cancel_fault.py",
    "tests/chaos/test_lock_runs.py",
    "tests/chaos/test_flow_runs.py",
    "tests/chaos/test_report.py",
    "tests/chaos/test_outages.py",
    "tests/worker/test_processes.py",
    "tests/worker/test_periodic_fleet.py",
    "tests/worker/test_store_outage.py",
    "tests/worker/test_start_outage.py",
    "tests/locks/test_processes.py",
    "tests/postgres/test_failover.py",
    "tests/postgres/test_chaos.py",
    "tests/postgres/test_time.py",
    "tests/postgres/test_restore.py",
    # A half-second lease held across its expiry: its calls must be sent before it ends.
    "tests/conformance/test_store_time_inside.py",
)
# Last of all (also in a serial run, `-n 0`): a store server of the run's own restarted and
# killed, a failover under workers, and the HOT share of renewals (old row versions are
# pruned only once no snapshot can see them, so another test's open transactions lower it).
REAL_TIME_LAST = (
    "tests/chaos/test_store_faults.py",
    "tests/chaos/test_failover_fault.py",
    "tests/postgres/test_hot.py",
)
REAL_TIME = "(tests of real time)"


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def is_real_time(nodeid: str) -> bool:
    module = module_of(nodeid)
    return (
        module in REAL_TIME_MODULES
        or module in REAL_TIME_LAST
        or (module.startswith("tests/conformance/test_") and "race" in module)
    )


def make_scheduler(config: Any, log: Any) -> Any:
    """`RealTimeLast`, built on pytest-xdist's ``loadscope`` scheduler (its own import, so
    that a run without pytest-xdist never needs it)."""
    from xdist.scheduler import LoadScopeScheduling

    class RealTimeLast(LoadScopeScheduling):  # type: ignore[misc]
        """Modules go to whichever worker is free (the ones with the most tests first), as
        in ``--dist loadscope``; the tests of real time are one unit, queued last and handed
        to one worker only once every other worker has finished its share and left."""

        runner: Any = None

        def _split_scope(self, nodeid: str) -> str:
            return REAL_TIME if is_real_time(nodeid) else module_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            if any(scope != REAL_TIME for scope in self.workqueue):
                if REAL_TIME in self.workqueue:
                    self.workqueue.move_to_end(REAL_TIME)
                super()._assign_work_unit(node)
                return
            # Only the tests of real time are left. A worker runs a test once it knows the
            # next one (or is told to stop), so a worker with one test left is done with
            # everything but that one, which it holds.
            if self._pending_of(self.assigned_work[node]) > 1:
                return
            if self.runner is None:
                self.runner = node
            if node is not self.runner:
                node.shutdown()  # runs its last test and leaves (remove_node below)
            elif len(self.assigned_work) == 1:
                super()._assign_work_unit(node)

        def remove_node(self, node: Any) -> str | None:
            crashed: str | None = super().remove_node(node)
            runner = self.runner
            if runner is node:
                self.runner = None  # it crashed: whoever is free next runs them
            elif (
                runner is not None
                and list(self.assigned_work) == [runner]
                and self.workqueue
                and next(iter(self.workqueue)) == REAL_TIME
            ):
                super()._assign_work_unit(runner)
            return crashed

    return RealTimeLast(config, log)
