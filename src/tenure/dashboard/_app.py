"""`create_app`: the dashboard as an ASGI application (Starlette), for `tenure dashboard`
or to mount in an application of your own."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Sequence
from functools import partial
from importlib.resources import files
from typing import Any
from urllib.parse import parse_qs, urlencode

import anyio
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .._store import Store
from .._store_async import AsyncStore
from .._validate import MAX_BATCH, validate_id, validate_positive_seconds
from ..errors import InvalidArgument, JobNotFound, JobStateConflict, StoreUnavailable
from ..locks import LOCK_QUEUE_PREFIX
from ..models import Job
from ._actions import ACTIONS, Action, actions_by_name
from ._metrics import METRICS_READ_TIMEOUT
from ._reader import DEFAULT_READ_TIMEOUT, Reader
from ._security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    Auth,
    AuthMiddleware,
    HostCheck,
    SecurityHeaders,
    csrf_ok,
    new_csrf_token,
)
from ._views import (
    PAGE_SIZE,
    STATES,
    Filters,
    clock_time,
    jobs_page,
    pretty_json,
    queues_page,
    schedules_page,
    seconds,
    timeline,
)

__all__ = ["METRICS_READ_TIMEOUT", "create_app"]

_PACKAGE = __package__ or "tenure.dashboard"
_MAX_FORM = 16_384  # bytes of an action's POST body (a token, a job id, a name)


def _pause_or_resume(name: str) -> bool:
    """A queue action's name: True to pause, False to resume."""
    if name not in ("pause", "resume"):
        raise InvalidArgument("action", f"must be pause or resume, got {name!r}")
    return name == "pause"


def _query(**values: str | None) -> str:
    return urlencode({k: v for k, v in values.items() if v is not None})


