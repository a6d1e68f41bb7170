"""Schema and migrations: a fresh install (schema.sql) and an upgraded one (the versioned
migrations, with data in between) end in the same catalog; migrations run once under an
advisory lock however many clients start at once; `tenure migrate` and its script form."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

import tenure
from tenure.cli import main
from tenure.stores.postgres import PostgresDriver, migration_script
from tenure.stores.postgres._common import render, sql_text
from tenure.stores.postgres._migrate import migrate
from tenure.stores.postgres._migrations import _all_migrations, latest_version, migration_steps
from tests.backends import POSTGRES_URL, postgres_schema, postgres_schema_url

# Everything a schema holds that tenure could have created, as comparable text.
CATALOG_QUERIES = {
    "relations": """
        SELECT c.relname, c.relkind::text, c.relpersistence::text,
               coalesce(array_to_string(c.reloptions, ','), '')
        FROM pg_class c WHERE c.relnamespace = %(ns)s::regnamespace ORDER BY 1""",
    "columns": """
        SELECT c.relname,
               row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum),
               a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull::text,
               coalesce(pg_get_expr(d.adbin, d.adrelid), ''), a.attidentity::text,
               a.attgenerated::text, coalesce(co.collname, '')
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 0
        WHERE c.relnamespace = %(ns)s::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
        ORDER BY 1, 2""",
    "constraints": """
        SELECT c.relname, k.conname, k.contype::text, pg_get_constraintdef(k.oid)
        FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
        WHERE k.connamespace = %(ns)s::regnamespace ORDER BY 1, 2""",
    "indexes": """
        SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %(ns)s ORDER BY 1""",
    "triggers": """
        SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid)
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = %(ns)s::regnamespace AND NOT t.tgisinternal ORDER BY 1, 2""",
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_functiondef(p.oid)
        FROM pg_proc p WHERE p.pronamespace = %(ns)s::regnamespace ORDER BY 1, 2""",
    "sequences": """
        SELECT c.relname, s.seqtypid::regtype::text, s.seqstart, s.seqincrement, s.seqmax,
               s.seqmin, s.seqcache, s.seqcycle
        FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid
        WHERE c.relnamespace = %(ns)s::regnamespace ORDER BY 1""",
    "comments": """
        SELECT c.relname, coalesce(obj_description(c.oid, 'pg_class'), '')
        FROM pg_class c WHERE c.relnamespace = %(ns)s::regnamespace ORDER BY 1""",
    "privileges": """
        SELECT c.relname, coalesce(array_to_string(c.relacl, ','), '')
        FROM pg_class c WHERE c.relnamespace = %(ns)s::regnamespace ORDER BY 1""",
    "bookkeeping": "SELECT version, name FROM {schema}.tenure_migrations ORDER BY 1",
    "meta keys": "SELECT key FROM {schema}.tenure_meta ORDER BY 1",
    "clock": "SELECT id, floor FROM {schema}.tenure_clock ORDER BY 1",
}


