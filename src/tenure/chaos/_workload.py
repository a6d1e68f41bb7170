"""What the chaos workers do with a job: two fenced writes to the sink, then return.

Each attempt writes two records to the reference fenced sink (``PUT /records/g<gen>-s<n>``,
stamped with the lease's fencing token; the path is the effect key, so a request resent
after a lost reply is applied once) with a short stretch of "work" between them, and then
returns its generation as the result (the worker completes the job with it). Every HTTP
attempt is a ``write`` operation of the history.

The nemesis can stop the process between stamping a write and sending it (the ``handler``
point): the classic delayed request that only the destination's fence can stop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx

from ..errors import LeaseLost
from ..fence import token_headers
from ..fence.http import TenureAuth
from ..models import FencingToken
from ._control import Control
from ._history import Recorder

__all__ = [
    "SinkClient",
    "StaleWrite",
    "work",
]

ATTEMPTS = 3  # HTTP attempts per write when the reply is lost (same effect key)


class StaleWrite(LeaseLost):
    """The sink refused a write: a newer generation of the job already wrote."""


class SinkClient:
    """Sends the workload's writes to the sink and records every attempt."""

    def __init__(
        self,
        url: str,
        recorder: Recorder,
        control: Control | None,
        *,
        unsafe: str | None = None,
        timeout: float = 5.0,
    ) -> None:
        self._client = httpx.Client(base_url=url, timeout=timeout)
        self._rec = recorder
        self._control = control
        self._unsafe = unsafe

    def close(self) -> None:
        self._client.close()

    def write(self, holder: Any, token: FencingToken, owner: str, step: int) -> None:
        """Write effect ``step`` for the lease behind ``holder`` (a JobContext or a Lease).

        Raises `LeaseLost` when the worker already knows the lease is lost (the write is
        withheld) and `StaleWrite` when the sink refuses the token."""
        key = f"g{token.generation}-s{step}"
        fields = {"job": token.job_id, "gen": token.generation, "owner": owner, "key": key}
        if self._unsafe == "no-fence":
            headers = token_headers(token)  # sent whatever the worker knows
        else:
            try:
                headers = TenureAuth(holder).headers()  # refuses once the lease is lost
            except LeaseLost as exc:
                self.withheld(token, owner, step, exc)
                raise
        if self._control is not None:
            self._control.reach("handler", job=token.job_id, gen=token.generation)
        body = {"job": token.job_id, "gen": token.generation, "step": step, "owner": owner}
        status, answer = self._send(key, headers, body, fields)
        if status == 409 and self._unsafe == "no-fence":
            # Unsafe: present the generation the sink says is current instead of our own.
            current = answer.get("current_generation")
            if isinstance(current, int):
                headers = token_headers(FencingToken(token.job_id, current))
                status, answer = self._send(key, headers, body, {**fields, "presented": current})
        if status == 409:
            raise StaleWrite(
                f"the sink refused write {key} of job {token.job_id!r}: generation "
                f"{answer.get('current_generation')} already wrote",
                job_id=token.job_id,
                generation=token.generation,
            )
        if status not in (200, 201):
            raise RuntimeError(f"the sink answered {status} to write {key}: {answer}")

    def withheld(self, token: FencingToken, owner: str, step: int, why: BaseException) -> None:
        """Record a write the worker did not send: it knew its lease was lost."""
        self._rec.event(
            "write-withheld",
            job=token.job_id,
            gen=token.generation,
            owner=owner,
            key=f"g{token.generation}-s{step}",
            reason=str(why)[:200],
        )

    def _send(
        self, key: str, headers: dict[str, str], body: dict[str, Any], fields: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        for attempt in range(1, ATTEMPTS + 1):
            op = self._rec.invoke("write", **fields, attempt=attempt)
            try:
                response = self._client.put(
                    f"/records/{quote(key, safe='')}", json=body, headers=headers
                )
                answer: dict[str, Any] = response.json()
            except (httpx.HTTPError, ValueError) as exc:
                self._rec.end(op, "write", "unknown", **fields, error=str(exc)[:200])
                if attempt == ATTEMPTS:
                    raise
                time.sleep(0.05 * attempt)
                continue
            status = response.status_code
            if status in (200, 201):
                record = answer.get("record") or {}
                self._rec.end(
                    op,
                    "write",
                    "ok",
                    **fields,
                    status=status,
                    record=record.get("id"),
                    record_gen=record.get("generation"),
                    duplicate=bool(answer.get("duplicate")),
                )
            else:
                self._rec.end(
                    op,
                    "write",
                    "fail",
                    **fields,
                    status=status,
                    current=answer.get("current_generation"),
                    problem=str(answer.get("type", "")).rpartition(":")[2],
                )
            return status, answer
        raise AssertionError("unreachable")


def work(
    sink: SinkClient,
    holder: Any,
    token: FencingToken,
    owner: str,
    seconds: float,
    *,
    check: Callable[[], None] | None = None,
) -> None:
    """The workload of one attempt: write, work for ``seconds``, write again."""
    for step in (1, 2):
        if check is not None:
            try:
                check()
            except (LeaseLost, TimeoutError) as exc:
                sink.withheld(token, owner, step, exc)
                raise
        sink.write(holder, token, owner, step)
        if step == 1 and seconds > 0:
            time.sleep(seconds)
