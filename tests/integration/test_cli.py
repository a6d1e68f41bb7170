"""The ``tenure`` command line: CliRunner for the details, real subprocesses for the
installed entry points (``python -m tenure`` and the ``tenure`` script)."""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import tenure
import tenure.fence
from tenure.cli import COMMANDS, main
from tenure.cli._demo import DemoResult, render, run_demo
from tenure.cli._output import Output
from tests.backends import (
    BACKENDS,
    POSTGRES,
    POSTGRES_URL,
    REDIS,
    REDIS_URL,
    SQLITE,
    Backend,
    redis_client,
)
from tests.integration._support import as_json, listed, ok

DEMO_LINES = (
    "The clock is simulated",
    "claims report-42 -> generation 7",
    "claims report-42 -> generation 8",
    "fenced with 8 -> accepted",
    "REJECTED by the destination: StaleToken",
    "REJECTED by the store: LeaseLost",
    "OK: every step behaved as the story says.",
)


# -- demo --------------------------------------------------------------------------------


def test_demo_tells_the_story_and_exits_0(cli: Any) -> None:
    out = ok(cli("demo")).stdout
    for line in DEMO_LINES:
        assert line in out, line
    assert "\x1b[" not in out  # not a terminal: plain text, no colours
    assert "FAILED" not in out
    # the timeline is in order
    positions = [out.index(line) for line in DEMO_LINES[1:]]
    assert positions == sorted(positions)
    assert "reports[report-42] = 'total 1234 (by worker-b)'" in out
    assert "tenure_fence[report-42] = 8" in out


def test_demo_names_the_dashboard_command_that_shows_its_store(cli: Any) -> None:
    from starlette.testclient import TestClient

    from tenure.dashboard import create_app

    lines = ok(cli("demo")).stdout.strip().splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith("Look at it"))
    look = lines[at].removeprefix("Look at it in the browser: ")
    assert look.startswith("tenure dashboard --store sqlite:///"), lines[at]
    kept = Path(lines[at + 1].split(" kept in ")[1].split(";")[0])
    assert lines[-2] == "OK: every step behaved as the story says."  # the verdict stays last
    try:
        assert look == f"tenure dashboard --store {shlex.quote(f'sqlite:///{kept}/store.db')}"
        with tenure.connect(shlex.split(look)[-1]) as store:
            with TestClient(create_app(store, read_only=True)) as client:
                page = client.get("/job", params={"id": "report-42"}).text
            assert "worker-b" in page
            assert store.get("report-42").state == "done"
        answer = as_json(cli("demo", "--json"))
        assert answer["dashboard"].startswith("tenure dashboard --store sqlite:///")
        shutil.rmtree(answer["kept"])
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def test_demo_json(cli: Any) -> None:
    report = as_json(cli("demo", "--json"))
    assert report["ok"] is True
    assert report["failure"] is None
    assert "simulated" in report["clock"]
    steps = report["steps"]
    assert [(s["actor"], s["action"]) for s in steps] == [
        ("store", "job report-42"),
        ("worker-a", "claim"),
        ("worker-a", "stall"),
        ("store", "expire"),
        ("worker-b", "claim"),
        ("worker-b", "write"),
        ("worker-b", "complete"),
        ("worker-a", "wake"),
        ("worker-a", "write"),
        ("worker-a", "complete"),
    ]
    assert all(s["ok"] for s in steps)
    assert [s["t"] for s in steps] == [None, 0, 1, 31, 31, 32, 33, 45, 45, 45]
    job = report["final"]["job"]
    assert (job["state"], job["owner"], job["generation"], job["result"]) == (
        "done",
        "worker-b",
        8,
        {"total": 1234},
    )
    assert [(r["written_by"], r["generation"]) for r in report["final"]["destination"]] == [
        ("worker-b", 8)
    ]
    assert [(f["job_id"], f["generation"]) for f in report["final"]["fence"]] == [("report-42", 8)]


def test_demo_json_from_the_global_option_and_the_environment(cli: Any) -> None:
    assert as_json(cli("--json", "demo"))["ok"] is True
    assert as_json(cli("demo", env={"TENURE_JSON": "1"}))["ok"] is True
    assert not ok(cli("demo", env={"TENURE_JSON": "0"})).stdout.startswith("{")


def test_demo_is_deterministic(tmp_path: Path) -> None:
    def steps(name: str) -> list[Any]:
        (tmp_path / name).mkdir()
        steps: list[Any] = run_demo(tmp_path / name).to_dict()["steps"]
        return steps

    assert steps("one") == steps("two")


