"""What the sync and async PostgreSQL drivers share, without I/O: URL options, SQL text,
schema naming, migration scripts, and turning psycopg errors and rows into tenure's terms."""

from __future__ import annotations

import os
import re
import select
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any, NamedTuple
from urllib.parse import SplitResult, parse_qsl, quote, urlencode

import psycopg
import psycopg_pool.base
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import RowMaker, no_result
from psycopg.types.array import ListBinaryDumper

from ..._protocol import JOB_COLUMNS, JobRow, Outcome, Status
from ..._resources import load_text
from ...errors import InvalidArgument, StoreLost, StoreUnavailable, TenureError
from .. import refuse_fragment, split_url, url_host, url_number, url_query
from ._timeline import TIMELINE_LIMIT, timeline_limit

__all__ = [
    "DEFAULT_SCHEMA",
    "Answer",
    "answer_row",
    "answers_of",
    "binary_lists",
    "closed_error",
    "connection_is_stale",
    "describe_pool",
    "parse_postgres_url",
    "reconnect_attempt",
    "PostgresOptions",
    "redact",
    "render",
    "socket_poller",
    "quote_ident",
    "quote_literal",
    "sql_set",
    "sql_text",
    "SqlSet",
    "Statement",
    "STORE_REPLACED",
    "StoreIdentity",
    "store_lost",
    "store_unavailable",
    "validate_schema",
]

_PACKAGE = __package__ or "tenure.stores.postgres"
DEFAULT_SCHEMA = "public"

# Schema names are plain identifiers so that they can be quoted without surprises and the
# notification channel "tenure_<schema>" fits PostgreSQL's 63-byte limit.
_SCHEMA_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

# libpq connection parameters tenure sets when neither the URL nor the environment does.
_LIBPQ_DEFAULTS: dict[str, tuple[str | None, int]] = {
    # parameter: (environment variable that also sets it, checked as the URL's parameter
    # would be, see _check_environment; value)
    "connect_timeout": ("PGCONNECT_TIMEOUT", 10),
    # A dead peer is noticed in about a minute instead of the OS's two hours.
    "keepalives_idle": (None, 30),
    "keepalives_interval": (None, 10),
    "keepalives_count": (None, 3),
}

# psycopg_pool waits 1 s after a failed connection attempt, then twice as long after each
# further one (1, 2, 4, 8 s...): a server down for 1.2 s was reached again after 3 s, one
# down for 4 s after 7 s, longer than a short lease. tenure's own pools wait 0.1 s, doubling
# to at most 0.5 s (see `reconnect_attempt`). None: a psycopg_pool without that class.
_BACKOFF: Any = getattr(psycopg_pool.base, "AttemptWithBackoff", None)
RECONNECT_FIRST = 0.1
RECONNECT_CAP = 0.5


def reconnect_attempt(attempt: Any, timeout: float) -> Any:
    """The backoff state of one of the pool's reconnection attempts, on tenure's schedule
    (for the pool's ``_add_connection``; None keeps psycopg_pool's own)."""
    if attempt is None:
        if _BACKOFF is None:
            return None
        attempt = _BACKOFF(timeout=timeout)
        attempt.INITIAL_DELAY = RECONNECT_FIRST
    # The pool multiplies the delay after each failure: capped here, before it does.
    attempt.delay = min(attempt.delay, RECONNECT_CAP / attempt.DELAY_BACKOFF)
    return attempt


# SQLSTATEs after which the statement certainly did not take effect: it was rolled back.
_NOT_APPLIED = {
    "57014": "the statement was cancelled (statement_timeout?)",
    "40001": "serialization failure",
    "40P01": "deadlock detected",
    "55P03": "lock not available (lock_timeout)",
    "25006": "the server is read-only (a standby, or during failover)",
    "53300": "too many connections",
    "57P03": "the server is starting up or shutting down",
    "53100": "the server's disk is full",
    "53200": "the server is out of memory",
}


@dataclass(frozen=True)
class PostgresOptions:
    """A ``postgresql://`` URL split into what libpq gets and what tenure keeps."""

    conninfo: str  # for libpq: the URL without tenure's own query options
    display_url: str  # the URL as given, without any password
    schema: str = DEFAULT_SCHEMA
    pool_min: int = 1
    pool_max: int = 10
    pool_timeout: float = 10.0
    auto_migrate: bool = True
    listen: bool = True
    command_timeout: float = 30.0
    kwargs: dict[str, Any] = field(default_factory=dict)  # extra connection parameters


