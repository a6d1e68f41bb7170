"""The reference fenced sink: a small HTTP service that stores records under fencing and
shows what it accepted and what it refused (needs ``starlette``; ``tenure[http]``).

Run it with ``tenure sink serve`` (uvicorn), or mount `create_app` yourself. Everything is
kept in one SQLite file: the fence (``tenure_fence``), the effect ledger
(``tenure_effects``), the accepted records and the refusals.

API (JSON; the token headers are described in docs/fencing.md)::

    POST /records              store the JSON body as a record of the token's job
    PUT  /records/{key}        the same, applied at most once per (job, key)
                               (POST with an Idempotency-Key header is equivalent)
      201 {"record": {...}}                     accepted
      200 {"duplicate": true, "record": {...}}  that key was applied before: nothing changed
      409 problem+json                          stale token (names job, presented, current)
      403 / 400 / 428 problem+json              unverified / malformed / missing token
    GET  /records?job=J&after=ID&limit=N     accepted records, in acceptance order
    GET  /rejections?job=J&after=ID&limit=N  refusals (and duplicates), in order
    GET  /fence/{job}                        the job's highest accepted generation
    GET  /                                   counts and configuration
    GET  /healthz                            {"ok": true}

Each write is one SQLite transaction that advances the job's fence and inserts the record
(and the effect key), so accepted generations never decrease in acceptance order and an
effect key is applied once, even with several sink processes on one file. The
`FenceMiddleware` in front verifies signatures and refuses stale tokens first.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import __version__
from .._resources import load_text
from .._validate import validate_flag, validate_id
from ..errors import InvalidArgument, StaleToken
from ..models import FencingToken
from ._headers import EFFECT_KEY_HEADER, PROBLEM_CONTENT_TYPE, Rejection
from ._ledger import apply_once_checked
from ._signed import Keyring, validate_keyring
from ._sql import SQLFenceGuard
from ._stores import SQLiteFenceStore
from .asgi import STATE_KEY, FenceMiddleware, Scope

__all__ = ["MAX_BODY", "Sink", "create_app"]

MAX_BODY = 1024 * 1024
MAX_PAGE = 10_000
_PACKAGE = "tenure.fence"


def _sql(name: str) -> str:
    return load_text(_PACKAGE, f"sql/sink/{name}.sql")


def _record(row: Any) -> dict[str, Any] | None:
    if row is None:
        return None
    record_id, job_id, generation, effect_key, value, accepted_at = row
    return {
        "id": record_id,
        "job_id": job_id,
        "generation": generation,
        "effect_key": effect_key,
        "value": None if value is None else json.loads(value),
        "accepted_at": accepted_at,
    }


_REJECTION_COLUMNS = (
    "id",
    "kind",
    "status",
    "job_id",
    "presented_generation",
    "current_generation",
    "effect_key",
    "detail",
    "method",
    "path",
    "rejected_at",
)


class Sink:
    """The sink's storage: one SQLite file, used through a `SQLiteFenceStore`."""

    def __init__(
        self, db: str | Path, *, keyring: Keyring | None = None, strict: bool = False
    ) -> None:
        self.keyring = validate_keyring(keyring)
        self.strict = validate_flag(strict, "strict")
        self.fence = SQLiteFenceStore(db)  # checks the path before it creates anything
        self.db = self.fence.path
        schema = _sql("schema")
        self.fence.run(lambda conn: conn.executescript(schema))

    def close(self) -> None:
        self.fence.close()

    # -- writes -----------------------------------------------------------------------

    def accept(
        self, token: FencingToken, value: str | None, effect_key: str | None
    ) -> tuple[str, Any]:
        """Store a record under the fence: ``("created", record)``, ``("duplicate",
        record or None, generation)`` or ``("stale", highest generation)``."""
        params = {
            "job_id": token.job_id,
            "generation": token.generation,
            "effect_key": effect_key,
            "value": value,
            "at": time.time(),
        }
        insert = _sql("insert_record")

        def write(conn: sqlite3.Connection) -> tuple[str, Any]:
            try:
                if effect_key is None:
                    guard = SQLFenceGuard(
                        conn,
                        token,
                        dialect="sqlite",
                        paramstyle="qmark",
                        strict=False,
                        check_loss=False,
                    )
                    with guard as cur:
                        row = cur.execute(insert, params).fetchone()
                    return "created", _record(row)
                done = apply_once_checked(
                    conn,
                    token,
                    effect_key,
                    lambda cur: cur.execute(insert, params).fetchone(),
                    False,
                    None,
                    "sqlite",
                    "qmark",
                    check_loss=False,
                )
            except StaleToken as exc:
                return "stale", exc.highest_seen
            if done.applied:
                return "created", _record(done.value)
            original = conn.execute(
                _sql("record_by_key"), {"job_id": token.job_id, "effect_key": effect_key}
            ).fetchone()
            return "duplicate", (_record(original), done.generation)

        return self.fence.run(write)

    def reject(
        self,
        rejection: Rejection | None,
        *,
        kind: str | None = None,
        status: int | None = None,
        detail: str | None = None,
        job_id: str | None = None,
        presented: int | None = None,
        current: int | None = None,
        effect_key: str | None = None,
        method: str | None = None,
        path: str | None = None,
    ) -> None:
        if rejection is not None:
            kind, status, detail = rejection.kind, rejection.status, rejection.detail
            job_id = rejection.job_id
            presented = rejection.presented_generation
            current = rejection.current_generation
        params = {
            "kind": kind,
            "status": status,
            "job_id": job_id,
            "presented_generation": presented,
            "current_generation": current,
            "effect_key": effect_key,
            "detail": detail,
            "method": method,
            "path": path,
            "at": time.time(),
        }
        statement = _sql("insert_rejection")
        self.fence.run(lambda conn: conn.execute(statement, params))

    # -- reads ------------------------------------------------------------------------

    def records(self, job_id: str | None, after: int, limit: int) -> list[dict[str, Any]]:
        params = {"job_id": job_id, "after": after, "limit": limit}
        rows = self.fence.run(lambda conn: conn.execute(_sql("records"), params).fetchall())
        return [r for r in map(_record, rows) if r is not None]

    def rejections(self, job_id: str | None, after: int, limit: int) -> list[dict[str, Any]]:
        params = {"job_id": job_id, "after": after, "limit": limit}
        rows = self.fence.run(lambda conn: conn.execute(_sql("rejections"), params).fetchall())
        return [dict(zip(_REJECTION_COLUMNS, row, strict=True)) for row in rows]

    def summary(self) -> dict[str, Any]:
        records, rejections, jobs = self.fence.run(
            lambda conn: conn.execute(_sql("summary")).fetchone()
        )
        return {
            "service": "tenure-sink",
            "version": __version__,
            "db": self.db,
            "signed": self.keyring is not None,
            "key_ids": list(self.keyring.key_ids) if self.keyring else [],
            "strict": self.strict,
            "records": records,
            "rejections": rejections,
            "jobs": jobs,
        }