class _Unfenced:
    """A broken fence: it records every token without comparing it to the highest seen."""

    def __init__(self, conn: Any, token: tenure.FencingToken) -> None:
        self.conn = conn
        self.token = token

    def __enter__(self) -> Any:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(
            "INSERT OR REPLACE INTO tenure_fence (job_id, generation) VALUES (?, ?)",
            (self.token.job_id, self.token.generation),
        )
        return self.conn.cursor()

    def __exit__(self, *exc: object) -> None:
        self.conn.execute("COMMIT")


def test_demo_fails_loudly_when_a_step_misbehaves(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tenure.fence, "sql_fence", _Unfenced)
    result = cli("demo")
    assert result.exit_code == 1
    assert "FAILED" in result.stdout
    assert "OK: every step" not in result.stdout
    assert result.stderr.count("\n") == 1
    assert "demo failed at step 9 (worker-a: write)" in result.stderr
    assert "ACCEPTED the stale write" in result.stderr
    report = json.loads(cli("demo", "--json").stdout)
    assert report["ok"] is False
    assert report["steps"][-1]["ok"] is False
    assert len(report["steps"]) == 9  # the story stops at the first broken step


def test_demo_renders_with_rich_on_a_terminal(tmp_path: Path) -> None:
    rich_console = pytest.importorskip("rich.console")
    buffer = io.StringIO()
    console = rich_console.Console(file=buffer, force_terminal=True, width=100)
    render(Output(rich=True, console=console), run_demo(tmp_path))
    text = buffer.getvalue()
    assert "\x1b[" in text  # styled
    assert "REJECTED by the destination" in text
    assert "OK: every step behaved as the story says." in text


def test_a_failed_demo_result_is_not_ok() -> None:
    assert DemoResult().ok is False  # no steps: nothing was shown to work


# -- jobs and now ------------------------------------------------------------------------


def test_submit_show_list_json(cli: Any) -> None:
    job = as_json(
        cli(
            "jobs", "submit", "report-1", "--payload", '{"month": "2026-11"}', "--queue",
            "reports", "--max-attempts", "3", "--json",
        )
    )  # fmt: skip
    assert (job["job_id"], job["queue"], job["state"], job["generation"]) == (
        "report-1",
        "reports",
        "ready",
        0,
    )
    assert (job["payload"], job["max_attempts"], job["attempts"]) == ({"month": "2026-11"}, 3, 0)
    assert job["created"] is True
    shown = as_json(cli("jobs", "show", "report-1", "--json"))
    assert shown | {"as_of": 0, "created": None} == job | {"as_of": 0, "created": None}
    ok(cli("jobs", "submit", "later", "--delay", "60", "--json"))
    jobs = listed(cli("jobs", "list", "--json"))
    assert [j["job_id"] for j in jobs] == ["report-1", "later"]
    later = jobs[1]
    assert later["available_at"] - later["as_of"] == pytest.approx(60, abs=1)
    assert [j["job_id"] for j in listed(cli("jobs", "list", "--queue", "reports", "--json"))] == [
        "report-1"
    ]
    assert listed(cli("jobs", "list", "--state", "done", "--json")) == []
    assert len(listed(cli("jobs", "list", "--limit", "1", "--json"))) == 1


def test_list_reflects_claims_made_through_the_library(cli: Any, url: str) -> None:
    ok(cli("jobs", "submit", "a"))
    with tenure.connect(url) as store:
        lease = store.claim("a", "worker-1", 60)
        assert lease is not None
    jobs = listed(cli("jobs", "list", "--state", "leased", "--json"))
    assert [(j["job_id"], j["owner"], j["generation"]) for j in jobs] == [("a", "worker-1", 1)]
    table = ok(cli("jobs", "list")).stdout.splitlines()
    assert table[0].split() == ["JOB", "QUEUE", "PRI", "STATE", "GEN", "OWNER", "ATTEMPTS", "WHEN"]
    assert table[1].split()[:7] == ["a", "default", "0", "leased", "1", "worker-1", "1/5"]
    assert "lease ends in" in table[1]


