"""A worker's options and handlers, validated (docs/design.md §6: bad input names the
argument), before anything runs."""

from __future__ import annotations

import inspect
import multiprocessing
import os
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, Literal

from .._clock import Clock, LeaseTiming
from .._protocol import RetryPolicy, check_instances
from .._validate import (
    MAX_BATCH,
    validate_age,
    validate_delay,
    validate_id,
    validate_queues,
    validate_timeout,
    validate_ttl,
)
from ..errors import InvalidArgument
from ..stores import resolve_url
from ._context import JobContext

__all__ = [
    "ISOLATIONS",
    "Config",
    "Handler",
    "HandlerFunction",
    "Isolation",
    "default_owner",
    "is_async",
    "make_config",
    "make_handler",
    "start_method",
]

Isolation = Literal["thread", "process"]
HandlerFunction = Callable[[JobContext], Any]

ISOLATIONS = ("thread", "process")
_START_METHODS = ("forkserver", "spawn")


def default_owner() -> str:
    """``host:pid:random``: a person can find the process; the suffix tells restarts apart."""
    host = socket.gethostname()[:200] or "localhost"
    return f"{host}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass(frozen=True)
class Handler:
    """A registered handler: the function and how it runs."""

    queue: str
    function: HandlerFunction
    is_async: bool
    isolation: Isolation | None  # None: the worker's default
    retry: RetryPolicy | None  # None: the worker's default
    timeout: float | None = None  # per-attempt timeout, seconds; None: the worker's default


def make_handler(
    queue: str, function: object, isolation: object, retry: object, timeout: object = None
) -> Handler:
    """Validate what `Worker.register` was given."""
    queue = validate_id("queue", queue)
    if not callable(function):
        raise InvalidArgument(
            "handler", f"must be callable (def or async def), not {type(function).__name__}"
        )
    if isolation is not None:
        _check_isolation(isolation)
    if retry is not None:
        _retry_policy(retry)
    timeout_s = None if timeout is None else validate_timeout(timeout)
    return Handler(
        queue,
        function,
        is_async(function),
        isolation,  # type: ignore[arg-type]
        retry,  # type: ignore[arg-type]
        timeout_s,
    )


def is_async(function: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 - objects with an async __call__
    )


@dataclass(frozen=True)
class Config:
    url: str | None
    concurrency: int
    ttl: float
    renew_every: float | None
    grace: float
    isolation: Isolation
    retry: RetryPolicy
    poll_interval: float
    owner: str | None
    queues: tuple[str, ...] | None
    clock: Clock | None
    store_clock: Clock | None
    timing: LeaseTiming | None
    start_method: str | None
    summary_every: float
    retention: float | None = None  # purge finished jobs older than this (_retention.py)
    retention_every: float = 3600.0
    timeout: float | None = None  # per-attempt timeout of handlers without their own

    def options(self) -> dict[str, Any]:
        return {item.name: getattr(self, item.name) for item in fields(self)}

    @classmethod
    def names(cls) -> set[str]:
        return {item.name for item in fields(cls)}


