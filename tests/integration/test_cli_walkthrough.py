"""What a new user's walk through the docs found in the CLI, each kept fixed: the demo's
help and its --store, the dashboard hint after the chaos extra alone, `jobs wait` on
timeout and on a dead or cancelled job, `dashboard --port 0`, environment variables named
in the library's errors, negative numbers as arguments, durations with units everywhere,
requeue's due time, and docs/worker.md's synopsis of `tenure worker`."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click
import httpx
import pytest

import tenure
from tenure.cli import main
from tests.integration._support import as_json, ok
from tests.servers import stop_process

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "pip install 'tenure[dashboard]'"


def make_app() -> tenure.Worker:
    """A worker with one handler (``tenure worker tests.integration.test_cli_walkthrough:
    make_app``)."""
    app = tenure.Worker(poll_interval=0.01, summary_every=0)
    app.register("default", lambda ctx: "done")
    return app


APP = f"{__name__}:make_app"


# -- 1, 2: the demo's help and its --store -----------------------------------------------


def test_demo_help_says_what_it_prints_and_in_which_order(cli: Any) -> None:
    text = " ".join(ok(cli("demo", "--help")).stdout.split())
    assert "``" not in text
    assert "--store is refused" in text
    assert "throwaway" in text
    order = ["the timeline", "the final state", "'tenure dashboard' command", "the verdict"]
    positions = [text.index(words) for words in order]
    assert positions == sorted(positions), text
    # ... and that is the order the demo prints them in.
    out = ok(cli("demo")).stdout
    printed = ["worker-a  claims", "Final state", "Look at it in the browser:", "OK: every step"]
    assert [out.index(line) for line in printed] == sorted(out.index(line) for line in printed)
    assert _kept(out).name.startswith("tenure-demo-")
    _remove(_kept(out))


@pytest.mark.parametrize(
    "args",
    [("demo", "--store", "sqlite:///x.db"), ("--store", "sqlite:///x.db", "demo")],
    ids=["after", "before"],
)
def test_demo_refuses_a_store_given_on_the_command_line(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    monkeypatch.chdir(tmp_path)
    refused = cli(*args)
    assert refused.exit_code == 2, (refused.stdout, refused.stderr)
    assert "throwaway store of its own" in refused.stderr
    assert str(Path(tempfile.gettempdir()) / "tenure-demo-*") in refused.stderr
    assert refused.stdout == ""
    assert not (tmp_path / "x.db").exists()
    error = json.loads(cli(*args, "--json").stderr)
    assert error["error"] == "UsageError"
    assert "throwaway store of its own" in error["message"]


def test_demo_runs_with_tenure_store_url_set_for_other_commands(cli: Any) -> None:
    report = as_json(cli("demo", "--json", env={"TENURE_STORE_URL": "sqlite:///elsewhere.db"}))
    assert report["ok"] is True
    _remove(Path(report["kept"]))


def _kept(out: str) -> Path:
    """Where the demo of this output kept its store."""
    found = re.search(r"kept in (\S+);", out)
    assert found is not None, out
    return Path(found.group(1))


def _remove(kept: Path) -> None:
    for path in sorted(kept.rglob("*"), reverse=True):
        path.unlink()
    kept.rmdir()


# -- 3: the dashboard hint when the dashboard's dependencies are missing -------------------


def _without(module: str) -> Any:
    """`importlib.util.find_spec` as if ``module`` were not installed."""
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        return None if name == module else real(name, package)

    return find_spec


@pytest.fixture
def without_jinja2(monkeypatch: pytest.MonkeyPatch) -> None:
    """As after `pip install '.[chaos]'`: starlette and uvicorn, no jinja2."""
    monkeypatch.setattr(importlib.util, "find_spec", _without("jinja2"))


def test_the_demo_hint_says_to_install_the_dashboard_first(cli: Any, without_jinja2: None) -> None:
    out = ok(cli("demo")).stdout
    hint = next(line for line in out.splitlines() if line.startswith("Look at it"))
    assert hint.startswith(f"Look at it in the browser: {INSTALL}, then tenure dashboard --store")
    _remove(_kept(out))
    report = as_json(cli("demo", "--json"))
    assert report["dashboard_install"] == INSTALL
    assert report["dashboard"].startswith("tenure dashboard --store")
    _remove(Path(report["kept"]))


def test_the_demo_hint_is_the_command_alone_when_the_dashboard_can_run(cli: Any) -> None:
    out = ok(cli("demo")).stdout
    assert "Look at it in the browser: tenure dashboard --store sqlite:///" in out
    assert INSTALL not in out
    _remove(_kept(out))
    report = as_json(cli("demo", "--json"))
    assert report["dashboard_install"] is None
    _remove(Path(report["kept"]))


@pytest.fixture
def fake_chaos_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`tenure chaos` without the run: an empty history's verdict (UNPROVEN, exit 3)."""
    import tenure.chaos

    def run_chaos(options: Any, echo: Any) -> Any:
        verdict = tenure.chaos.check_history([])
        return SimpleNamespace(verdict=verdict, report=tmp_path / "report.html", png=None)

    monkeypatch.setattr(tenure.chaos, "run_chaos", run_chaos)