def test_human_output_is_plain_text(cli: Any) -> None:
    out = ok(cli("jobs", "submit", "a", "--payload", "[1, 2]")).stdout
    assert out.startswith("submitted a to queue default: due now\n")
    assert "\x1b[" not in out
    shown = ok(cli("jobs", "show", "a")).stdout
    fields = dict(line.split(None, 1) for line in shown.splitlines() if " " in line.strip())
    assert fields["state"].strip() == "ready"
    assert fields["payload"].strip() == "[1, 2]"
    again = ok(cli("jobs", "submit", "a", "--payload", '"other"')).stdout
    assert again == (
        "a already exists (submit is idempotent): left unchanged "
        "(ready, generation 0, payload [1, 2])\n"
    )
    assert ok(cli("jobs", "list", "--state", "dead")).stdout.startswith("no jobs with state dead")


def test_json_submit_says_whether_it_created_the_job(cli: Any) -> None:
    """Issue #13 point 8: a script can tell a new job from an existing one left unchanged."""
    first = as_json(cli("jobs", "submit", "j1", "--payload", "1", "--json"))
    again = as_json(cli("jobs", "submit", "j1", "--payload", "2", "--json"))
    same = as_json(cli("jobs", "submit", "j1", "--payload", "1", "--json"))  # same request
    assert (first["created"], again["created"], same["created"]) == (True, False, False)
    assert again["payload"] == 1
    assert as_json(cli("jobs", "show", "j1", "--json"))["created"] is None


def test_payload_from_stdin(cli: Any) -> None:
    job = as_json(cli("jobs", "submit", "s", "--payload", "-", "--json", stdin='{"a": [1]}'))
    assert job["payload"] == {"a": [1]}


def test_now(cli: Any, url: str) -> None:
    tenure.connect(url).close()
    before = time.time()
    report = as_json(cli("now", "--json"))
    assert before - 1 <= report["now"] <= time.time() + 1
    assert report["iso"].endswith("Z")
    assert report["store"].startswith("sqlite:///")
    assert "store time of sqlite:///" in ok(cli("now")).stdout


# -- options and environment -------------------------------------------------------------


def test_environment_mirrors_options(cli: Any, tmp_path: Path) -> None:
    other = f"sqlite:///{tmp_path / 'other.db'}"
    ok(cli("jobs", "submit", "in-other", env={"TENURE_STORE_URL": other}))
    ok(cli("jobs", "submit", "in-default"))
    ids = [
        j["job_id"] for j in listed(cli("jobs", "list", "--json", env={"TENURE_STORE_URL": other}))
    ]
    assert ids == ["in-other"]
    # an explicit --store (global or after the command) beats TENURE_STORE_URL
    assert [j["job_id"] for j in listed(cli("--store", other, "jobs", "list", "--json"))] == ids
    assert [j["job_id"] for j in listed(cli("jobs", "list", "--store", other, "--json"))] == ids
    # TENURE_JSON, and per-command options as TENURE_<COMMAND>_<OPTION>
    env = {
        "TENURE_JSON": "true",
        "TENURE_JOBS_SUBMIT_QUEUE": "q2",
        "TENURE_JOBS_SUBMIT_MAX_ATTEMPTS": "9",
    }
    job = json.loads(ok(cli("jobs", "submit", "from-env", env=env)).stdout)
    assert (job["queue"], job["max_attempts"]) == ("q2", 9)
    jobs = json.loads(
        ok(cli("jobs", "list", env={"TENURE_JSON": "1", "TENURE_JOBS_LIST_QUEUE": "q2"})).stdout
    )["jobs"]
    assert [j["job_id"] for j in jobs] == ["from-env"]


def test_help_lists_every_registered_command(cli: Any) -> None:
    out = ok(cli("--help")).stdout
    for name in COMMANDS:
        assert name in out
    assert "TENURE_STORE_URL" in out
    assert "TENURE_JSON" in out
    assert tenure.__version__ in ok(cli("--version")).stdout
    for name, target in COMMANDS.items():
        module, _, attribute = target.partition(":")
        assert isinstance(
            getattr(__import__(module, fromlist=[attribute]), attribute), click.Command
        ), name


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("jobs", "show", "missing"), 1, "job 'missing' does not exist"),
        (("jobs", "submit", ""), 2, "job_id: must not be empty"),
        (("jobs", "submit", "a\x01b"), 2, "job_id: must not contain control characters"),
        (("jobs", "submit", "x" * 256), 2, "job_id: must be at most 255 characters"),
        (("jobs", "submit", "a", "--payload", "{bad"), 2, "--payload: must be JSON text"),
        (("jobs", "submit", "a", "--payload", "NaN"), 2, "--payload: must be JSON text"),
        (("jobs", "submit", "a", "--delay", "nan"), 2, "'--delay': must be a duration like"),
        (("jobs", "submit", "a", "--delay", "-1"), 2, "'--delay': must be 0 seconds or more"),
        (("jobs", "submit", "a", "--delay", "367d"), 2, "delay: must be from 0 seconds"),
        (("jobs", "submit", "a", "--max-attempts", "0"), 2, "max_attempts: must be from 1"),
        (("jobs", "list", "--limit", "0"), 2, "limit: must be from 1 to 1000"),
        (("--store", "nosuch://x", "now"), 2, "url: unknown store scheme 'nosuch://'"),
        (("jobs", "list", "--state", "bogus"), 2, "'bogus' is not one of"),
        (("jobs", "frobnicate"), 2, "No such command 'frobnicate'"),
    ],
)
def test_errors_are_one_line_with_an_exit_code(
    cli: Any, url: str, args: tuple[str, ...], code: int, message: str
) -> None:
    tenure.connect(url).close()  # the store exists (reading a missing one is another error)
    result = cli(*args)
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert message in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not isinstance(result.exception, tenure.TenureError)
    if isinstance(result.exception, SystemExit) and "Usage:" not in result.stderr:
        assert result.stderr.count("\n") == 1, result.stderr