def make_config(
    *,
    url: object,
    concurrency: object,
    ttl: object,
    renew_every: object,
    grace: object,
    isolation: object,
    retry: object,
    poll_interval: object,
    owner: object,
    queues: object,
    clock: object,
    store_clock: object,
    timing: object,
    start_method: object,
    summary_every: object,
    retention: object = None,
    retention_every: object = 3600.0,
    timeout: object = None,
) -> Config:
    """Validate the worker's options (docs/design.md §6: bad input names the argument)."""
    if url is not None:
        if not isinstance(url, str):
            raise InvalidArgument("url", f"must be a str, not {type(url).__name__}")
        resolve_url(url)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int):
        raise InvalidArgument("concurrency", f"must be an int, not {type(concurrency).__name__}")
    if not 1 <= concurrency <= MAX_BATCH:
        raise InvalidArgument("concurrency", f"must be from 1 to {MAX_BATCH}, got {concurrency}")
    ttl_s = validate_ttl(ttl)
    renew_s = None if renew_every is None else _renew_every(renew_every, ttl_s)
    _check_isolation(isolation)
    policy = _retry_policy(RetryPolicy() if retry is None else retry)
    poll_s = validate_delay(poll_interval, "poll_interval")
    if not 0.001 <= poll_s <= 3600:
        raise InvalidArgument(
            "poll_interval", f"must be from 0.001 to 3600 seconds, got {poll_s:g}"
        )
    check_instances(clock=clock, store_clock=store_clock, timing=timing)
    _check_start_method(start_method)
    summary_s = validate_delay(summary_every, "summary_every")
    if summary_s != 0 and not 0.01 <= summary_s <= 86400:
        raise InvalidArgument(
            "summary_every",
            f"must be 0 (no progress lines) or from 0.01 to 86400 seconds, got {summary_s:g}",
        )
    return Config(
        url=url,
        concurrency=concurrency,
        ttl=ttl_s,
        renew_every=renew_s,
        grace=validate_delay(grace, "grace"),
        isolation=isolation,  # type: ignore[arg-type]
        retry=policy,
        poll_interval=poll_s,
        owner=None if owner is None else validate_id("owner", owner),
        queues=None if queues is None else validate_queues(queues),
        clock=clock,  # type: ignore[arg-type]  # checked above, as the next three
        store_clock=store_clock,  # type: ignore[arg-type]
        timing=timing,  # type: ignore[arg-type]
        start_method=start_method,  # type: ignore[arg-type]
        summary_every=summary_s,
        retention=None if retention is None else _retention(retention),
        retention_every=_retention_every(retention_every),
        timeout=None if timeout is None else validate_timeout(timeout),
    )


def _retention(value: object) -> float:
    seconds = validate_age(value, "retention")
    if seconds < 1:
        raise InvalidArgument(
            "retention",
            f"must be None (keep finished jobs) or at least 1 second, got {seconds:g}",
        )
    return seconds


def _retention_every(value: object) -> float:
    seconds = validate_delay(value, "retention_every")
    if not 0.01 <= seconds <= 86400:
        raise InvalidArgument(
            "retention_every", f"must be from 0.01 to 86400 seconds, got {seconds:g}"
        )
    return seconds


def _renew_every(renew_every: object, ttl_s: float) -> float:
    renew_s = validate_delay(renew_every, "renew_every")
    if not 0 < renew_s <= ttl_s / 2:
        raise InvalidArgument(
            "renew_every",
            f"must be more than 0 and at most half the ttl ({ttl_s / 2:g} s), so that a "
            f"failed renewal can be retried before the lease runs out; got {renew_s:g} "
            "(default: a third of the ttl)",
        )
    return renew_s


def _check_isolation(isolation: object) -> None:
    if isolation not in ISOLATIONS:
        raise InvalidArgument("isolation", f"must be 'thread' or 'process', got {isolation!r}")


def _retry_policy(retry: object) -> RetryPolicy:
    if not isinstance(retry, RetryPolicy):
        raise InvalidArgument("retry", f"must be a tenure.RetryPolicy, not {type(retry).__name__}")
    return retry


def _check_start_method(start_method: object) -> None:
    if start_method is None:
        return
    if start_method not in _START_METHODS:
        raise InvalidArgument(
            "start_method", f"must be 'forkserver' or 'spawn', got {start_method!r}"
        )
    if start_method not in multiprocessing.get_all_start_methods():
        raise InvalidArgument("start_method", f"{start_method} is not available here")


def start_method(config: Config) -> str:
    """The multiprocessing start method of process-isolated handlers."""
    if config.start_method is not None:
        return config.start_method
    methods = multiprocessing.get_all_start_methods()
    return "forkserver" if "forkserver" in methods else "spawn"