@pytest.mark.parametrize("missing", [True, False], ids=["missing", "installed"])
def test_the_chaos_hint_says_to_install_the_dashboard_first(
    cli: Any, fake_chaos_run: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, missing: bool
) -> None:
    if missing:
        monkeypatch.setattr(importlib.util, "find_spec", _without("jinja2"))
    run = str(tmp_path / "run")
    done = cli("chaos", "--no-png", "--out", run, "--seed", "1")
    assert done.exit_code == 3, (done.stdout, done.stderr)
    lines = done.stdout.strip().splitlines()
    look = f"tenure dashboard --store {cli.url}"
    wanted = f"look at its jobs: {INSTALL}, then {look}" if missing else f"look at its jobs: {look}"
    assert lines[-3] == wanted
    report = json.loads(cli("chaos", "--no-png", "--out", run, "--seed", "1", "--json").stdout)
    assert report["dashboard"] == look
    assert report["dashboard_install"] == (INSTALL if missing else None)


# -- 4, 5: `jobs wait` ---------------------------------------------------------------------


def test_wait_shows_the_job_on_timeout_then_says_so(cli: Any) -> None:
    ok(cli("jobs", "submit", "slow", "--payload", '{"n": 1}'))
    late = cli("jobs", "wait", "slow", "--timeout", "0.1")
    assert late.exit_code == 3, (late.stdout, late.stderr)
    lines = late.stdout.strip().splitlines()
    fields = dict(line.split(None, 1) for line in lines[:-1])
    assert (fields["job"], fields["state"], fields["payload"]) == ("slow", "ready", '{"n": 1}')
    assert "was still ready after waiting 0.1 s" in lines[-1]


@pytest.mark.parametrize(("ending", "code"), [("done", 0), ("dead", 4), ("cancelled", 5)], ids=str)
def test_wait_exits_non_zero_when_the_job_ended_dead_or_cancelled(
    cli: Any, url: str, ending: str, code: int
) -> None:
    with tenure.connect(url) as store:
        store.submit("j", max_attempts=1)
        if ending == "cancelled":
            store.cancel("j", "not wanted")
        else:
            lease = store.claim("j", "w", 30)
            assert lease is not None
            if ending == "done":
                store.complete(lease)
            else:
                store.fail(lease, "broken")
    shown = cli("jobs", "wait", "j", "--timeout", "5")
    assert shown.exit_code == code, (shown.stdout, shown.stderr)
    assert re.search(rf"^state\s+{ending}$", shown.stdout, re.MULTILINE), shown.stdout
    as_json = cli("jobs", "wait", "j", "--json")
    assert as_json.exit_code == code
    assert json.loads(as_json.stdout)["state"] == ending  # the job, as before
    assert f"{code} {ending}" in " ".join(ok(cli("jobs", "wait", "--help")).stdout.split())


# -- 6: `dashboard --port 0` ---------------------------------------------------------------


@pytest.fixture
def dashboard_process(url: str) -> Iterator[subprocess.Popen[str]]:
    tenure.connect(url).close()  # the dashboard creates no store
    command = [sys.executable, "-m", "tenure", "dashboard", "--store", url, "--port", "0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENURE_")}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    try:
        yield process
    finally:
        stop_process(process)