def validate_schema(schema: object, argument: str = "schema") -> str:
    what = "" if argument == "schema" else "schema "  # e.g. "url: schema must be ..."
    if not isinstance(schema, str):
        raise InvalidArgument(argument, f"{what}must be a str, not {type(schema).__name__}")
    if not _SCHEMA_RE.fullmatch(schema):
        raise InvalidArgument(
            argument,
            f"{what}must be 1-48 characters of letters, digits and _, not starting with a "
            f"digit, got {schema!r}",
        )
    if schema.lower().startswith("pg_") or schema.lower() == "information_schema":
        raise InvalidArgument(argument, f"{what}{schema!r} is reserved by PostgreSQL")
    return schema


# libpq's integer parameters, checked here: libpq refuses a bad one only when it connects
# (psycopg, for connect_timeout, with a ProgrammingError), as if the server were away.
_LIBPQ_INTEGERS = (
    "connect_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
)
_INT_MAX = 2**31 - 1
# libpq's parameters that take one of a few words (libpq, like the integers, refuses a bad
# one only as it connects): a typo is the URL's fault.
_LIBPQ_WORDS = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "target_session_attrs": (
        "any",
        "read-write",
        "read-only",
        "primary",
        "standby",
        "prefer-standby",
    ),
    "load_balance_hosts": ("disable", "random"),
}


def _check_libpq(parts: SplitResult, query: list[tuple[str, str]]) -> None:
    """Refuse a port (of each host, or the ``port`` list) or an integer libpq parameter that
    is not written in ASCII digits or is out of range, or a libpq parameter of a few words
    given another, before anything is opened."""
    hosts = parts.netloc.rpartition("@")[2]
    ports = [host.rpartition("]")[2].partition(":")[2] for host in hosts.split(",")]
    for host in hosts.split(","):
        url_host(host if host.startswith("[") else host.partition(":")[0])
    for key, value in query:
        if key == "port":
            ports.extend(value.split(","))
        elif key in _LIBPQ_INTEGERS:
            url_number(key, value, 0, _INT_MAX, int)
        elif key in _LIBPQ_WORDS and value not in _LIBPQ_WORDS[key]:
            raise InvalidArgument(
                "url", f"{key} must be one of {', '.join(_LIBPQ_WORDS[key])}, got {value!r}"
            )
    for port in ports:
        if port:
            url_number("the port", port, 1, 65535, int)


def _check_environment(env: str, name: str) -> None:
    """Refuse the environment variable ``env``, which libpq reads for its integer parameter
    ``name`` when the URL does not give it, as ``name`` in the URL would be refused, before
    anything is opened: psycopg refuses a bad PGCONNECT_TIMEOUT only as it connects (with a
    ProgrammingError), and libpq an empty one too."""
    try:
        url_number(f"the environment's value (libpq's {name})", os.environ[env], 0, _INT_MAX, int)
    except InvalidArgument as exc:
        raise InvalidArgument(env, exc.rule) from None


def _flag(name: str, text: str) -> bool:
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise InvalidArgument("url", f"{name} must be true or false, got {text!r}")


def redact(url: str) -> str:
    """The URL without a password (in the authority or as a query parameter)."""
    parts = split_url(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hosts = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}@{hosts}" if user else hosts
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "password"]
    return _unsplit(parts.scheme, netloc, parts.path, query)


def describe_pool(conninfo: str) -> str:
    """A URL naming where a caller's pool connects (URL or key=value form), no password."""
    try:
        params = conninfo_to_dict(conninfo) if conninfo else {}
    except psycopg.ProgrammingError:
        params = {}
    user = f"{quote(str(params['user']), safe='')}@" if params.get("user") else ""
    host = quote(str(params.get("host", "")), safe=",")
    port = f":{params['port']}" if params.get("port") else ""
    dbname = f"/{quote(str(params['dbname']), safe='')}" if params.get("dbname") else ""
    return f"postgresql://{user}{host}{port}{dbname}"


def _unsplit(scheme: str, netloc: str, path: str, query: list[tuple[str, str]]) -> str:
    # Always scheme://...: libpq reads "postgresql:" alone as a key=value string.
    url = f"{scheme}://{netloc}{path}"
    return f"{url}?{urlencode(query, quote_via=quote)}" if query else url


