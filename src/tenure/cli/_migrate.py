"""``tenure migrate``: create or upgrade a store's schema.

PostgreSQL: the versioned SQL files shipped in ``tenure/stores/postgres/sql/migrations``,
applied in one transaction under an advisory lock (concurrent runs wait, then find the work
done). ``--dry-run`` lists what would run; ``--sql`` prints it as a script for your own
tooling (psql, Flyway, Liquibase...). SQLite migrates when opened. Redis has no schema and
no SQL (``--sql`` is a usage error): migrate opens the store, which registers it (read-only
commands then find it) and brings an older key layout up to date; ``--dry-run`` reads the
store's key layout and says which of those it would do, writing nothing.
"""

from __future__ import annotations

import sqlite3
from typing import Any
from urllib.parse import urlsplit

import click

from ..errors import InvalidArgument, StoreUnavailable
from . import CliState, common_options

__all__ = ["migrate"]


@click.command()
@click.option(
    "--dry-run", is_flag=True, help="Show the current version and what would run; change nothing."
)
@click.option("--sql", "print_sql", is_flag=True, help="Print the SQL that would run; run nothing.")
@click.option(
    "--from-version",
    type=int,
    default=None,
    metavar="N",
    help="With --sql: the schema's current version (0: empty), so no connection is needed.",
)
@click.option(
    "--schema",
    default=None,
    metavar="NAME",
    help="PostgreSQL schema (overrides the URL's ?schema=, default public).",
)
@common_options
@click.pass_obj
def migrate(
    state: CliState,
    dry_run: bool,
    print_sql: bool,
    from_version: int | None,
    schema: str | None,
) -> None:
    """Create or upgrade the store's schema to this tenure's version."""
    scheme = urlsplit(state.store_url).scheme
    if from_version is not None and not print_sql:
        raise InvalidArgument("--from-version", "is only used with --sql")
    if scheme in ("postgresql", "postgres"):
        report = _postgres(state.store_url, dry_run, print_sql, from_version, schema)
    elif scheme == "sqlite":
        if schema is not None:
            raise InvalidArgument("--schema", "is for PostgreSQL stores only")
        report = _sqlite(state, dry_run, print_sql, from_version)
    else:
        report = _without_schema(state, scheme, dry_run, print_sql, schema)
    if print_sql:
        click.echo(report.pop("sql"), nl=False)
        return
    out = state.output()
    if out.json_mode:
        out.json(report)
        return
    if "message" in report:
        out.line(report["message"])
        return
    where = f"{report['store']}" + (f" (schema {report['schema']})" if "schema" in report else "")
    if dry_run:
        pending = report["pending"]
        out.line(f"{where}: at version {report['version']}, this tenure has {report['latest']}")
        out.line(f"would apply: {', '.join(pending)}" if pending else "nothing to do")
    elif report["applied"]:
        applied = ", ".join(report["applied"])
        out.line(f"{where}: applied {applied}; now at version {report['version']}", "good")
    else:
        out.line(f"{where}: up to date at version {report['version']}")


def _refused(message: str) -> StoreUnavailable:
    """A store migrate cannot read or would not change: exit code 1, nothing done."""
    return StoreUnavailable(message, operation="migrate", outcome_unknown=False)


def _without_schema(
    state: CliState, scheme: str, dry_run: bool, print_sql: bool, schema: str | None
) -> dict[str, Any]:
    """Redis, and the stores of backends registered by others: no SQL, so no script to
    print; the store exists once it has been opened (a Redis store's id and clock), which
    also brings an older Redis key layout up to this tenure's."""
    from ..stores import resolve_url

    resolve_url(state.store_url)  # unknown schemes: the usual InvalidArgument
    if print_sql:
        raise InvalidArgument(
            "--sql",
            f"{scheme}:// stores have no SQL schema, so there is no migration script to "
            "print; tenure migrate without --sql sets the store up",
        )
    if schema is not None:
        raise InvalidArgument("--schema", "is for PostgreSQL stores only")
    if dry_run:
        # Opening the store would create it: read what is there instead.
        if scheme in ("redis", "rediss"):
            return _redis_plan(state.store_url)
        return {
            "store": state.store_url,
            "message": f"{scheme}:// stores have no schema; a dry run cannot tell what "
            "opening the store would do, and changed nothing",
        }
    store = state.store()
    return {
        "store": store.url,
        "message": f"{scheme}:// stores have no schema; the store exists at {store.url}",
    }