def test_dashboard_on_port_0_prints_the_port_it_listens_on(
    dashboard_process: subprocess.Popen[str],
) -> None:
    assert dashboard_process.stderr is not None
    first = dashboard_process.stderr.readline()
    found = re.search(r" on (http://127\.0\.0\.1:(\d+)/)", first)
    assert found is not None, first
    assert int(found.group(2)) != 0, first
    deadline = time.monotonic() + 20
    while True:
        try:
            page = httpx.get(found.group(1) + "queues", timeout=2)
            break
        except httpx.TransportError:
            assert dashboard_process.poll() is None, dashboard_process.stderr.read()
            assert time.monotonic() < deadline, "the dashboard did not answer in 20 s"
            time.sleep(0.1)
    assert page.status_code == 200
    assert "default" in page.text or "queue" in page.text.lower()


def test_dashboard_says_when_it_cannot_listen(cli: Any) -> None:
    import socket

    tenure.connect(cli.url).close()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        refused = cli("dashboard", "--port", port)
    assert refused.exit_code == 1, (refused.stdout, refused.stderr)
    assert f"Error: cannot listen on 127.0.0.1:{port}" in refused.stderr


# -- 7: a bad value from an environment variable names it, the library's errors too --------


@pytest.mark.parametrize(
    ("variable", "value", "option", "rule"),
    [
        ("TENURE_WORKER_TTL", "0", "--ttl", "must be from 0.01 seconds to 7 days"),
        ("TENURE_WORKER_POLL_INTERVAL", "5000", "--poll-interval", "must be from 0.001 to 3600"),
        ("TENURE_WORKER_RENEW_EVERY", "1h", "--renew-every", "at most half the ttl"),
        ("TENURE_WORKER_CONCURRENCY", "0", "-c / --concurrency", "0 is not in the range"),
    ],
)
def test_a_bad_worker_value_from_the_environment_names_the_variable(
    cli: Any, variable: str, value: str, option: str, rule: str
) -> None:
    done = cli("worker", APP, "--burst", env={variable: value})
    assert done.exit_code == 2, (done.stdout, done.stderr)
    assert f"{variable} (the environment variable of {option})" in done.stderr
    assert rule in done.stderr
    as_json = json.loads(cli("--json", "worker", APP, "--burst", env={variable: value}).stderr)
    assert f"{variable} (the environment variable of {option})" in as_json["message"]


def test_the_same_value_on_the_command_line_names_the_argument(cli: Any) -> None:
    done = cli("worker", APP, "--burst", "--ttl", "0")
    assert done.exit_code == 2
    assert "Error: ttl: must be from 0.01 seconds" in done.stderr
    assert "environment variable" not in done.stderr


def test_other_commands_name_the_variable_too(cli: Any) -> None:
    tenure.connect(cli.url).close()
    done = cli("jobs", "list", env={"TENURE_JOBS_LIST_LIMIT": "0"})
    assert done.exit_code == 2
    assert "TENURE_JOBS_LIST_LIMIT (the environment variable of --limit): must be" in done.stderr
    metrics = cli(
        "worker", APP, "--burst", "--metrics-port", "0", env={"TENURE_WORKER_METRICS_HOST": " "}
    )
    assert metrics.exit_code == 2, (metrics.stdout, metrics.stderr)
    assert "TENURE_WORKER_METRICS_HOST (the environment variable of --metrics-host)" in (
        metrics.stderr
    )


# -- 8: negative numbers as arguments ------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("queues", "rate", "reports", "-1"), "per_second: must be a finite number"),
        (("queues", "rate", "reports", "-0.5", "--burst", "2"), "per_second: must be"),
        (("queues", "limit", "reports", "-1"), "n: must be from 1"),
        (("queues", "rate", "reports", "--bogus"), "No such option '--bogus'"),
        (("queues", "limit", "reports", "2", "-x"), "No such option '-x'"),
    ],
)
def test_a_negative_number_reaches_the_commands_own_validation(
    cli: Any, url: str, args: tuple[str, ...], message: str
) -> None:
    tenure.connect(url).close()
    done = cli(*args)
    assert done.exit_code == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    assert "No such option '-" + "1'" not in done.stderr
    assert "Traceback" not in done.stderr


# -- 9: durations with units wherever a length of time is taken ----------------------------


