"""The Redis driver's enqueue-and-wait operations (issue #17), async (``_jobs.py`` is
generated from this file): batch submit in one script, waiting by a blocking read of a
per-job list the finishing scripts push to, and listing in pages from the listing sets
(never a keyspace scan). A mixin of `AsyncRedisDriver`, which provides the scripts and
connections. Redis has no transaction to share with a caller's database: there is no
``submit_joined`` (the store refuses ``conn=``)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ..._protocol import UNFINISHED_STATES, JobFilter, JobRow, Outcome, Status, Submission
from ._common import (
    Keys,
    all_plain,
    decode_outcome,
    decode_row,
    decode_text,
    encode,
    unique_args,
)

__all__ = ["AsyncJobsMixin"]


def _json(value: Any) -> str:
    # ensure_ascii=False: ids and payloads reach Lua as the very UTF-8 they are stored as.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _answers(
    submissions: Sequence[Submission], statuses: str, details: list[Any], now: float
) -> list[Outcome]:
    """submit_many.lua's answer as Outcomes, in order: ``statuses`` one letter a job,
    ``details`` an item for each job that is not new. A new job's row is built here from
    its submission and the store time, as the script wrote it (`Submission.new_row`; the
    script does not send it back, and adds the delay sent as repr() to the `now` it answers
    with %.17g: the same double)."""
    outcomes: list[Outcome] = []
    append = outcomes.append
    detail = iter(details)
    # tuple.__new__ directly: the outcomes are whole, and a NamedTuple's own __new__ (a
    # Python function) was a third of this loop's time in a batch of new jobs.
    for s, status in zip(submissions, statuses, strict=True):
        if status == "a":
            append(_tuple(Outcome, (Status.APPLIED, s.new_row(now), now)))
        elif status == "s":  # its key went to an earlier job of the batch, new
            append(Outcome(Status.MISSED, outcomes[int(next(detail)) - 1].row, now))
        else:  # "m": an existing job (or the key's holder), as it is
            append(Outcome(Status.MISSED, decode_row(next(detail)), now))
    return outcomes


def _texts(s: Submission) -> tuple[str, str, str, str | None]:
    """A submission's delay, max attempts, priority and timeout as the script takes them,
    which checks them again (str, not int(): a value the store would refuse stays refused)."""
    timeout = None if s.timeout is None else repr(float(s.timeout))
    return repr(float(s.delay)), str(s.max_attempts), str(s.priority), timeout


def _queue_keys(k: Keys, queue: str) -> tuple[str, str, str]:
    return k.candidates(queue), k.listing(queue), k.wake(queue)


_tuple = tuple.__new__
# A submission's id and payload, and what else it sends (queue, delay, max attempts,
# priority, timeout, unique key, window, headers): a job whose rest is the batch's shared
# spec sends only the first two.
_id_and_payload = itemgetter(0, 2)
_rest = itemgetter(1, 3, 4, 5, 6, 7, 8, 9)


# Jobs a list call examines per script run (bounds how long one run holds the server).
LIST_BUDGET = 500


class AsyncJobsMixin:
    """`submit_many`, `wait_job` and `list_jobs` of `AsyncRedisDriver`."""

    if TYPE_CHECKING:
        keys: Keys
        _block: float

        def _now_arg(self) -> str: ...

        async def _eval(
            self, operation: str, script_name: str, keys: Sequence[str], args: Sequence[str]
        ) -> Any: ...

        async def _send(self, operation: str, command: Sequence[Any]) -> Any: ...

    async def submit_many(self, submissions: Sequence[Submission]) -> list[Outcome]:
        if not submissions:
            return []
        k = self.keys
        first = submissions[0]
        keys = [k.clock, k.seq, k.jobs, *_queue_keys(k, first.queue)]
        queues = {first.queue: 1}
        # The shared spec is the first job's, without a unique key (a keyed job always
        # sends its own); a job of the same values and a plain id sends its id and payload
        # only (see submit_many.lua), the usual batch all of its jobs.
        shared = (first.queue, first.delay, first.max_attempts, first.priority, first.timeout,
                  None, None, first.headers)  # fmt: skip
        shared_spec = [False, 1, *_texts(first), None, None, None, first.headers]
        flat = list(chain.from_iterable(map(_id_and_payload, submissions)))
        others: list[Any] = []
        if not (all_plain(flat[0::2]) and all(map(shared.__eq__, map(_rest, submissions)))):
            for n, s in enumerate(submissions, 1):
                encoded = encode(s.job_id)
                if encoded is s.job_id and _rest(s) == shared:
                    continue
                number = queues.get(s.queue)
                if number is None:
                    number = queues[s.queue] = len(queues) + 1
                    keys += _queue_keys(k, s.queue)
                others += (
                    n,
                    [encoded, number, *_texts(s), *unique_args(k, s.unique_key, s.unique_for),
                     s.headers],
                )  # fmt: skip
        args = [
            self._now_arg(),
            k.job_prefix,
            _json(list(queues)),
            _json(shared_spec),
            _json(flat),
            _json(others),
        ]
        reply = await self._eval("submit_many", "submit_many", keys, args)
        details = json.loads(reply[2]) if len(reply) > 2 else []
        return _answers(submissions, reply[1], details, float(reply[0]))

    async def wait_job(self, job_id: str, timeout: float) -> Outcome:
        deadline = time.monotonic() + timeout
        job = self.keys.job(job_id)
        keys = [job, self.keys.clock, job + ":waiting", job + ":ended"]
        while True:
            remaining = deadline - time.monotonic()
            ttl = str(math.ceil(max(remaining, 0.0)) + 2)
            outcome = decode_outcome(
                await self._eval("wait", "wait_job", keys, [self._now_arg(), ttl])
            )
            row = outcome.row
            if row is None or row.state not in UNFINISHED_STATES or remaining < 0.001:
                return outcome
            block = math.ceil(min(remaining, self._block) * 1000) / 1000
            await self._send("wait", ("BLPOP", keys[3], f"{block:.3f}"))

    async def list_jobs(self, selection: JobFilter) -> tuple[float, list[JobRow], int | None]:
        # Walks the listing set in bounded steps; the rows of different steps are not one
        # atomic snapshot (each row is), and their as-of time is that of the first step.
        k = self.keys
        index = k.jobs if selection.queue is None else k.listing(selection.queue)
        now_arg = self._now_arg()
        wanted = selection.limit + 1  # one more: is there a next page?
        found: list[tuple[int, JobRow]] = []
        cursor = "" if selection.after is None else str(selection.after)
        as_of: float | None = None
        older = "" if selection.older_than is None else repr(float(selection.older_than))
        while True:
            args = [
                now_arg,
                selection.state or "",
                cursor,
                str(wanted - len(found)),
                str(LIST_BUDGET),
                k.job_prefix,
                selection.owner or "",
                older,
            ]
            reply = await self._eval("jobs", "list", [k.clock, index], args)
            if as_of is None:
                as_of = float(reply[0])
            for n in range(2, len(reply), 2):
                found.append((int(reply[n]), decode_row(reply[n + 1])))
            next_cursor = decode_text(reply[1])
            if len(found) >= wanted or next_cursor is None:
                break
            cursor = next_cursor
        page = found[: selection.limit]
        more = len(found) > selection.limit
        return as_of, [row for _, row in page], page[-1][0] if more else None
