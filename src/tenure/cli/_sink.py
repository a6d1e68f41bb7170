"""``tenure sink``: the reference fenced HTTP service (see `tenure.fence.sink`).

``tenure sink serve`` listens on 127.0.0.1 (``--port 0``: any free port) and stores records
under fencing in one SQLite file; the first line it prints says where it listens (a JSON
object with ``--json``), so scripts and tests can start it and read the URL.
``tenure sink show`` prints what a sink file accepted and refused.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import InvalidArgument
from . import CliError, CliState, bind_socket, common_options
from ._output import Cell, format_time
from ._params import DURATION

__all__ = ["sink"]

_LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def _keyring(keys: tuple[str, ...], key_file: str | None, max_age: float | None) -> Any:
    from ..fence import Keyring

    specs = list(keys)
    if key_file is not None:
        text = Path(key_file).read_text(encoding="utf-8")
        specs += [
            line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
        ]
    if not specs:
        if max_age is not None:
            raise InvalidArgument("--max-age", "only applies to signed tokens: give --key too")
        return None
    return Keyring.parse(specs, max_age=max_age)


@click.group()
def sink() -> None:
    """A reference fenced HTTP service: stores records, refuses stale tokens (409)."""


@sink.command()
@click.option("--host", default="127.0.0.1", help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    help="Port to listen on; 0 picks a free one (printed on the first line).",
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default="tenure-sink.db",
    help="SQLite file for the fence, the records and the refusals.",
)
@click.option(
    "--key",
    "keys",
    multiple=True,
    metavar="ID=SECRET",
    help="Accept tokens signed with this key (repeat for rotation; unsigned are refused).",
)
@click.option(
    "--key-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Read ID=SECRET keys from a file, one per line (keeps secrets out of argv).",
)
@click.option("--strict", is_flag=True, help="Accept one request per generation of a job.")
@click.option(
    "--max-age",
    type=DURATION,
    default=None,
    help="Refuse signed tokens issued longer ago than this, e.g. 90s, 1h (a number alone: "
    "seconds; optional, not needed for safety).",
)
@click.option(
    "--log-level", type=click.Choice(_LOG_LEVELS), default="warning", help="uvicorn's log level."
)
@common_options
@click.pass_obj
def serve(
    state: CliState,
    host: str,
    port: int,
    db: str,
    keys: tuple[str, ...],
    key_file: str | None,
    strict: bool,
    max_age: float | None,
    log_level: str,
) -> None:
    """Run the fenced sink until interrupted (Ctrl-C or SIGTERM)."""
    try:
        import uvicorn

        from ..fence.sink import create_app
    except ImportError as exc:
        raise CliError(
            f"tenure sink needs {exc.name}: pip install 'tenure[http]'", json_mode=state.json
        ) from exc
    keyring = _keyring(keys, key_file, max_age)
    app = create_app(db, keyring=keyring, strict=strict)
    sock = bind_socket(host, port, json_mode=state.json)
    sock.listen(128)
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    url = f"http://{shown}:{bound_port}"
    key_ids = list(keyring.key_ids) if keyring is not None else []
    announcement: dict[str, Any] = {
        "url": url,
        "db": str(Path(db).resolve()),
        "pid": os.getpid(),
        "signed": keyring is not None,
        "key_ids": key_ids,
        "strict": strict,
    }
    out = state.output()
    if out.json_mode:
        click.echo(json_line(announcement))
    else:
        signed = f", keys {', '.join(key_ids)}" if keyring is not None else ""
        click.echo(f"tenure sink listening on {url} (db {announcement['db']}{signed})")
    sys.stdout.flush()
    config = uvicorn.Config(app, log_level=log_level, lifespan="on", access_log=False)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


def json_line(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@sink.command()
@click.option(
    "--db",
    type=click.Path(dir_okay=False, exists=True),
    default="tenure-sink.db",
    help="The sink's SQLite file.",
)
@click.option("--job", default=None, help="Only this job.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, help="Rows per table.")
@common_options
@click.pass_obj
def show(state: CliState, db: str, job: str | None, limit: int) -> None:
    """Print the records a sink accepted and the requests it refused."""
    try:
        from ..fence.sink import Sink
    except ImportError as exc:
        raise CliError(
            f"tenure sink needs {exc.name}: pip install 'tenure[http]'", json_mode=state.json
        ) from exc
    store = Sink(db)
    try:
        records = store.records(job, 0, limit)
        refused = store.rejections(job, 0, limit)
    finally:
        store.close()
    out = state.output()
    if out.json_mode:
        out.json({"records": records, "rejections": refused})
        return
    out.table(
        ["id", "job", "gen", "effect key", "accepted", "value"],
        [
            [
                str(r["id"]),
                r["job_id"],
                str(r["generation"]),
                r["effect_key"] or "-",
                format_time(r["accepted_at"]),
                json_line(r["value"])[:60],
            ]
            for r in records
        ],
        title=f"accepted ({len(records)})",
    )
    out.line()
    out.table(
        ["id", "kind", "status", "job", "presented", "current", "effect key"],
        [
            [
                str(r["id"]),
                Cell(r["kind"], "warn" if r["kind"] == "duplicate" else "bad"),
                str(r["status"]),
                r["job_id"] or "-",
                "-" if r["presented_generation"] is None else str(r["presented_generation"]),
                "-" if r["current_generation"] is None else str(r["current_generation"]),
                r["effect_key"] or "-",
            ]
            for r in refused
        ],
        title=f"refused ({len(refused)})",
    )