class _Dashboard:
    """The pages, over one store."""

    def __init__(
        self,
        store: AsyncStore | Store,
        read_only: bool,
        actions: Sequence[Action],
        refresh: float,
        read_timeout: float,
    ) -> None:
        self.reader = Reader(store, read_timeout)
        self.read_only = read_only
        self.actions = actions_by_name(actions)
        self.refresh = refresh
        self.templates = Environment(
            loader=PackageLoader(_PACKAGE, "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            undefined=StrictUndefined,
        )
        self.templates.globals.update(
            clock_time=clock_time,
            seconds=seconds,
            pretty_json=pretty_json,
            states=STATES,
            max_batch=MAX_BATCH,
            lock_queue_prefix=LOCK_QUEUE_PREFIX,  # a free lock is ready, but no work waits
            page_size=PAGE_SIZE,
            q_query=lambda queue, state: _query(queue=queue, state=state),
            owner_query=lambda owner: _query(owner=owner),
            job_query=lambda job_id: _query(id=job_id),
            action_query=lambda job_id, name: _query(id=job_id, action=name),
            queue_action_query=lambda queue, name: _query(queue=queue, action=name),
            offered=self.offered,
        )

    def offered(self, job: Job) -> list[Action]:
        """The actions shown for ``job``: none when read-only."""
        if self.read_only:
            return []
        return [a for a in self.actions.values() if a.offered_for(job)]

    def page(self, request: Request, name: str, status: int = 200, **values: Any) -> Response:
        context = {
            "base": request.scope.get("root_path", "").rstrip("/"),
            "store_url": self.reader.url,
            "read_only": self.read_only,
            "refresh": self.refresh,
            "page": name.removesuffix(".html").lstrip("_"),
            **values,
        }
        text = self.templates.get_template(name).render(context)
        return HTMLResponse(text, status_code=status)  # (`SecurityHeaders` adds its headers)

    def message(
        self, request: Request, status: int, heading: str, text: str, job_id: str | None = None
    ) -> Response:
        return self.page(
            request, "message.html", status, heading=heading, message=text, job_id=job_id
        )

    # -- pages -------------------------------------------------------------------------

    async def home(self, request: Request) -> Response:
        return RedirectResponse(request.url_for("queues"), status_code=302)

    async def queues(self, request: Request) -> Response:
        return self.page(request, "queues.html", view=await queues_page(self.reader))

    async def queues_table(self, request: Request) -> Response:
        return self.page(request, "_queues_table.html", view=await queues_page(self.reader))

    async def schedules(self, request: Request) -> Response:
        return self.page(request, "schedules.html", view=await schedules_page(self.reader))

    async def jobs(self, request: Request) -> Response:
        view = await jobs_page(self.reader, Filters.parse(request.query_params))
        return self.page(request, "jobs.html", view=view)

    async def jobs_table(self, request: Request) -> Response:
        view = await jobs_page(self.reader, Filters.parse(request.query_params))
        return self.page(request, "_jobs_table.html", view=view)

    async def job(self, request: Request) -> Response:
        job = await self.reader.get(request.query_params.get("id", ""))
        bars = timeline(await self.reader.attempts(job.job_id), job.as_of)
        return self.page(request, "job.html", job=job, actions=self.offered(job), bars=bars)

    async def job_summary(self, request: Request) -> Response:
        job = await self.reader.get(request.query_params.get("id", ""))
        return self.page(request, "_job_summary.html", job=job)

    async def confirm(self, request: Request) -> Response:
        if self.read_only:  # first: a read-only dashboard answers every action alike
            return self.message(request, 403, "Read-only", "This dashboard is read-only.")
        job = await self.reader.get(request.query_params.get("id", ""))
        action = self._action(request.query_params.get("action", ""))
        if not action.offered_for(job):
            return self._not_now(request, job, action)
        question = action.confirm.replace("{job}", job.job_id)
        return self.confirmation(request, "confirm.html", job=job, action=action, question=question)

    def confirmation(self, request: Request, template: str, **values: Any) -> Response:
        """A confirmation page whose form carries the CSRF token, and the cookie it is
        checked against when the form is posted."""
        token = request.cookies.get(CSRF_COOKIE) or new_csrf_token()
        response = self.page(request, template, csrf_field=CSRF_FIELD, csrf_token=token, **values)
        path = request.scope.get("root_path", "") or "/"
        response.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="strict", path=path)
        return response

    async def posted_form(self, request: Request, page: str) -> Response | Callable[[str], str]:
        """The posted form of an action, as a reader of its fields; or the refusal to send
        (read-only, too large, CSRF token missing or wrong: confirm again from ``page``)."""
        if self.read_only:
            return self.message(request, 403, "Read-only", "This dashboard is read-only.")
        body = await request.body()
        if len(body) > _MAX_FORM:
            return self.message(request, 413, "Too large", "An action's form is a few fields.")
        form = parse_qs(body.decode("utf-8", "replace"))

        def field(name: str) -> str:
            return (form.get(name) or [""])[0]

        if not csrf_ok(request.cookies.get(CSRF_COOKIE), field(CSRF_FIELD)):
            return self.message(
                request,
                403,
                "Refused",
                f"The form's CSRF token is missing or wrong: open the {page} and confirm again.",
            )
        return field

    async def act(self, request: Request) -> Response:
        field = await self.posted_form(request, "job's page")
        if isinstance(field, Response):
            return field
        action = self._action(field("action"))
        job_id = field("id")
        job = await self.reader.get(job_id)  # JobNotFound: 404
        # Checked again here: a form can be posted without its confirmation page, and an
        # action the store does not refuse by itself (one of yours) must not run on a job
        # in a state it does not take.
        if not action.offered_for(job):
            return self._not_now(request, job, action)
        store = self.reader.store
        if isinstance(store, AsyncStore):
            done = action.run(store, job_id)
        else:  # a blocking store's call runs in a worker thread, as its reads do
            done = await anyio.to_thread.run_sync(partial(action.run, store, job_id))
        if inspect.isawaitable(done):
            await done  # JobStateConflict (the state changed since the page): 409
        root = request.scope.get("root_path", "")
        if action.gone:
            return RedirectResponse(f"{root}/jobs", status_code=303)
        return RedirectResponse(f"{root}/job?{_query(id=job_id)}", status_code=303)

    # -- pausing a queue -----------------------------------------------------------------

    async def queue_confirm(self, request: Request) -> Response:
        if self.read_only:
            return self.message(request, 403, "Read-only", "This dashboard is read-only.")
        queue = validate_id("queue", request.query_params.get("queue", ""))
        pause = _pause_or_resume(request.query_params.get("action", ""))
        return self.confirmation(request, "confirm_queue.html", queue=queue, pause=pause)

    async def queue_act(self, request: Request) -> Response:
        field = await self.posted_form(request, "queues page")
        if isinstance(field, Response):
            return field
        pause = _pause_or_resume(field("action"))
        await self.reader.set_paused(field("queue"), pause)  # InvalidArgument: 400
        root = request.scope.get("root_path", "")
        return RedirectResponse(f"{root}/queues", status_code=303)

    def _not_now(self, request: Request, job: Job, action: Action) -> Response:
        """409: ``job``'s state is not one ``action`` takes."""
        return self.message(
            request,
            409,
            "Not possible now",
            f"Job {job.job_id} is {job.state}: {action.name} takes only a job that is "
            f"{' or '.join(action.states)}. Nothing was changed.",
            job.job_id,
        )

    def _action(self, name: str) -> Action:
        found = self.actions.get(name)
        if found is None:
            raise InvalidArgument("action", f"no action named {name!r} on this dashboard")
        return found

    async def metrics(self, request: Request) -> Response:
        from ._metrics import CONTENT_TYPE, render_stats

        body = None
        # Within the scrape: Prometheus gives up after 10 s by default, and a store that is
        # away can take longer to say so (a PostgreSQL pool waits for a connection).
        with anyio.move_on_after(METRICS_READ_TIMEOUT):
            with contextlib.suppress(StoreUnavailable):
                body = render_stats(await self.reader.queue_stats())
        if body is None:  # the store did not answer in time
            body = render_stats(None, up=False)
        return Response(body, headers={"content-type": CONTENT_TYPE, "cache-control": "no-store"})

    # -- errors ------------------------------------------------------------------------

    async def invalid(self, request: Request, exc: Exception) -> Response:
        return self.message(request, 400, "Bad request", str(exc))

    async def not_found(self, request: Request, exc: Exception) -> Response:
        return self.message(request, 404, "No such job", str(exc))

    async def conflict(self, request: Request, exc: Exception) -> Response:
        job_id = exc.job_id if isinstance(exc, JobStateConflict) else None
        return self.message(request, 409, "Refused by the store", str(exc), job_id)

    async def unavailable(self, request: Request, exc: Exception) -> Response:
        return self.message(request, 503, "Store unavailable", str(exc))