# What opening a Redis store does (open.lua, index_leases.lua; docs/redis.md "Layout
# versions"): a new store starts at this tenure's key layout; an older one is brought up to
# it, a step from each layout to the next.
_NEW_REDIS_STORE = "create the store (its id and clock key)"
_REDIS_UPGRADES = {
    1: "rename the clock key after the store id (layout 2)",
    2: "index the leases of each queue (layout 3)",
}


def _redis_plan(url: str) -> dict[str, Any]:
    """What ``tenure migrate`` would do to the Redis store at ``url``, read without a
    write: its key layout against this tenure's."""
    from redis import RedisError

    from ..stores.redis import LAYOUT_VERSION, parse_redis_url
    from ._probe import redis_layout

    shown = parse_redis_url(url).public_url
    try:
        layout = redis_layout(url)
    except RedisError as exc:
        raise _refused(f"cannot read the Redis store at {shown}: {exc}") from exc
    if layout > LAYOUT_VERSION:
        raise _refused(
            f"the Redis store {shown} has key layout version {layout}, newer than this "
            f"tenure understands ({LAYOUT_VERSION}); upgrade tenure"
        )
    if layout == 0:
        pending = [_NEW_REDIS_STORE]
    else:
        pending = [step for start, step in _REDIS_UPGRADES.items() if start >= layout]
    found = f"key layout {layout}" if layout else "no store yet"
    plan = f"would {'; '.join(pending)}; nothing changed" if pending else "nothing to do"
    return {
        "store": shown,
        "version": layout,
        "latest": LAYOUT_VERSION,
        "pending": pending,
        "message": f"{shown}: {found}, this tenure has key layout {LAYOUT_VERSION}; {plan}",
    }


def _postgres(
    url: str, dry_run: bool, print_sql: bool, from_version: int | None, schema: str | None
) -> dict[str, Any]:
    try:
        import psycopg

        from ..stores.postgres import (
            latest_version,
            migration_script,
            parse_postgres_url,
            pending_migrations,
            redact,
            schema_version,
            validate_schema,
        )
        from ..stores.postgres import migrate as apply
    except ImportError as exc:
        raise click.ClickException(
            f"the postgresql:// store needs psycopg: pip install 'tenure[postgres]' ({exc})"
        ) from exc
    options = parse_postgres_url(url)
    schema = options.schema if schema is None else validate_schema(schema, "--schema")
    latest = latest_version()
    report: dict[str, Any] = {"store": redact(url), "schema": schema, "latest": latest}
    if print_sql and from_version is not None:
        if not 0 <= from_version <= latest:
            raise InvalidArgument("--from-version", f"must be from 0 to {latest}")
        report["sql"] = migration_script(schema, from_version)
        return report
    try:
        with psycopg.connect(options.conninfo, autocommit=True, **options.kwargs) as conn:
            current = schema_version(conn, schema) or 0
            if current > latest:
                raise _refused(
                    f"schema {schema!r} is at version {current}, newer than this tenure "
                    f"({latest}); upgrade tenure"
                )
            if print_sql:
                report["sql"] = migration_script(schema, current)
            elif dry_run:
                report["version"] = current
                report["pending"] = (
                    ["schema.sql"]
                    if current == 0
                    else [m.name for m in pending_migrations(current)]
                )
            else:
                report["applied"] = apply(conn, schema)
                report["version"] = latest
    except psycopg.OperationalError as exc:
        raise _refused(f"cannot reach PostgreSQL at {redact(url)}: {exc}") from exc
    return report


def _sqlite(
    state: CliState, dry_run: bool, print_sql: bool, from_version: int | None
) -> dict[str, Any]:
    from .._resources import migrations
    from ..stores.sqlite import parse_sqlite_url

    known = migrations("tenure.stores.sqlite")
    latest = known[-1][0] if known else 0
    path = parse_sqlite_url(state.store_url)["path"]
    report: dict[str, Any] = {"store": state.store_url, "latest": latest}
    if print_sql and from_version is not None:
        if not 0 <= from_version <= latest:
            raise InvalidArgument("--from-version", f"must be from 0 to {latest}")
        current = from_version
    else:
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
                current = int(conn.execute("PRAGMA user_version").fetchone()[0])
        except sqlite3.OperationalError:
            current = 0  # no database file yet
    pending = [(number, name, text) for number, name, text in known if number > current]
    if print_sql:
        script = "".join(
            f"-- {name}\n{text.strip()}\nPRAGMA user_version = {number:d};\n"
            for number, name, text in pending
        )
        report["sql"] = "BEGIN;\n" + script + "COMMIT;\n"
        return report
    report["version"] = current
    report["pending"] = [name for _, name, _ in pending]
    if not dry_run:
        state.store()  # opening a SQLite store applies its migrations
        report["applied"] = report.pop("pending")
        report["version"] = latest
    return report