def test_errors_are_json_with_json(cli: Any, url: str) -> None:
    tenure.connect(url).close()
    result = cli("--json", "jobs", "show", "missing")
    assert result.exit_code == 1
    error = json.loads(result.stderr)
    assert error["error"] == "JobNotFound"
    assert "missing" in error["message"]
    result = cli("jobs", "submit", "", "--json")
    assert result.exit_code == 2
    assert json.loads(result.stderr)["error"] == "InvalidArgument"
    assert result.stdout == ""


def test_bad_input_leaves_the_store_unchanged(cli: Any) -> None:
    ok(cli("jobs", "submit", "kept"))
    assert cli("jobs", "submit", "bad", "--delay", "inf").exit_code == 2
    assert cli("jobs", "submit", "bad", "--payload", "{").exit_code == 2
    assert [j["job_id"] for j in listed(cli("jobs", "list", "--json"))] == ["kept"]


# -- read-only commands on a store that does not exist -----------------------------------


def _created(backend: Backend, url: str, tmp_path: Path) -> bool:
    """Whether anything of the store at ``url`` exists (file, schema, keys)."""
    if backend is SQLITE:
        return any(tmp_path.iterdir())
    if backend is POSTGRES:
        import psycopg

        from tenure.stores.postgres import parse_postgres_url

        schema = parse_postgres_url(url).schema
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            row = admin.execute(
                "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)
            ).fetchone()
        return bool(row and row[0])
    import redis

    from tenure.stores.redis import parse_redis_url

    prefix = parse_redis_url(url).prefix
    client = redis.Redis.from_url(REDIS_URL)
    try:
        return bool(list(client.scan_iter(match="{" + prefix + "}*")))
    finally:
        client.close()


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_reading_a_store_that_does_not_exist_says_so_and_creates_nothing(
    cli: Any, backend: Backend, tmp_path: Path
) -> None:
    where = tmp_path / "stores"
    where.mkdir()
    with backend.isolated_url(where) as url:
        if backend is SQLITE:
            url = f"sqlite:///{where / 'no' / 'such' / 'dir' / 'x.db'}"
        for args in (("jobs", "list"), ("jobs", "show", "nope"), ("now",)):
            result = cli("--store", url, *args)
            assert result.exit_code == 1, (args, result.stdout, result.stderr)
            assert result.stdout == ""
            message = result.stderr.strip()
            assert message.startswith("Error: no tenure store at "), message
            assert "tenure jobs submit" in message
            assert "tenure worker" in message
            assert "tenure migrate" in message
            assert message.count("\n") == 0
            error = json.loads(cli("--json", "--store", url, *args).stderr)
            assert error["error"] == "StoreNotFound"
            assert not _created(backend, url, where), args
        # Only the commands that write create it.
        ok(cli("--store", url, "jobs", "submit", "a"))
        assert [j["job_id"] for j in listed(cli("--store", url, "jobs", "list", "--json"))] == ["a"]


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_migrate_creates_a_store_that_reading_commands_then_find(
    cli: Any, backend: Backend, tmp_path: Path
) -> None:
    with backend.isolated_url(tmp_path) as url:
        assert cli("--store", url, "jobs", "list").exit_code == 1
        ok(cli("--store", url, "migrate"))
        assert ok(cli("--store", url, "jobs", "list")).stdout.startswith("no jobs in ")


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_a_dry_run_of_migrate_says_what_it_would_do_and_creates_nothing(
    cli: Any, backend: Backend, tmp_path: Path
) -> None:
    with backend.isolated_url(tmp_path) as url:
        assert ok(cli("--store", url, "migrate", "--dry-run")).stdout.strip()
        report = as_json(cli("--json", "--store", url, "migrate", "--dry-run"))
        assert report["version"] == 0
        assert report["pending"]
        assert not _created(backend, url, tmp_path)
        ok(cli("--store", url, "migrate"))
        report = as_json(cli("--json", "--store", url, "migrate", "--dry-run"))
        assert (report["version"], report["pending"]) == (report["latest"], [])


