"""``tenure dashboard``: the web dashboard of a store (`tenure.dashboard`), served by uvicorn."""

from __future__ import annotations

import importlib.util
import os

import click

from ..errors import InvalidArgument
from . import CliError, CliState, CliUsageError, bind_socket, common_options
from ._params import Duration

__all__ = ["INSTALL_DASHBOARD", "dashboard", "dashboard_hint", "dashboard_missing"]

DEFAULT_PORT = 8321
# What `tenure dashboard` imports: tenure.dashboard's own needs (its __init__ imports
# jinja2 and starlette) and uvicorn, which serves it. The chaos extra has no jinja2.
NEEDS = ("jinja2", "starlette", "uvicorn")
INSTALL_DASHBOARD = "pip install 'tenure[dashboard]'"


def dashboard_missing() -> list[str]:
    """The modules `tenure dashboard` needs that are not installed (none: it can run)."""
    return [name for name in NEEDS if importlib.util.find_spec(name) is None]


def dashboard_hint(command: str) -> str:
    """``command`` (a ``tenure dashboard ...`` line) as advice: as it is when the dashboard
    can run, else after the install it needs (``pip install 'tenure[dashboard]', then
    tenure dashboard ...``)."""
    return f"{INSTALL_DASHBOARD}, then {command}" if dashboard_missing() else command


@click.command("dashboard")
@click.option(
    "--host",
    default="127.0.0.1",
    show_envvar=True,
    help="Address to listen on. Anything but a loopback address needs authentication.",
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_envvar=True, help="Port."
)
@click.option(
    "--read-only",
    is_flag=True,
    default=False,
    show_envvar=True,
    help="Offer no action on jobs; refuse every POST.",
)
@click.option(
    "--auth-token",
    metavar="T",
    default=None,
    show_envvar=True,
    help="Require this token: 'Authorization: Bearer T', or T as the password of basic auth "
    "(any user name). Basic auth with a user of its own: TENURE_DASHBOARD_USER and "
    "TENURE_DASHBOARD_PASSWORD.",
)
@click.option(
    "--refresh",
    type=Duration(0.2, 3600),
    default=2.0,
    show_envvar=True,
    help="Time between live updates of the queues and jobs tables, e.g. 2s, 1m (a number "
    "alone: seconds).",
)
@click.option(
    "--read-timeout",
    type=Duration(0.1, 3600),
    default=10.0,
    show_envvar=True,
    help="How long a page waits for the store before it answers 503, e.g. 10s (a number "
    "alone: seconds; /metrics: 5 s at most).",
)
@common_options
@click.pass_obj
def dashboard(
    state: CliState,
    host: str,
    port: int,
    read_only: bool,
    auth_token: str | None,
    refresh: float,
    read_timeout: float,
) -> None:
    """Serve the web dashboard of the store: queues, jobs, each job's lease, /metrics.

    It listens on 127.0.0.1 unless --host says otherwise; any other address is refused
    unless authentication is set (--auth-token, or TENURE_DASHBOARD_USER and
    TENURE_DASHBOARD_PASSWORD), since the pages show every job's payload.
    """
    try:
        from ..dashboard import LOOPBACK_NAMES, Auth, check_bind, create_app, is_loopback
    except ImportError as exc:
        raise CliError(str(exc), json_mode=state.json) from exc
    try:
        auth = Auth(
            token=auth_token or None,
            user=os.environ.get("TENURE_DASHBOARD_USER") or None,
            password=os.environ.get("TENURE_DASHBOARD_PASSWORD") or None,
        )
        check_bind(host, auth)
    except InvalidArgument as exc:
        raise CliUsageError(str(exc), json_mode=state.json, kind="InvalidArgument") from exc
    try:
        import uvicorn
    except ImportError as exc:
        raise CliError(
            "tenure dashboard needs uvicorn: pip install 'tenure[dashboard]'", json_mode=state.json
        ) from exc
    # On loopback without authentication, only loopback Host names (DNS rebinding).
    hosts = (*LOOPBACK_NAMES, host) if is_loopback(host) and not auth.enabled else None
    store = state.store(create=False)
    app = create_app(
        store,
        read_only=read_only,
        auth=auth,
        refresh=refresh,
        allowed_hosts=hosts,
        read_timeout=read_timeout,
    )
    shown = f"[{host}]" if ":" in host else host
    sock = bind_socket(host, port, json_mode=state.json)  # --port 0: the URL says the port
    with sock:
        bound = int(sock.getsockname()[1])
        click.echo(
            f"tenure dashboard of {store.url} on http://{shown}:{bound}/"  # (no password)
            + (" (read-only)" if read_only else "")
            + (" (authentication required)" if auth.enabled else ""),
            err=True,
        )
        config = uvicorn.Config(app, host=host, port=bound, log_level="warning")
        uvicorn.Server(config).run(sockets=[sock])