def create_app(
    store: AsyncStore | Store,
    *,
    read_only: bool = False,
    auth: Auth | None = None,
    actions: Sequence[Action] = ACTIONS,
    refresh: float = 2.0,
    allowed_hosts: Sequence[str] | None = None,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
) -> Starlette:
    """The dashboard of ``store`` (an `AsyncStore`, or a blocking `Store` whose calls run in
    worker threads), an ASGI application: run it with any ASGI server, or mount it::

        app.mount("/tenure", tenure.dashboard.create_app(store, auth=Auth(token=...)))

    ``read_only``: no action is offered, every POST is refused. ``auth``: what each request
    must present (`Auth`; none by default: mount it behind your own authentication, or bind
    to 127.0.0.1). ``actions``: the actions offered on jobs (see `Action`). ``refresh``:
    seconds between the live updates of the queues and jobs tables. ``allowed_hosts``: the
    only ``Host`` names answered (any port; 421 for others), against DNS rebinding when the
    app listens on loopback without authentication (`tenure dashboard` then allows
    `LOOPBACK_NAMES`); None: any. ``read_timeout``: seconds a page waits for each read of
    the store before it answers 503 (a store that is away can take far longer to say so).
    The store stays yours: the app never closes it.
    """
    if isinstance(refresh, bool) or not isinstance(refresh, (int, float)) or not refresh > 0:
        raise InvalidArgument("refresh", f"must be a positive number of seconds, got {refresh!r}")
    read_timeout = validate_positive_seconds("read_timeout", read_timeout)
    board = _Dashboard(store, read_only, actions, float(refresh), read_timeout)
    static = StaticFiles(directory=str(files(_PACKAGE).joinpath("static")))
    app = Starlette(
        routes=[
            Route("/", board.home),
            Route("/queues", board.queues, name="queues"),
            Route("/queues/table", board.queues_table),
            Route("/schedules", board.schedules, name="schedules"),
            Route("/jobs", board.jobs, name="jobs"),
            Route("/jobs/table", board.jobs_table),
            Route("/job", board.job, name="job"),
            Route("/job/summary", board.job_summary),
            Route("/job/confirm", board.confirm),
            Route("/job/action", board.act, methods=["POST"]),
            Route("/queue/confirm", board.queue_confirm),
            Route("/queue/action", board.queue_act, methods=["POST"]),
            Route("/metrics", board.metrics),
            Mount("/static", static, name="static"),
        ],
        exception_handlers={
            InvalidArgument: board.invalid,
            JobNotFound: board.not_found,
            JobStateConflict: board.conflict,
            StoreUnavailable: board.unavailable,
        },
    )
    if auth is not None and auth.enabled:
        app.add_middleware(AuthMiddleware, auth=auth)
    if allowed_hosts is not None:
        app.add_middleware(HostCheck, names=tuple(allowed_hosts))
    app.add_middleware(SecurityHeaders)  # outermost: also on the answers of those above
    return app