@pytest.mark.parametrize("backend", [REDIS], ids=str)
def test_migrate_sql_on_redis_is_a_usage_error_that_writes_nothing(
    cli: Any, url: str, tmp_path: Path
) -> None:
    result = cli("--store", url, "migrate", "--sql")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.startswith("Error: --sql: redis:// stores have no SQL schema")
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    result = cli("--json", "--store", url, "migrate", "--sql")
    assert result.exit_code == 2
    error = json.loads(result.stderr)
    assert error["error"] == "InvalidArgument"
    assert error["message"].startswith("--sql: ")
    result = cli("--store", url, "migrate", "--schema", "s")
    assert (result.exit_code, result.stderr) == (
        2,
        "Error: --schema: is for PostgreSQL stores only\n",
    )
    assert not _created(REDIS, url, tmp_path)


@pytest.mark.parametrize("backend", [REDIS], ids=str)
def test_a_dry_run_of_migrate_on_an_older_redis_layout_leaves_it(cli: Any, url: str) -> None:
    from tenure.stores.redis import Keys, parse_redis_url

    ok(cli("--store", url, "migrate"))
    meta = Keys(parse_redis_url(url).prefix).meta
    client = redis_client()
    try:
        client.hset(meta, "layout", "2")  # a store of tenure before issue #20
        report = as_json(cli("--json", "--store", url, "migrate", "--dry-run"))
        assert (report["version"], report["latest"]) == (2, 3)
        assert report["pending"] == ["index the leases of each queue (layout 3)"]
        assert client.hget(meta, "layout") == b"2"
        ok(cli("--store", url, "migrate"))
        assert client.hget(meta, "layout") == b"3"
    finally:
        client.close()