def test_durations_take_units_everywhere(cli: Any) -> None:
    job = as_json(cli("jobs", "submit", "later", "--delay", "10m", "--timeout", "2m", "--json"))
    assert job["available_at"] == pytest.approx(job["as_of"] + 600)
    assert job["timeout"] == 120
    keyed = as_json(cli("jobs", "submit", "k", "--unique-key", "u", "--unique-for", "1h", "--json"))
    assert keyed["created"] is True
    assert as_json(cli("jobs", "list", "--older-than", "1m", "--json"))["jobs"] == []
    assert "due in 10m00s" in ok(cli("jobs", "show", "later")).stdout
    waited = cli("jobs", "wait", "later", "--timeout", "0.1s")
    assert waited.exit_code == 3
    assert "after waiting 0.1 s" in waited.stdout
    env = {"TENURE_JOBS_SUBMIT_DELAY": "soon"}
    bad = cli("jobs", "submit", "x", env=env)
    assert bad.exit_code == 2
    assert "TENURE_JOBS_SUBMIT_DELAY (the environment variable of --delay)" in bad.stderr
    assert "must be a duration like 90s, 15m" in bad.stderr


def _commands(command: click.Command, path: tuple[str, ...]) -> Iterator[tuple[str, click.Command]]:
    yield " ".join(path), command
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None
            yield from _commands(sub, (*path, name))


# Every option that takes a length of time (seconds before).
DURATIONS = {
    "tenure jobs submit": {"--delay", "--timeout", "--unique-for"},
    "tenure jobs list": {"--older-than"},
    "tenure jobs wait": {"--timeout"},
    "tenure jobs requeue": {"--delay"},
    "tenure jobs purge": {"--older-than"},
    "tenure worker": {
        "--ttl",
        "--renew-every",
        "--grace",
        "--timeout",
        "--poll-interval",
        "--summary-every",
    },
    "tenure dashboard": {"--refresh", "--read-timeout"},
    "tenure chaos": {"--ttl", "--duration", "--fault-interval", "--work", "--drain-timeout"},
    "tenure sink serve": {"--max-age"},
}


def test_every_duration_option_takes_units_and_says_so() -> None:
    found: dict[str, set[str]] = {}
    for path, command in _commands(main, ("tenure",)):
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            long = next(opt for opt in param.opts if opt.startswith("--"))
            if param.type.name == "duration":
                found.setdefault(path, set()).add(long)
                assert param.help is not None
                assert re.search(r"e\.g\. [\d.]+[smhdw]?\b", param.help), (path, long)
            else:  # no other option reads seconds as a bare float
                assert param.metavar not in ("S", "SECONDS"), (path, long)
    assert found == DURATIONS


# -- 10: requeue says when the job is due ------------------------------------------------


def test_requeue_says_when_the_job_is_due_as_submit_does(cli: Any, url: str) -> None:
    with tenure.connect(url) as store:
        store.submit("report-1")
        store.cancel("report-1")
    out = ok(cli("jobs", "requeue", "report-1", "--delay", "10m")).stdout
    assert out.strip() == "report-1 requeued: ready, due in 10m00s, generation 0, attempts 0 of 5"
    with tenure.connect(url) as store:
        store.cancel("report-1")
    assert "requeued: ready, due now," in ok(cli("jobs", "requeue", "report-1")).stdout
    submitted = ok(cli("jobs", "submit", "report-2", "--delay", "600")).stdout
    assert "due in 10m00s" in submitted


# -- 11: docs/worker.md's synopsis of `tenure worker` ---------------------------------------


def test_the_worker_synopsis_in_the_docs_lists_every_option_of_its_help(cli: Any) -> None:
    text = (ROOT / "docs" / "worker.md").read_text("utf-8")
    heading = text.index("## `tenure worker MODULE:APP`")
    synopsis = re.search(r"```text\n(.*?)```", text[heading:], re.DOTALL)
    assert synopsis is not None
    documented = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", synopsis.group(1)))
    shown = ok(cli("worker", "--help")).stdout
    options = re.findall(r"^\s+(?:(-\w), )?(--[a-z-]+)", shown, re.MULTILINE)
    missing = [
        long
        for short, long in options
        if long != "--help" and long not in documented and short not in documented
    ]
    assert missing == []
