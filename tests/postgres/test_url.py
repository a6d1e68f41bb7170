"""postgresql:// URLs: tenure's own options are taken out, libpq gets the rest (and the PG*
environment variables), passwords never show."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

import tenure
from tenure.stores.postgres import parse_postgres_url
from tests.backends import POSTGRES_URL, postgres_admin, postgres_schema, postgres_schema_url
from tests.url_refusals import refused_on_open


def test_defaults() -> None:
    options = parse_postgres_url("postgresql://app@db.example:5433/jobs")
    assert options.conninfo == "postgresql://app@db.example:5433/jobs"
    assert (options.schema, options.pool_min, options.pool_max) == ("public", 1, 10)
    assert (options.pool_timeout, options.auto_migrate, options.listen) == (10.0, True, True)
    assert options.kwargs["connect_timeout"] == 10
    assert options.kwargs["fallback_application_name"] == "tenure"


def test_tenure_options_are_removed_libpq_ones_kept() -> None:
    options = parse_postgres_url(
        "postgres://app@h/db?schema=Jobs_2&sslmode=require&pool_max=3&pool_min=0"
        "&pool_timeout=2.5&auto_migrate=false&listen=off&application_name=billing"
        "&connect_timeout=3"
    )
    assert options.schema == "Jobs_2"
    assert (options.pool_min, options.pool_max, options.pool_timeout) == (0, 3, 2.5)
    assert (options.auto_migrate, options.listen) == (False, False)
    query = urlsplit(options.conninfo).query
    assert query == "sslmode=require&application_name=billing&connect_timeout=3"
    assert "connect_timeout" not in options.kwargs  # the URL's own value wins


def test_environment_is_not_overridden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "4")
    assert "connect_timeout" not in parse_postgres_url("postgresql://").kwargs


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("abc", "an int in ASCII digits"),
        ("-5", "from 0 to 2147483647"),  # (libpq waits forever; a URL's -5 is refused)
        ("1e9999", "an int in ASCII digits"),  # (psycopg: float() then int(), OverflowError)
        ("", "an int in ASCII digits"),  # (libpq: invalid integer value "")
        (" 5", "an int in ASCII digits"),
        ("2.5", "an int in ASCII digits"),
        ("\u00b2", "an int in ASCII digits"),  # int() takes a superscript two
        ("2147483648", "from 0 to 2147483647"),
    ],
)
def test_a_bad_connect_timeout_in_the_environment_is_refused_before_anything_is_opened(
    monkeypatch: pytest.MonkeyPatch, value: str, words: str
) -> None:
    # (The test's own connections are libpq's too: the variable is set only around the
    # attempts, and taken away for the look at the server.)
    with postgres_schema("tu") as schema, monkeypatch.context() as environment:

        def no_schema() -> None:
            with monkeypatch.context() as admin_env:
                admin_env.delenv("PGCONNECT_TIMEOUT")
                with postgres_admin() as admin:
                    query = "SELECT 1 FROM pg_namespace WHERE nspname = %s"
                    assert admin.execute(query, (schema,)).fetchone() is None

        environment.setenv("PGCONNECT_TIMEOUT", value)
        refused_on_open(
            postgres_schema_url(schema),
            f"the environment's value (libpq's connect_timeout) must be {words}",
            parse_postgres_url,
            no_schema,
            argument="PGCONNECT_TIMEOUT",
        )


@pytest.mark.parametrize("value", ["0", "1", "+7", "2147483647"])
def test_a_good_connect_timeout_in_the_environment_is_left_to_libpq(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("PGCONNECT_TIMEOUT", value)  # (libpq reads 1 as 2, 0 as no limit)
    assert "connect_timeout" not in parse_postgres_url("postgresql://h/db").kwargs


def test_the_urls_connect_timeout_wins_over_a_bad_one_in_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "abc")  # libpq does not read it: not checked
    options = parse_postgres_url("postgresql://h/db?connect_timeout=3")
    assert "connect_timeout=3" in options.conninfo
    assert "connect_timeout" not in options.kwargs


def test_password_is_kept_out_of_the_public_url() -> None:
    options = parse_postgres_url("postgresql://app:s3cret@h/db?password=other&schema=x")
    assert "s3cret" not in options.display_url
    assert "other" not in options.display_url
    assert options.display_url == "postgresql://app@h/db?schema=x"
    assert "s3cret" in options.conninfo  # libpq still gets it


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("postgresql://h/db?schema=1abc", "schema"),
        ("postgresql://h/db?schema=a-b", "schema"),
        ("postgresql://h/db?schema=pg_catalog", "reserved"),
        ("postgresql://h/db?schema=" + "s" * 49, "1-48"),
        ("postgresql://h/db?pool_max=0", "pool_max"),
        ("postgresql://h/db?pool_min=5&pool_max=2", "pool_min"),
        ("postgresql://h/db?pool_timeout=abc", "pool_timeout"),
        ("postgresql://h/db?auto_migrate=maybe", "auto_migrate"),
        ("postgresql://h/db?no_such_libpq_option=1", "not a valid PostgreSQL URL"),
        ("postgresql://h/db#frag", "fragment"),
        # Numbers only in ASCII digits: int() and float() take other scripts' digits.
        ("postgresql://h/db?pool_max=\u0663", "pool_max"),
        ("postgresql://h/db?pool_min=1_0", "pool_min"),
        ("postgresql://h/db?pool_timeout=%205", "pool_timeout"),
        ("postgresql://h/db?command_timeout=\u00b2", "command_timeout"),
        # libpq's numbers, which libpq (or psycopg) would refuse only on connecting.
        ("postgresql://h/db?connect_timeout=abc", "connect_timeout"),
        ("postgresql://h/db?connect_timeout=\u00b2", "connect_timeout"),
        ("postgresql://h/db?keepalives_idle=2147483648", "keepalives_idle"),
        ("postgresql://h/db?tcp_user_timeout=1.5", "tcp_user_timeout"),
        ("postgresql://h:\u00b2/db", "port"),
        ("postgresql://h:99999/db", "port"),
        ("postgresql://h1:5432,h2:x/db", "port"),
        ("postgresql://[::1]:0/db", "port"),
        ("postgresql://h/db?port=5432,abc", "port"),
        # libpq's words, which libpq refuses only on connecting too.
        ("postgresql://h/db?sslmode=requir", "sslmode"),
        ("postgresql://h/db?target_session_attrs=primaryy", "target_session_attrs"),
        ("postgresql://h/db?gssencmode=", "gssencmode"),
        # Malformed URLs.
        ("postgresql://[::1", "not a valid URL"),
        ("postgresql://h/db\n", "control characters"),
        # Host names no resolver takes (the connection met them as a bare UnicodeError).
        ("postgresql://.../db", "'...' is not a valid host name"),
        ("postgresql://u:p@a..b:5432/db", "'a..b' is not a valid host name"),
        ("postgresql://h1,...:5433/db", "'...' is not a valid host name"),
        ("postgresql://" + "x" * 64 + ".example/db", "not a valid host name"),
        ("postgresql://h/db?application_name=%ED%A0%80", "UTF-8"),
    ],
)
def test_bad_urls(url: str, words: str) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        parse_postgres_url(url)
    assert caught.value.argument == "url"
    assert words in str(caught.value)


def test_good_numbers_and_hosts_are_kept() -> None:
    options = parse_postgres_url(
        "postgresql://h1:5432,[::1]:5433,h3,%2Fvar%2Frun%2F" + "s" * 70 + "/db"
        "?port=5432,5433,,&connect_timeout=7"
        "&keepalives_idle=60&pool_timeout=.5"
    )
    assert options.pool_timeout == 0.5
    assert "connect_timeout" not in options.kwargs


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ("connect_timeout=abc", "connect_timeout"),
        ("connect_timeout=%C2%B2", "connect_timeout"),
        ("pool_max=%D9%A3", "pool_max"),  # Arabic-Indic 3: int() takes it
        ("keepalives=x", "keepalives"),
        ("sslmode=requir", "sslmode"),
        ("port=%C2%B2", "port"),
        ("application_name=%ED%A0%80", "UTF-8"),
    ],
)
def test_bad_urls_are_refused_before_the_schema_is_made(options: str, words: str) -> None:
    with postgres_schema("tu") as schema:

        def no_schema() -> None:
            with postgres_admin() as admin:
                found = admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
                assert found.fetchone() is None

        url = f"{postgres_schema_url(schema)}&{options}"
        refused_on_open(url, words, parse_postgres_url, no_schema)


def test_a_malformed_url_is_refused_by_every_way_of_opening() -> None:
    host = urlsplit(POSTGRES_URL).netloc
    refused_on_open(f"postgresql://{host}[/postgres", "not a valid URL", parse_postgres_url)
    refused_on_open("postgresql://.../postgres", "not a valid host name", parse_postgres_url)


def test_bad_url_refused_by_connect_before_any_io() -> None:
    with pytest.raises(tenure.InvalidArgument):
        tenure.connect("postgresql://127.0.0.1:1/x?schema=no-dashes")


def test_pg_environment_variables_are_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    target = urlsplit(POSTGRES_URL)
    monkeypatch.setenv("PGHOST", target.hostname or "127.0.0.1")
    monkeypatch.setenv("PGPORT", str(target.port or 5432))
    monkeypatch.setenv("PGUSER", target.username or "postgres")
    monkeypatch.setenv("PGDATABASE", target.path.lstrip("/") or "postgres")
    monkeypatch.setenv("PGAPPNAME", "from-the-environment")
    with postgres_schema("tu") as schema:
        store = tenure.connect(f"postgresql://?schema={schema}")
        try:
            store.submit("J")
            driver: Any = store._driver
            with driver._pool.connection() as conn:
                name = conn.execute("SHOW application_name").fetchone()[0]
            assert name == "from-the-environment"
            assert store.url == f"postgresql://?schema={schema}"
        finally:
            store.close()