def test_a_file_that_is_not_a_store_is_not_read(cli: Any, tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    other.write_bytes(b"")
    result = cli("--store", f"sqlite:///{other}", "jobs", "list")
    assert result.exit_code == 1
    assert "the file has no tenure tables" in result.stderr
    assert other.read_bytes() == b""


def test_the_cli_and_a_worker_without_a_url_use_the_same_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("TENURE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    ok(CliRunner().invoke(main, ["jobs", "submit", "a"]))
    assert (tmp_path / "tenure.db").exists()
    worker = tenure.Worker(poll_interval=0.01, summary_every=0)
    worker.register("default", lambda ctx: "done by the worker")
    worker.run(burst=True, install_signal_handlers=False)
    shown = as_json(CliRunner().invoke(main, ["jobs", "show", "a", "--json"]))
    assert (shown["state"], shown["result"]) == ("done", "done by the worker")


# -- usage errors ------------------------------------------------------------------------


def test_unknown_commands_get_a_suggestion_at_every_level(cli: Any) -> None:
    result = cli("jbos")
    assert result.exit_code == 2
    assert "No such command 'jbos'. Did you mean 'jobs'?" in result.stderr
    assert "Did you mean 'list'?" in cli("jobs", "lst").stderr
    assert "Did you mean" not in cli("zzzzzz").stderr


def test_usage_errors_are_json_with_json(cli: Any) -> None:
    for args, env in (
        (("--json", "jobs", "lst"), {}),
        (("--json", "jbos"), {}),
        (("--json", "--bogus"), {}),
        (("jobs", "list", "--limit", "x"), {"TENURE_JSON": "1"}),
        (("jobs", "list", "--json", "--limit", "x"), {}),
    ):
        result = cli(*args, env=env)
        assert result.exit_code == 2, args
        assert result.stdout == "", args
        error = json.loads(result.stderr)
        assert error["error"] == "UsageError", args
        assert error["message"], args


def test_a_bad_value_from_the_environment_names_the_variable(cli: Any) -> None:
    result = cli("worker", "tests.worker.apps:app", env={"TENURE_WORKER_CONCURRENCY": "abc"})
    assert result.exit_code == 2
    assert "TENURE_WORKER_CONCURRENCY" in result.stderr
    assert "'abc'" in result.stderr
    # From the command line, the option is named as before.
    result = cli("worker", "tests.worker.apps:app", "-c", "abc")
    assert "'-c' / '--concurrency'" in result.stderr
    assert "TENURE_WORKER_CONCURRENCY" not in result.stderr


# -- submit many, list more --------------------------------------------------------------


def test_submit_from_a_file_of_json_lines(cli: Any, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(
        '{"job_id": "a", "payload": {"n": 1}}\n'
        "\n"
        '{"job_id": "b", "queue": "q2", "max_attempts": 1, "delay": 30}\n'
        '{"job_id": "c"}\n',
        encoding="utf-8",
    )
    out = ok(cli("jobs", "submit", "--from-file", str(jobs), "--queue", "q1")).stdout
    assert out == f"submitted 3 job(s) from {jobs} to {cli.url}\n"
    found = {j["job_id"]: j for j in listed(cli("jobs", "list", "--json"))}
    assert (found["a"]["queue"], found["a"]["payload"]) == ("q1", {"n": 1})
    assert (found["b"]["queue"], found["b"]["max_attempts"]) == ("q2", 1)
    assert found["b"]["available_at"] - found["b"]["as_of"] == pytest.approx(30, abs=1)
    # Again, from stdin: idempotent, and --json says what already existed.
    again = as_json(cli("jobs", "submit", "--from-file", "-", "--json", stdin=jobs.read_text()))
    assert again == {"submitted": 0, "existing": ["a", "b", "c"], "store": cli.url}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"job_id": "x"}\nnot json\n', "--from-file: stdin line 2: not JSON"),
        ('["x"]\n', "stdin line 1: must be a JSON object"),
        ('{"job": "x"}\n', "stdin line 1: unknown key(s) job"),
        ('{"job_id": 7}\n', "stdin line 1: job_id must be a string"),
        ('{"job_id": "x", "delay": "soon"}\n', "stdin line 1: delay must be a number"),
    ],
)
def test_a_bad_line_submits_nothing(cli: Any, url: str, text: str, message: str) -> None:
    result = cli("jobs", "submit", "--from-file", "-", stdin=text)
    assert result.exit_code == 2
    assert message in result.stderr
    tenure.connect(url).close()
    assert listed(cli("jobs", "list", "--json")) == []


def test_list_says_when_more_jobs_exist_than_it_shows(cli: Any) -> None:
    for job in ("a", "b", "c"):
        ok(cli("jobs", "submit", job))
    out = ok(cli("jobs", "list", "--limit", "2")).stdout.splitlines()
    assert len(out) == 4
    report = as_json(cli("jobs", "list", "--limit", "2", "--json"))
    assert (report["shown"], report["more"]) == (2, True)
    assert [j["job_id"] for j in report["jobs"]] == ["a", "b"]
    cursor = report["next_cursor"]
    assert out[-1] == f"2 shown, more exist: next page --cursor {cursor} (or --all)"
    rest = as_json(cli("jobs", "list", "--limit", "2", "--cursor", cursor, "--json"))
    assert ([j["job_id"] for j in rest["jobs"]], rest["more"], rest["next_cursor"]) == (
        ["c"],
        False,
        None,
    )
    report = as_json(cli("jobs", "list", "--limit", "3", "--json"))
    assert (report["shown"], report["more"]) == (3, False)
    assert "more exist" not in ok(cli("jobs", "list", "--limit", "3")).stdout


def test_list_all_pages_past_a_thousand(cli: Any, url: str) -> None:
    # No silent cap at 1,000: --all follows the cursor to the end.
    with tenure.connect(url) as store:
        for start in range(0, 1500, 500):
            store.submit_many([{"job_id": f"j{n:04d}"} for n in range(start, start + 500)])
    report = as_json(cli("jobs", "list", "--all", "--limit", "1000", "--json"))
    assert report["shown"] == 1500
    assert [j["job_id"] for j in report["jobs"]] == [f"j{n:04d}" for n in range(1500)]
    assert report["next_cursor"] is None
    owned = as_json(cli("jobs", "list", "--owner", "nobody", "--older-than", "0", "--json"))
    assert owned["jobs"] == []
    bad = cli("jobs", "list", "--cursor", "nope")
    assert bad.exit_code == 2
    assert "cursor: must be a page's next_cursor" in bad.stderr


