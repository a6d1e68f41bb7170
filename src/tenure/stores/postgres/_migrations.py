"""The versioned SQL files that bring a PostgreSQL schema up to date, as statements to run
(``tenure migrate``) or as one script to hand to psql, Flyway or Liquibase."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from ..._resources import migrations
from ._common import quote_ident, quote_literal, render, sql_text

__all__ = [
    "Migration",
    "latest_version",
    "migration_script",
    "migration_steps",
    "pending_migrations",
]


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    text: str  # with placeholders


@cache
def _all_migrations() -> tuple[Migration, ...]:
    found = tuple(
        Migration(v, name, text)
        for v, name, text in migrations(__package__ or "tenure.stores.postgres")
    )
    for position, migration in enumerate(found, start=1):
        if migration.version != position:
            raise RuntimeError(f"tenure migrations are not numbered 1, 2, 3...: {migration.name}")
    return found


def latest_version() -> int:
    known = _all_migrations()
    return known[-1].version if known else 0


def pending_migrations(current: int) -> list[Migration]:
    return [m for m in _all_migrations() if m.version > current]


def migration_steps(schema: str, current: int) -> list[tuple[str, str]]:
    """(description, SQL) to bring a schema from ``current`` to the latest version:
    ``schema.sql`` for a fresh install, else each pending migration; each followed by its
    bookkeeping row. Run them in one transaction after ``migrate_lock.sql``."""
    steps: list[tuple[str, str]] = []
    if current == 0:
        steps.append(("schema.sql", render(sql_text("schema"), schema)))
        recorded = _all_migrations()
    else:
        recorded = tuple(pending_migrations(current))
        steps.extend((m.name, render(m.text, schema)) for m in recorded)
    for m in recorded:
        steps.append(
            (
                f"record {m.name}",
                render(
                    sql_text("migrate_record"),
                    schema,
                    version=str(m.version),
                    name=quote_literal(m.name),
                ),
            )
        )
    return steps


def migration_script(schema: str, current: int) -> str:
    """A standalone SQL script (for psql, Flyway, Liquibase...) doing what ``tenure
    migrate`` does: lock, create the schema and bookkeeping table if needed, migrate."""
    latest = latest_version()
    lines = [
        f"-- tenure: schema {quote_ident(schema)} from version {current} to {latest}",
        "BEGIN;",
        render(sql_text("migrate_lock"), schema).strip() + ";",
        render(sql_text("migrate_schema"), schema).strip() + ";",
        render(sql_text("migrate_bookkeeping"), schema).strip() + ";",
    ]
    if current >= latest:
        lines.append("-- nothing to do: the schema is up to date")
    for description, statement in migration_steps(schema, current):
        if not description.startswith("record "):
            lines.append(f"-- {description}")
        lines.append(statement.strip().rstrip(";") + ";")
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"