def parse_postgres_url(url: str) -> PostgresOptions:
    """``postgresql://[user[:password]@][host][:port][/dbname][?param=value&...]``.

    libpq parameters (``sslmode``, ``application_name``, ...) and the ``PG*`` environment
    variables work as with ``psql``. tenure's own options, removed before libpq sees the
    URL: ``schema`` (default ``public``), ``pool_min`` (1), ``pool_max`` (10),
    ``pool_timeout`` (seconds to wait for a connection, 10), ``auto_migrate`` (true: create
    or upgrade the schema on connect) and ``listen`` (true: idle workers wait on
    LISTEN/NOTIFY; false: they poll, e.g. behind PgBouncer in transaction mode) and
    ``command_timeout`` (seconds a statement may run, its wait for a synchronous standby
    included, before the client cancels it, 30; see ``_bound.py``).
    """
    parts = split_url(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise InvalidArgument("url", f"must start with postgresql://, got {redact(url)!r}")
    refuse_fragment(url)
    options: dict[str, Any] = {}
    libpq_query: list[tuple[str, str]] = []
    for key, value in url_query(parts):
        if key == "schema":
            options["schema"] = validate_schema(value, "url")
        elif key == "pool_min":
            options["pool_min"] = url_number(key, value, 0, 1000, int)
        elif key == "pool_max":
            options["pool_max"] = url_number(key, value, 1, 1000, int)
        elif key == "pool_timeout":
            options["pool_timeout"] = url_number(key, value, 0.1, 3600, float)
        elif key == "auto_migrate":
            options["auto_migrate"] = _flag(key, value)
        elif key == "listen":
            options["listen"] = _flag(key, value)
        elif key == "command_timeout":
            options["command_timeout"] = url_number(key, value, 0.1, 86400, float)
        else:
            libpq_query.append((key, value))
    if options.get("pool_min", 1) > options.get("pool_max", 10):
        raise InvalidArgument("url", "pool_min must not exceed pool_max")
    _check_libpq(parts, libpq_query)
    conninfo = _unsplit(parts.scheme, parts.netloc, parts.path, libpq_query)
    try:
        given = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        raise InvalidArgument("url", f"not a valid PostgreSQL URL: {exc}") from None
    kwargs: dict[str, Any] = {}
    for name, (env, default) in _LIBPQ_DEFAULTS.items():
        if name in given:
            continue  # the URL's own value: libpq reads no environment variable for it
        if env is not None and env in os.environ:
            _check_environment(env, name)
        else:
            kwargs[name] = default
    kwargs["fallback_application_name"] = "tenure"
    return PostgresOptions(conninfo=conninfo, display_url=redact(url), kwargs=kwargs, **options)


# -- SQL -----------------------------------------------------------------------------------


def quote_ident(name: str) -> str:
    return '"' + validate_schema(name) + '"'


def quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def render(text: str, schema: str, **values: str) -> str:
    """Fill the placeholders of a SQL file: ``{schema}`` (the quoted schema name),
    ``{schema_name}`` (it as a string literal), ``{channel}`` (the quoted LISTEN channel)
    and any ``values`` (already SQL: numbers or quoted literals)."""
    quoted = quote_ident(schema)
    filled = {
        "schema": quoted,
        "schema_name": quote_literal(schema),
        "channel": quote_ident_any(channel_name(schema)),
        "ended_channel": quote_ident_any(f"tenure_end_{schema}"),
        "migrations_table": quote_literal(f"{quoted}.tenure_migrations"),
        "jobs_table": quote_literal(f"{quoted}.tenure_jobs"),
        # _same_store.sql without an identity: each compared with itself.
        "jobs_oid": quote_literal(f"{quoted}.tenure_jobs") + "::regclass::oid",
        "same_rows": "true",
        **values,
    }
    filled.setdefault("id_xmin", "m.xmin")
    for key, value in filled.items():
        text = text.replace("{" + key + "}", value)
    return text


def quote_ident_any(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def channel_name(schema: str) -> str:
    """The NOTIFY channel of a schema (what the trigger in schema.sql computes)."""
    return f"tenure_{schema}"


def sql_text(name: str) -> str:
    """A SQL file, with each ``{include:NAME}`` line replaced by the file ``NAME.sql``
    (fragments shared by several statements live once)."""
    text = load_text(_PACKAGE, f"sql/{name}.sql")
    return _INCLUDE.sub(lambda found: sql_text(found.group(1)).rstrip("\n"), text)


_INCLUDE = re.compile(r"\{include:(\w+)\}")


class Statement(NamedTuple):
    """One operation's SQL with PostgreSQL's own ``$1, $2...`` placeholders, for psycopg's
    raw cursors (with `binary_lists`): psycopg then has no placeholders to parse on each execution
    (it caches its parsing of ``%(name)s`` only for statements up to 4 kB, and some of
    these are longer), and the parameters go in the order of ``names``."""

    text: bytes
    names: tuple[str, ...]

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        return [params[name] for name in self.names]


# In the .sql files: %(name)s for a scalar, %(name)b for an array (see `binary_lists`).
_PLACEHOLDER = re.compile(r"%\((\w+)\)[sb]")


def statement(text: str) -> Statement:
    """``text`` with each distinct ``%(name)s`` / ``%(name)b`` numbered in order of first
    appearance."""
    names: dict[str, int] = {}

    def number(found: re.Match[str]) -> str:
        return f"${names.setdefault(found.group(1), len(names) + 1)}"

    converted = _PLACEHOLDER.sub(number, text)
    if "%(" in converted:
        raise ValueError(f"a placeholder is neither %(name)s nor %(name)b: {text[:80]!r}")
    return Statement(converted.encode(), tuple(names))


def binary_lists(cursor: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any]) -> None:
    """Send this cursor's list parameters (the arrays of batch operations) in binary: the
    text form quotes every element through a regular expression (81 against 37 us for a
    10-element batch). Only this cursor's adapters change, not its connection's."""
    cursor.adapters.register_dumper(list, ListBinaryDumper)


class StoreIdentity(NamedTuple):
    """What tells one copy of a store from another (see sql/_same_store.sql): the oid of
    its jobs table and the xmin of its id's row, as ``store_open.sql`` answers them
    (``"<oid> <xmin>"``)."""

    jobs_oid: int
    id_xmin: int

    @classmethod
    def parse(cls, text: str) -> StoreIdentity:
        jobs_oid, id_xmin = text.split()
        return cls(int(jobs_oid), int(id_xmin))

    def __str__(self) -> str:
        return f"jobs table oid {self.jobs_oid}, store id row xmin {self.id_xmin}"


class SqlSet:
    """The statements of one schema, rendered once; with ``identity``, each refuses to run
    on another copy of the store (see sql/_same_store.sql)."""

    OPERATIONS = (
        "clock",
        "get",
        "list_page",
        "queue_stats",
        "attempts",
        "next_due",
        "submit",
        "submit_many",
        "submit_unique",
        "listen_ended",
        "wait_register",
        "wait_unregister",
        "wait_get",
        "claim",
        "claim_next",
        "renew",
        "renew_many",
        "complete",
        "complete_many",
        "complete_and_claim",
        "release",
        "fail",
        "find_leases",
        "listen",
        "unlisten",
        "wake",
        "store_id",
        "cancel",
        "requeue",
        "delete",
        "purge",
        "pause_queue",
        "paused_queues",
        "set_queue_limit",
        "queue_limits",
        "set_queue_rate",
        "queue_rates",
        "schedule_put",
        "schedule_delete",
        "schedule_list",
        "confirm_replication",
    )

    # The statements that issue generations: they also check the store's rows (see
    # sql/_same_store.sql).
    CLAIMS = ("claim", "claim_next", "complete_and_claim")

    def __init__(self, schema: str, identity: StoreIdentity | None = None) -> None:
        self.schema = schema
        values = {}
        if identity is not None:
            values = {"jobs_oid": str(identity.jobs_oid), "id_xmin": f"'{identity.id_xmin}'"}
        same_rows = sql_text("_same_rows").rstrip("\n")
        self._statements = {
            name: statement(
                render(
                    sql_text(name).replace(
                        "{same_rows}", same_rows if name in self.CLAIMS else "true"
                    ),
                    schema,
                    **values,
                )
            )
            for name in self.OPERATIONS
        }

    def __getitem__(self, name: str) -> Statement:
        return self._statements[name]


# Shared by every store of a schema and identity in the process: rendering the statements
# costs about 1 ms of CPU, which each store a worker opens (two) would pay again.
sql_set = lru_cache(maxsize=16)(SqlSet)


# -- results and errors --------------------------------------------------------------------


class Answer(NamedTuple):
    """One result row of the driver's statements, read by column name (see `answer_row`)."""

    outcome: Outcome
    raced: bool  # it did not apply only because a concurrent writer changed the job
    due: float | None  # next_due.sql: when the next job becomes claimable


# The row reader of each statement text, made from its first answer's column names.
_READERS: dict[bytes, Callable[[Sequence[Any]], Answer]] = {}


def answers_of(text: bytes, cursor: Any, rows: Sequence[Sequence[Any]]) -> list[Answer]:
    """The `Answer` of each row (plain tuples) a statement answered: its columns found by
    name once per statement text, since one text always answers the same columns."""
    read = _READERS.get(text)
    if read is None:
        read = _READERS[text] = answer_row(cursor)
    return [read(row) for row in rows]


def answer_row(cursor: Any) -> RowMaker[Answer]:
    """A psycopg row factory for the driver's statements: each row as an `Answer`, its
    columns found by name (``status``, the job columns, ``now``, ``raced``, ``due``; those
    a statement does not answer take their defaults: a row of get.sql or list.sql is
    ``applied``, or ``missing`` when its job columns are NULL)."""
    result = cursor.pgresult
    if result is None or not result.nfields:
        return no_result
    return _answer_maker(tuple(map(result.fname, range(result.nfields))))


_JOB_NAMES = tuple(name.encode() for name in JOB_COLUMNS)


@cache
def _answer_maker(names: tuple[bytes | None, ...]) -> Callable[[Sequence[Any]], Answer]:
    # Built once per shape of answer (the places of its columns, from their names): this
    # runs for every row of every operation, so each shape gets a closure without lookups.
    where = {name: i for i, name in enumerate(names) if name is not None}
    now = where[b"now"]
    if b"job_id" not in where:  # clock.sql, next_due.sql, purge.sql
        # purge.sql's count of deleted jobs comes back in the place of a due time.
        due = where.get(b"due", where.get(b"deleted"))

        def timing(values: Sequence[Any]) -> Answer:
            when = None if due is None or values[due] is None else float(values[due])
            return Answer(Outcome(Status.APPLIED, None, float(values[now])), False, when)

        return timing
    first = where[b"job_id"]
    end = first + len(_JOB_NAMES)
    if names[first:end] != _JOB_NAMES:
        raise RuntimeError(f"a statement answers the job columns out of order: {names!r}")
    status, raced = where.get(b"status"), where.get(b"raced")
    if status is None:  # get.sql, list.sql

        def read(values: Sequence[Any]) -> Answer:
            if values[first] is None:
                return Answer(Outcome(Status.MISSING, None, float(values[now])), False, None)
            job = JobRow._make(values[first:end])
            return Answer(Outcome(Status.APPLIED, job, float(values[now])), False, None)

        return read

    def answered(values: Sequence[Any]) -> Answer:
        job = None if values[first] is None else JobRow._make(values[first:end])
        return Answer(
            Outcome(values[status], job, float(values[now])),
            raced is not None and values[raced] is True,
            None,
        )

    return answered


# The words of sql/_store_replaced.sql's error.
STORE_REPLACED = "tenure store replaced"
# The words of sql/_timeline.sql's error.
TIMELINE_REFUSED = "tenure timeline"


def _first_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    # The failing cast's own words around the message: invalid input syntax for type ...
    start, end = text.find('"'), text.rfind('"')
    return text[start + 1 : end] if 0 <= start < end else text


_WHAT_TO_DO = (
    "Generations could be issued again. This client refuses to go on: stop the workers and "
    "read 'A store restored from a backup' in docs/postgres.md before starting them again"
)


def store_lost(operation: str, what: str | None = None) -> StoreLost:
    """The error of a statement that found the store's tables replaced or gone (see
    sql/_same_store.sql), or of an open that found them replaced (``what``)."""
    what = what or (
        "the PostgreSQL store is no longer the one this client opened: its tables were "
        "replaced or dropped (a restore from a dump with pg_restore --clean or a data-only "
        "restore, or a drop and re-create), so its jobs may be older than what this store "
        "already issued"
    )
    return StoreLost(
        f"{operation}: {what}. {_WHAT_TO_DO}; nothing changed",
        operation=operation,
        outcome_unknown=False,
    )


def store_unavailable(operation: str, exc: psycopg.Error, *, sent: bool) -> TenureError | None:
    """The StoreUnavailable an error means (or, for sql/_next_generation.sql's refusal,
    GenerationExhausted), or None when it is not about availability (a
    bug, or a schema someone changed: those propagate as they are).

    ``sent``: whether the statement may have reached the server. A connection lost after
    that leaves the outcome unknown (it may have committed before the reply was lost).
    """
    sqlstate = getattr(exc, "sqlstate", None)
    if (sqlstate == "22P02" and STORE_REPLACED in str(exc)) or (
        sqlstate == "42P01" and "tenure_" in str(exc)
    ):
        # The statement failed before changing anything (see sql/_store_replaced.sql), or
        # found the store's tables gone (dropped, or mid-way through a restore).
        return store_lost(operation)
    if sqlstate == "22P02" and TIMELINE_LIMIT in str(exc):
        return timeline_limit(operation, exc)
    if sqlstate == "22P02" and TIMELINE_REFUSED in str(exc):
        # sql/_timeline.sql: nothing changed.
        return StoreUnavailable(
            f"{operation}: PostgreSQL refused to issue a generation: {_first_line(exc)}. "
            "Generations after a failover could repeat earlier ones; nothing changed (read "
            "'Failover' in docs/postgres.md)",
            operation=operation,
            outcome_unknown=False,
        )
    if sqlstate == "55000" and "recovery is in progress" in str(exc):
        # pg_current_wal_lsn() on a standby (sql/_timeline.sql).
        return StoreUnavailable(
            f"{operation}: the PostgreSQL server is a standby (recovery is in progress), "
            "which cannot issue generations; it did not take effect: connect to the primary "
            "(target_session_attrs=read-write with several hosts), retry later",
            operation=operation,
            outcome_unknown=False,
        )
    if sqlstate in _NOT_APPLIED:
        reason = _NOT_APPLIED[sqlstate]
        return StoreUnavailable(
            f"{operation}: PostgreSQL refused it: {reason} ({exc}); it did not take effect, "
            "retry later",
            operation=operation,
            outcome_unknown=False,
        )
    if not isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return None
    if not sent:
        return StoreUnavailable(
            f"{operation}: no PostgreSQL connection available ({exc}); nothing was sent, "
            "retry later",
            operation=operation,
            outcome_unknown=False,
        )
    return StoreUnavailable(
        f"{operation}: the PostgreSQL connection was lost during the operation ({exc}); it "
        "may or may not have taken effect",
        operation=operation,
        outcome_unknown=True,
    )


def closed_error(operation: str) -> StoreUnavailable:
    return StoreUnavailable(
        f"{operation}: this store was closed", operation=operation, outcome_unknown=False
    )


def socket_poller(conn: psycopg.BaseConnection[Any]) -> Any:
    """A ``select.poll`` object watching the connection's socket for input, for
    `connection_is_stale` on a connection checked again and again (about half the cost of
    a ``select.select`` call, which builds its descriptor sets each time). None where
    ``poll`` is missing (Windows)."""
    if not hasattr(select, "poll"):
        return None
    poller = select.poll()
    poller.register(conn.pgconn.socket, select.POLLIN)
    return poller


def connection_is_stale(conn: psycopg.BaseConnection[Any], poller: Any = None) -> bool:
    """True when an idle pooled connection is known dead before any request is sent on it:
    the server closed it (restart, pg_terminate_backend, idle timeout). One ``select`` (or
    ``poller.poll``, from `socket_poller` for this connection) with no wait; an idle
    autocommit connection normally has nothing to read."""
    pgconn = conn.pgconn
    if pgconn.status != pq.ConnStatus.OK or pgconn.transaction_status != pq.TransactionStatus.IDLE:
        return True
    for _ in range(3):
        try:
            if poller is not None:
                readable: Any = poller.poll(0)
            else:
                readable, _, _ = select.select([pgconn.socket], [], [], 0)
        except (OSError, ValueError, psycopg.OperationalError):
            return True
        if not readable:
            return False
        try:
            # Reads what arrived: a notice, or the FATAL message and end of stream of a
            # terminated backend (the latter raises).
            pgconn.consume_input()
        except psycopg.OperationalError:
            return True
        if pgconn.status != pq.ConnStatus.OK:
            return True
    return False