def test_wait_shows_the_finished_job_or_times_out(cli: Any, url: str) -> None:
    ok(cli("jobs", "submit", "w1"))
    ok(cli("jobs", "submit", "w2"))
    with tenure.connect(url) as store:
        lease = store.claim("w1", "worker", 30)
        assert lease is not None
        store.complete(lease, {"rows": 3})
    done = as_json(cli("jobs", "wait", "w1", "--timeout", "5", "--json"))
    assert (done["state"], done["result"]) == ("done", {"rows": 3})
    assert "done" in ok(cli("jobs", "wait", "w1")).stdout
    late = cli("jobs", "wait", "w2", "--timeout", "0.2", "--json")
    assert late.exit_code == 3
    report = json.loads(late.stdout)
    assert (report["timeout"], report["job"]["state"]) == (0.2, "ready")
    assert "still ready" in report["error"]
    missing = cli("jobs", "wait", "nope", "--timeout", "1")
    assert missing.exit_code == 1
    assert "does not exist" in missing.stderr


def test_a_finished_job_shows_no_time_it_becomes_available(cli: Any, url: str) -> None:
    ok(cli("jobs", "submit", "d", "--max-attempts", "1"))
    with tenure.connect(url) as store:
        lease = store.claim("d", "w", 30)
        assert lease is not None
        store.fail(lease, "broken")
    shown = ok(cli("jobs", "show", "d")).stdout
    fields = dict(line.split(None, 1) for line in shown.splitlines() if " " in line.strip())
    assert fields["state"].strip() == "dead"
    assert fields["available"].strip() == "at  -"


def test_importing_tenure_leaves_the_worker_runtime_for_later(tmp_path: Path) -> None:
    """`tenure jobs submit` starts faster without the worker runtime (multiprocessing...)."""
    code = (
        "import sys, tenure; "
        "print(sorted(m for m in ('tenure.worker', 'multiprocessing') "
        "if m in sys.modules)); "
        "print(tenure.Worker.__name__, tenure.worker.current_context.__name__)"
    )
    done = _run([sys.executable, "-c", code], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "Worker current_context"]


# -- the installed entry points, as real processes ---------------------------------------


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENURE_")}
    env.update(extra)
    return env


def _run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=_clean_env(**env), capture_output=True, text=True, timeout=120
    )


def test_python_dash_m_tenure_demo(tmp_path: Path) -> None:
    done = _run([sys.executable, "-m", "tenure", "demo"], tmp_path)
    assert done.returncode == 0, done.stderr
    for line in DEMO_LINES:
        assert line in done.stdout, line
    assert done.stderr == ""
    assert list(tmp_path.iterdir()) == []  # throwaway: nothing left behind


def _script() -> str:
    found = Path(sys.executable).with_name("tenure")
    if found.exists():
        return str(found)
    on_path = shutil.which("tenure")
    if on_path is None:
        pytest.fail("the tenure console script is not installed: pip install -e .")
    return on_path