def catalog(conn: Any, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    dump: dict[str, list[tuple[Any, ...]]] = {}
    for name, query in CATALOG_QUERIES.items():
        rows = conn.execute(render(query, schema).encode(), {"ns": schema}).fetchall()
        dump[name] = [
            tuple(
                value.replace(f'"{schema}"', "<schema>").replace(schema, "<schema>")
                if isinstance(value, str)
                else value
                for value in row
            )
            for row in rows
        ]
    return dump


@pytest.fixture
def two_schemas() -> Iterator[tuple[str, str]]:
    with postgres_schema("tm") as first, postgres_schema("tm") as second:
        yield first, second


@pytest.fixture
def admin() -> Iterator[Any]:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        yield conn


def test_fresh_install_equals_upgraded_install(admin: Any, two_schemas: tuple[str, str]) -> None:
    fresh, upgraded = two_schemas
    assert migrate(admin, fresh) == ["schema.sql"]
    expected = catalog(admin, fresh)
    known = _all_migrations()
    assert [m.version for m in known] == list(range(1, latest_version() + 1))
    for stop in range(1, len(known) + 1):
        # An install made by an older tenure: migrations 1..stop, with data, then upgraded.
        schema = f"{upgraded}_{stop}" if stop < len(known) else upgraded
        with admin.transaction():
            admin.execute(render(sql_text("migrate_schema"), schema).encode())
            admin.execute(render(sql_text("migrate_bookkeeping"), schema).encode())
            for step in known[:stop]:
                admin.execute(render(step.text, schema).encode())
                admin.execute(
                    render(
                        sql_text("migrate_record"),
                        schema,
                        version=str(step.version),
                        name=f"'{step.name}'",
                    ).encode()
                )
        _insert_jobs(admin, schema)
        applied = migrate(admin, schema)
        assert applied == [m.name for m in known[stop:]]
        try:
            assert catalog(admin, schema) == expected
        finally:
            if schema != upgraded:
                admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _insert_jobs(conn: Any, schema: str) -> None:
    conn.execute(
        render(
            "INSERT INTO {schema}.tenure_jobs (job_id, queue, state, available_at, "
            "max_attempts, created_at, updated_at) "
            "SELECT 'j' || g, 'default', 'ready', g, 5, g, g FROM generate_series(1, 50) g",
            schema,
        ).encode()
    )


def test_migrations_catalog_detects_a_difference(admin: Any, two_schemas: tuple[str, str]) -> None:
    """The comparison can fail: an index missing from one side is seen."""
    first, second = two_schemas
    migrate(admin, first)
    migrate(admin, second)
    assert catalog(admin, first) == catalog(admin, second)
    admin.execute(f'DROP INDEX "{second}".tenure_jobs_queued')
    assert catalog(admin, first) != catalog(admin, second)


def test_script_form_builds_the_same_schema(admin: Any, two_schemas: tuple[str, str]) -> None:
    by_driver, by_script = two_schemas
    migrate(admin, by_driver)
    admin.execute(migration_script(by_script, 0).encode())
    assert catalog(admin, by_script) == catalog(admin, by_driver)
    # tenure then finds it current and changes nothing.
    assert migrate(admin, by_script) == []
    assert "nothing to do" in migration_script(by_script, latest_version())


def test_concurrent_first_connects_migrate_once(schema: str, admin: Any) -> None:
    url = postgres_schema_url(schema)
    store_ids: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def start() -> None:
        try:
            barrier.wait()
            store = tenure.connect(url)
            store_ids.append(store.store_id)
            store.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len(set(store_ids)) == 1
    rows = admin.execute(
        render("SELECT version FROM {schema}.tenure_migrations", schema).encode()
    ).fetchall()
    assert [row[0] for row in rows] == list(range(1, latest_version() + 1))


def test_without_auto_migrate_an_old_schema_is_refused(schema: str) -> None:
    url = postgres_schema_url(schema) + "&auto_migrate=false"
    with pytest.raises(tenure.StoreUnavailable, match="tenure migrate"):
        tenure.connect(url)
    tenure.connect(postgres_schema_url(schema)).close()  # creates it
    tenure.connect(url).close()  # now current: fine


def test_a_newer_schema_is_refused(schema: str, admin: Any) -> None:
    tenure.connect(postgres_schema_url(schema)).close()
    admin.execute(
        render(
            "INSERT INTO {schema}.tenure_migrations (version, name) VALUES (999, 'future.sql')",
            schema,
        ).encode()
    )
    with pytest.raises(tenure.StoreUnavailable, match="upgrade tenure"):
        tenure.connect(postgres_schema_url(schema))


def test_a_foreign_table_is_not_taken_over(schema: str, admin: Any) -> None:
    admin.execute(f'CREATE SCHEMA "{schema}"')
    admin.execute(f'CREATE TABLE "{schema}".tenure_jobs (id int)')
    with pytest.raises(tenure.StoreUnavailable, match="not created by tenure"):
        tenure.connect(postgres_schema_url(schema))


def test_schemas_are_separate_stores(two_schemas: tuple[str, str]) -> None:
    first, second = (tenure.connect(postgres_schema_url(s)) for s in two_schemas)
    try:
        assert first.store_id != second.store_id
        first.submit("J", "in first")
        second.submit("J", "in second")
        assert first.get("J").payload == "in first"
        lease = first.claim("J", "A", 30)
        assert lease is not None
        assert second.get("J").state == "ready"
        with pytest.raises(tenure.InvalidArgument):
            second.complete(lease)  # a lease of another store
    finally:
        first.close()
        second.close()


def test_steps_of_a_fresh_install() -> None:
    steps = migration_steps("app", 0)
    assert steps[0][0] == "schema.sql"
    assert [d for d, _ in steps[1:]] == [f"record {m.name}" for m in _all_migrations()]
    assert migration_steps("app", latest_version()) == []


# -- the command -------------------------------------------------------------------------


def test_migrate_command(schema: str, admin: Any) -> None:
    url = postgres_schema_url(schema)
    runner = CliRunner()
    done = runner.invoke(main, ["--json", "--store", url, "migrate", "--dry-run"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["pending"] == ["schema.sql"]
    assert admin.execute(
        "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)
    ).fetchone() == (0,)  # a dry run changes nothing

    done = runner.invoke(main, ["--store", url, "migrate", "--sql"])
    assert done.exit_code == 0, done.output
    assert done.output.startswith(f'-- tenure: schema "{schema}" from version 0')
    assert "pg_advisory_xact_lock" in done.output

    done = runner.invoke(main, ["--json", "--store", url, "migrate"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert (report["applied"], report["version"]) == (["schema.sql"], latest_version())

    done = runner.invoke(main, ["--store", url, "migrate"])
    assert done.exit_code == 0, done.output
    assert "up to date" in done.output


def test_migrate_command_offline_script_and_bad_input() -> None:
    runner = CliRunner()
    url = "postgresql://nobody@127.0.0.1:1/none"
    done = runner.invoke(main, ["--store", url, "migrate", "--sql", "--from-version", "0"])
    assert done.exit_code == 0, done.output
    assert "CREATE TABLE" in done.output
    done = runner.invoke(main, ["--store", url, "migrate", "--sql", "--from-version", "99"])
    assert done.exit_code == 2
    done = runner.invoke(main, ["--store", url + "?pool_timeout=1", "migrate"])
    assert done.exit_code == 1
    assert "cannot reach PostgreSQL" in done.output


def test_driver_opened_around_a_migrated_schema(schema: str) -> None:
    driver = PostgresDriver.open(postgres_schema_url(schema))
    try:
        assert driver.schema == schema
    finally:
        driver.close()
