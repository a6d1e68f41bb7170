"""The Redis driver's job-control operations (cancel, requeue, delete, purge, a queue's
paused flag, its limit and its rate), async (``_control.py`` is generated from this file): a
mixin of `AsyncRedisDriver`, one script or command each (``lua/cancel.lua``,
``requeue.lua``, ``delete.lua``, ``purge.lua``, ``pause_queue.lua``, ``set_queue_limit.lua``,
``set_queue_rate.lua``; paused_queues, queue_limits and queue_rates are one HVALS each)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from ..._protocol import Outcome
from ._common import Keys, decode_outcome, decode_text

__all__ = ["AsyncRedisControl"]

# Jobs a purge step examines at most: the server is never blocked for long (as list.lua).
_PURGE_BUDGET = 1000
# Jobs a step of index_leases examines at most (the same bound).
_INDEX_BUDGET = 1000


class _Runner(Protocol):
    """What the mixin uses of the driver."""

    @property
    def keys(self) -> Keys: ...

    def _now_arg(self) -> str: ...

    async def _eval(
        self, operation: str, script_name: str, keys: Sequence[str], args: Sequence[str]
    ) -> Any: ...

    async def _send(self, operation: str, command: Sequence[Any]) -> Any: ...


class AsyncRedisControl:
    """Job control for `AsyncRedisDriver` (see `tenure.stores.abc.AsyncDriver`)."""

    async def cancel(self: _Runner, job_id: str, reason: str, takes: Sequence[str]) -> Outcome:
        keys = [self.keys.job(job_id), self.keys.clock]
        reply = await self._eval("cancel", "cancel", keys, [self._now_arg(), reason, *takes])
        return decode_outcome(reply)

    async def requeue(
        self: _Runner, job_id: str, delay: float, reset_attempts: bool, takes: Sequence[str]
    ) -> Outcome:
        keys = [self.keys.job(job_id), self.keys.clock]
        args = [self._now_arg(), repr(float(delay)), "1" if reset_attempts else "0", *takes]
        return decode_outcome(await self._eval("requeue", "requeue", keys, args))

    async def delete(self: _Runner, job_id: str, takes: Sequence[str]) -> Outcome:
        k = self.keys
        keys = [k.job(job_id), k.clock, k.jobs, k.floor]
        return decode_outcome(await self._eval("delete", "delete", keys, [self._now_arg(), *takes]))

    async def purge(
        self: _Runner, states: Sequence[str], older_than: float, limit: int, cursor: str | None
    ) -> tuple[int, str | None]:
        # A step examines at most _PURGE_BUDGET jobs of the listing of every job, from the
        # cursor on: the whole walk is as long as the store, but no script runs for long.
        k = self.keys
        args = [
            self._now_arg(),
            cursor or "",
            str(limit),
            str(_PURGE_BUDGET),
            k.job_prefix,
            repr(float(older_than)),
            *states,
        ]
        reply = await self._eval("purge", "purge", [k.clock, k.jobs, k.floor], args)
        return int(reply[0]), decode_text(reply[1])

    async def set_paused(self: _Runner, queue: str, paused: bool) -> None:
        k = self.keys
        keys = [k.paused, k.candidates(queue), k.wake(queue)]
        await self._eval("pause_queue", "pause_queue", keys, [queue, "1" if paused else "0"])

    async def paused_queues(self: _Runner) -> list[str]:
        names = await self._send("paused_queues", ("HVALS", self.keys.paused))
        return sorted(str(decode_text(name)) for name in names)

    async def set_queue_limit(self: _Runner, queue: str, limit: int | None) -> None:
        k = self.keys
        keys = [k.limits, k.candidates(queue), k.wake(queue)]
        args = [queue, "" if limit is None else str(limit)]
        await self._eval("set_queue_limit", "set_queue_limit", keys, args)

    async def queue_limits(self: _Runner) -> dict[str, int]:
        values = await self._send("queue_limits", ("HVALS", self.keys.limits))
        pairs = (str(decode_text(value)).split(" ", 1) for value in values)
        return {name: int(limit) for limit, name in sorted(pairs, key=lambda pair: pair[1])}

    async def set_queue_rate(self: _Runner, queue: str, rate: tuple[float, int] | None) -> None:
        k = self.keys
        keys = [k.clock, k.rates, k.candidates(queue), k.wake(queue)]
        per_second, burst = ("", "") if rate is None else (repr(float(rate[0])), str(rate[1]))
        args = [self._now_arg(), queue, per_second, burst]
        await self._eval("set_queue_rate", "set_queue_rate", keys, args)

    async def queue_rates(self: _Runner) -> dict[str, tuple[float, int]]:
        values = await self._send("queue_rates", ("HVALS", self.keys.rates))
        # "<per_second> <burst> <tokens> <at> <name>": the name last, as it may hold spaces.
        rows = (str(decode_text(value)).split(" ", 4) for value in values)
        return {
            name: (float(rate), int(burst))
            for rate, burst, _, _, name in sorted(rows, key=lambda row: row[4])
        }

    async def queue_stats(self: _Runner) -> tuple[float, list[tuple[Any, ...]]]:
        """The live jobs of each queue (see `tenure._queue_stats`): one script run
        (``queue_stats.lua``), O(log n) per queue and priority level."""
        k = self.keys
        reply = await self._eval(
            "queue_stats", "queue_stats", [k.clock, k.queues], [self._now_arg()]
        )
        now, *rows = json.loads(reply)
        return float(now), [tuple(row) for row in rows]

    async def index_leases(self: _Runner) -> None:
        """Build the layout-3 bookkeeping of a store written by an older tenure (each
        queue's leases set, the known queues; see ``index_leases.lua``), in bounded steps
        over the listing of every job. Idempotent: each step is exact for the jobs it reads."""
        k = self.keys
        cursor: str | None = ""
        while cursor is not None:
            args = [self._now_arg(), cursor, str(_INDEX_BUDGET), k.job_prefix]
            reply = await self._eval("connect", "index_leases", [k.clock, k.jobs], args)
            cursor = decode_text(reply)