def test_tenure_script(tmp_path: Path) -> None:
    script = _script()
    demo = _run([script, "demo", "--json"], tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert json.loads(demo.stdout)["ok"] is True
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    submitted = _run(
        [script, "jobs", "submit", "j1", "--payload", '{"n": 1}'],
        tmp_path,
        TENURE_STORE_URL=url,
        TENURE_JSON="1",
    )
    assert submitted.returncode == 0, submitted.stderr
    assert json.loads(submitted.stdout)["payload"] == {"n": 1}
    shown = _run([script, "--store", url, "jobs", "show", "j1"], tmp_path)
    assert shown.returncode == 0
    assert "generation    0" in shown.stdout
    missing = _run([script, "--store", url, "jobs", "show", "nope"], tmp_path)
    assert missing.returncode == 1
    assert missing.stderr.startswith("Error: job 'nope' does not exist")
    assert "Traceback" not in missing.stderr
    assert not (tmp_path / "tenure.db").exists()  # every call used the URL it was given


def test_from_file_submits_in_batches_and_names_a_bad_line(cli: Any, url: str) -> None:
    lines = [json.dumps({"job_id": f"f{n}"}) for n in range(1500)]
    lines.insert(3, json.dumps({"job_id": "f0"}))  # a repeat: answered as existing
    report = as_json(cli("jobs", "submit", "--from-file", "-", "--json", stdin="\n".join(lines)))
    assert (report["submitted"], report["existing"]) == (1500, ["f0"])
    bad = "\n".join([json.dumps({"job_id": "g1"}), json.dumps({"job_id": "g2", "queue": ""})])
    result = cli("jobs", "submit", "--from-file", "-", stdin=bad)
    assert result.exit_code == 2
    assert "stdin line 2 ('g2'): jobs[1].queue: must not be empty" in result.stderr
    with tenure.connect(url) as store, pytest.raises(tenure.JobNotFound):
        store.get("g1")  # its batch was refused whole


def test_jobs_attempts_shows_the_history_as_text_and_json(cli: Any) -> None:
    with tenure.connect(cli.url) as store:
        store.submit("report-7", max_attempts=3)
        first = store.claim("report-7", "worker-a", 30)
        assert first is not None
        store.fail(first, "timeout talking to <db>", retry_in=0)
        second = store.claim("report-7", "worker-b", 30)
        assert second is not None
        store.complete(second, "ok")
        store.submit("never")
    shown = as_json(cli("jobs", "attempts", "report-7", "--json"))
    assert shown["job_id"] == "report-7"
    assert [(a["generation"], a["owner"], a["ending"], a["error"]) for a in shown["attempts"]] == [
        (1, "worker-a", "failed", "timeout talking to <db>"),
        (2, "worker-b", "completed", None),
    ]
    assert all(a["ended_at"] >= a["started_at"] for a in shown["attempts"])
    text = ok(cli("jobs", "attempts", "report-7")).stdout
    assert "worker-a" in text
    assert "failed" in text
    assert "completed" in text
    assert "timeout talking to <db>" in text
    assert "never claimed" in ok(cli("jobs", "attempts", "never")).stdout
    assert as_json(cli("jobs", "attempts", "never", "--json"))["attempts"] == []
    assert cli("jobs", "attempts", "nobody").exit_code == 1


def test_submit_with_a_unique_key(cli: Any) -> None:
    first = as_json(cli("jobs", "submit", "a", "--unique-key", "report:7", "--json"))
    assert (first["created"], first["unique_key"]) == (True, "report:7")
    second = as_json(cli("jobs", "submit", "b", "--unique-key", "report:7", "--json"))
    assert (second["job_id"], second["created"]) == ("a", False)  # the holder, not b
    shown = ok(cli("jobs", "submit", "c", "--unique-key", "report:7", "--unique-for", "60"))
    assert "not submitted: a holds unique key 'report:7'" in shown.output
    assert [j["job_id"] for j in listed(cli("jobs", "list", "--json"))] == ["a"]
    refused = cli("jobs", "submit", "d", "--unique-for", "60")
    assert refused.exit_code == 2
    assert "unique_for" in refused.output


def test_submit_with_headers(cli: Any, tmp_path: Path) -> None:
    job = as_json(
        cli("jobs", "submit", "a", "--header", "tenant=acme", "--header", "x=1=2", "--json")
    )
    assert job["headers"] == {"tenant": "acme", "x": "1=2"}
    assert "tenant=acme x=1=2" in ok(cli("jobs", "show", "a")).stdout
    refused = cli("jobs", "submit", "b", "--header", "no-equals-sign")
    assert refused.exit_code == 2
    assert "NAME=VALUE" in refused.output
    source = tmp_path / "jobs.jsonl"
    source.write_text('{"job_id": "c", "headers": {"own": "c"}}\n{"job_id": "d"}\n')
    ok(cli("jobs", "submit", "--from-file", str(source), "--header", "tenant=t"))
    shown = {j["job_id"]: j["headers"] for j in listed(cli("jobs", "list", "--json"))}
    assert shown == {"a": job["headers"], "c": {"own": "c"}, "d": {"tenant": "t"}}


def test_submit_from_a_file_with_unique_keys(cli: Any, tmp_path: Path) -> None:
    source = tmp_path / "jobs.jsonl"
    source.write_text(
        '{"job_id": "a", "unique_key": "k"}\n'
        '{"job_id": "b", "unique_key": "k", "unique_for": 60}\n'
        '{"job_id": "c"}\n'
    )
    answer = as_json(cli("jobs", "submit", "--from-file", str(source), "--json"))
    assert (answer["submitted"], answer["existing"]) == (2, ["b"])  # b: its key was held
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"job_id": "d", "unique_for": 60}\n')
    refused = cli("jobs", "submit", "--from-file", str(bad))
    assert refused.exit_code == 2
    assert "unique_for" in refused.output
    assert [j["job_id"] for j in listed(cli("jobs", "list", "--json"))] == ["a", "c"]