def _problem(status: int, kind: str, title: str, detail: str, instance: str) -> Response:
    body = {
        "type": f"urn:tenure:problem:{kind}",
        "title": title,
        "status": status,
        "detail": detail,
        "instance": instance,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM_CONTENT_TYPE)


def _page(request: Request) -> tuple[str | None, int, int]:
    query = request.query_params
    job = query.get("job")
    if job is not None:
        job = validate_id("job", job)
    try:
        after = int(query.get("after", "0"))
        limit = int(query.get("limit", str(MAX_PAGE)))
    except ValueError:
        raise InvalidArgument("after/limit", "must be integers") from None
    if after < 0 or not 1 <= limit <= MAX_PAGE:
        raise InvalidArgument("after/limit", f"after >= 0 and limit from 1 to {MAX_PAGE}")
    return job, after, limit


class _Endpoints:
    """The sink's HTTP endpoints, each a thin async shell over one `Sink` call in a thread."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    async def on_rejected(self, rejection: Rejection, scope: Scope) -> None:
        headers = dict(scope.get("headers", ()))
        key = headers.get(EFFECT_KEY_HEADER.lower().encode())
        await anyio.to_thread.run_sync(
            lambda: self.sink.reject(
                rejection,
                effect_key=None if key is None else key.decode("latin-1"),
                method=scope.get("method"),
                path=scope.get("path"),
            )
        )

    async def write(self, request: Request) -> Response:
        token = getattr(request.state, STATE_KEY, None)
        instance = request.url.path
        if not isinstance(token, FencingToken):  # the middleware requires one: defensive
            return _problem(428, "missing", "Fencing token required", "no token", instance)
        header_key = request.headers.get(EFFECT_KEY_HEADER)
        path_key = request.path_params.get("key")
        if header_key is not None and path_key is not None and header_key != path_key:
            return _problem(
                400,
                "bad-request",
                "Conflicting effect keys",
                f"the path names effect key {path_key!r} and {EFFECT_KEY_HEADER} {header_key!r}",
                instance,
            )
        raw_key = path_key if path_key is not None else header_key
        body = await request.body()
        try:
            effect_key = None if raw_key is None else validate_id("effect key", raw_key)
            if len(body) > MAX_BODY:
                raise InvalidArgument("body", f"must be at most {MAX_BODY} bytes")
            value = None if not body else json.dumps(json.loads(body), ensure_ascii=False)
        except (InvalidArgument, ValueError) as exc:
            return _problem(400, "bad-request", "Bad request", str(exc), instance)
        outcome, detail = await anyio.to_thread.run_sync(
            lambda: self.sink.accept(token, value, effect_key)
        )
        if outcome == "created":
            return JSONResponse({"record": detail}, status_code=201)
        if outcome == "duplicate":
            return await self._duplicate(request, token, effect_key, *detail)
        rejection = Rejection.stale(token, detail, strict=False)
        await self.on_rejected(rejection, request.scope)
        return Response(
            rejection.body(instance), status_code=rejection.status, media_type=PROBLEM_CONTENT_TYPE
        )

    async def _duplicate(
        self,
        request: Request,
        token: FencingToken,
        effect_key: str | None,
        original: dict[str, Any] | None,
        generation: int,
    ) -> Response:
        # A repeat of an applied effect is answered as done (200), and logged with the
        # rejections so the audit shows what was turned away.
        await anyio.to_thread.run_sync(
            lambda: self.sink.reject(
                None,
                kind="duplicate",
                status=200,
                detail=f"effect key {effect_key!r} was applied before by generation "
                f"{generation}; nothing changed",
                job_id=token.job_id,
                presented=token.generation,
                current=generation,
                effect_key=effect_key,
                method=request.method,
                path=request.url.path,
            )
        )
        return JSONResponse(
            {"duplicate": True, "applied_by_generation": generation, "record": original}
        )

    async def records(self, request: Request) -> Response:
        return await self._page_of("records", self.sink.records, request)

    async def rejections(self, request: Request) -> Response:
        return await self._page_of("rejections", self.sink.rejections, request)

    async def _page_of(
        self,
        name: str,
        read: Callable[[str | None, int, int], list[dict[str, Any]]],
        request: Request,
    ) -> Response:
        try:
            job, after, limit = _page(request)
        except InvalidArgument as exc:
            return _problem(400, "bad-request", "Bad request", str(exc), request.url.path)
        found = await anyio.to_thread.run_sync(lambda: read(job, after, limit))
        return JSONResponse({name: found, "next_after": found[-1]["id"] if found else after})

    async def fence(self, request: Request) -> Response:
        try:
            job = validate_id("job", request.path_params["job"])
        except InvalidArgument as exc:
            return _problem(400, "bad-request", "Bad request", str(exc), request.url.path)
        generation = await anyio.to_thread.run_sync(lambda: self.sink.fence.highest(job))
        return JSONResponse({"job_id": job, "generation": generation})

    async def summary(self, request: Request) -> Response:
        return JSONResponse(await anyio.to_thread.run_sync(self.sink.summary))

    async def health(self, request: Request) -> Response:
        return JSONResponse({"ok": True})

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            self.sink.close()


def create_app(
    db: str | Path,
    *,
    keyring: Keyring | None = None,
    strict: bool = False,
) -> Starlette:
    """The sink as a Starlette app over the SQLite file ``db`` (created if missing)."""
    sink = Sink(db, keyring=keyring, strict=strict)
    endpoints = _Endpoints(sink)
    app = Starlette(
        routes=[
            Route("/", endpoints.summary, methods=["GET"]),
            Route("/healthz", endpoints.health, methods=["GET"]),
            Route("/records", endpoints.write, methods=["POST"]),
            Route("/records", endpoints.records, methods=["GET"]),
            Route("/records/{key:path}", endpoints.write, methods=["PUT"]),
            Route("/rejections", endpoints.rejections, methods=["GET"]),
            Route("/fence/{job:path}", endpoints.fence, methods=["GET"]),
        ],
        middleware=[
            Middleware(
                FenceMiddleware,
                store=sink.fence,
                keyring=keyring,
                strict=strict,
                on_rejected=endpoints.on_rejected,
            )
        ],
        lifespan=endpoints.lifespan,
    )
    app.state.sink = sink
    return app
