"""The CLI's environment variables: every option reads ``TENURE_<COMMAND PATH>_<OPTION>``,
named after its long option (``tenure jobs list --state`` <- ``TENURE_JOBS_LIST_STATE``),
never after the Python parameter behind it (``state_``), as README.md and docs/worker.md
say. The walk over the whole command tree keeps a renamed parameter from breaking it again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

import tenure
from tenure.cli import COMMANDS, main
from tests.integration._support import as_json, listed, ok

ROOT = Path(__file__).resolve().parents[2]
# Options that read no variable of their own: the --store and --json given after a command
# (the global ones read TENURE_STORE_URL and TENURE_JSON, which an explicit option beats).
UNMIRRORED = {"--store", "--json"}
# Documented variables named like a command's but read by the command itself, not an option.
NOT_OPTIONS = {"TENURE_DASHBOARD_USER", "TENURE_DASHBOARD_PASSWORD"}


def _contexts(
    command: click.Command, path: tuple[str, ...], parent: click.Context | None
) -> Iterator[tuple[tuple[str, ...], click.Context]]:
    """Every command of the tree with a context made as a run makes it (the root's context
    settings, each subcommand's context a child of its group's)."""
    settings = command.context_settings if parent is None else {}
    ctx = click.Context(command, info_name=path[-1], parent=parent, **settings)
    yield path, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            yield from _contexts(sub, (*path, name), ctx)


def _options() -> Iterator[tuple[tuple[str, ...], click.Context, click.Option]]:
    for path, ctx in _contexts(main, ("tenure",), None):
        for param in ctx.command.params:
            if isinstance(param, click.Option):
                yield path, ctx, param


def _documented(path: tuple[str, ...], option: click.Option) -> str | None:
    """The variable the docs promise for ``option`` of the command at ``path``, or None."""
    long = next(name for name in option.opts if name.startswith("--"))
    if long == "--version" or (len(path) > 1 and long in UNMIRRORED):
        return None
    if path == ("tenure",) and long == "--store":
        return "TENURE_STORE_URL"
    words = ("tenure", *path[1:], long[2:])
    return "_".join(words).upper().replace("-", "_")


def _envvars() -> set[str]:
    """The variable of every option of the tree."""
    return {option.envvar for _path, _ctx, option in _options() if isinstance(option.envvar, str)}


def test_every_option_reads_the_variable_named_after_its_long_option(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [n for n in os.environ if n.startswith("TENURE_")]:
        monkeypatch.delenv(name)
    seen = 0
    for path, ctx, option in _options():
        where = f"{' '.join(path)} {option.opts}"
        assert any(name.startswith("--") for name in option.opts), f"{where}: no long name"
        expected = _documented(path, option)
        # click's own name for it: after the Python parameter (the bug: `state_`, `queues`)
        guessed = "_".join(("tenure", *path[1:], option.name or "")).upper()
        for name in {guessed, expected} - {None}:
            assert name is not None
            monkeypatch.setenv(name, "from-env")
            wanted = "from-env" if name == expected else None
            assert option.resolve_envvar_value(ctx) == wanted, (where, name)
            monkeypatch.delenv(name)
        if expected is not None:
            assert option.envvar == expected, where
            assert option.get_help_extra(ctx).get("envvars") == (expected,), where  # --help
            seen += 1
    assert seen > 80  # the walk reached every command (11 of them, some groups)


def test_every_variable_the_docs_name_for_an_option_is_read() -> None:
    commands = {name.upper() for name in COMMANDS}
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = {
        name
        for path in texts
        for name in re.findall(r"\bTENURE_[A-Z0-9_]*[A-Z0-9]\b", path.read_text("utf-8"))
        if name.split("_")[1] in commands or name in ("TENURE_STORE_URL", "TENURE_JSON")
    }
    assert "TENURE_WORKER_CONCURRENCY" in named
    assert sorted(named - NOT_OPTIONS - _envvars()) == []


def test_help_shows_the_variables(cli: Any) -> None:
    out = ok(cli("worker", "--help")).stdout
    assert "TENURE_WORKER_QUEUE" in out
    assert "TENURE_WORKER_QUEUES" not in out
    assert "TENURE_JOBS_LIST_STATE" in ok(cli("jobs", "list", "--help")).stdout


# -- end to end --------------------------------------------------------------------------


def make_app() -> tenure.Worker:
    """The worker of `test_worker_queue_takes_a_space_separated_list` (``tenure worker
    tests.integration.test_cli_env:make_app``): a handler on each of the queues a, b, c."""
    app = tenure.Worker(poll_interval=0.01, summary_every=0)
    for queue in ("a", "b", "c"):
        app.register(queue, lambda ctx: "done")
    return app


def test_worker_queue_takes_a_space_separated_list(cli: Any, url: str) -> None:
    with tenure.connect(url) as store:
        for queue in ("a", "b", "c"):
            store.submit(f"{queue}1", queue=queue)
    env = {"TENURE_WORKER_QUEUE": "a b"}  # as `--queue a --queue b`
    ok(cli("worker", f"{__name__}:make_app", "--burst", env=env))
    with tenure.connect(url) as store:
        states = {job: store.get(job).state for job in ("a1", "b1", "c1")}
    assert states == {"a1": "done", "b1": "done", "c1": "ready"}


def test_jobs_list_state_from_the_environment(cli: Any, url: str) -> None:
    with tenure.connect(url) as store:
        store.submit("held")
        store.submit("waiting")
        assert store.claim("held", "w1", 30) is not None
    env = {"TENURE_JOBS_LIST_STATE": "ready"}
    assert [j["job_id"] for j in listed(cli("jobs", "list", "--json", env=env))] == ["waiting"]
    # A bad value names the variable it came from.
    result = cli("jobs", "list", env={"TENURE_JOBS_LIST_STATE": "bogus"})
    assert result.exit_code == 2
    assert "TENURE_JOBS_LIST_STATE (the environment variable of --state)" in result.stderr


def test_jobs_submit_header_from_the_environment(cli: Any) -> None:
    env = {"TENURE_JOBS_SUBMIT_HEADER": "tenant=acme x=1=2"}  # two headers
    job = as_json(cli("jobs", "submit", "a", "--json", env=env))
    assert job["headers"] == {"tenant": "acme", "x": "1=2"}


def test_jobs_list_all_from_the_environment(cli: Any) -> None:
    for job in ("a", "b", "c"):
        ok(cli("jobs", "submit", job))
    report = as_json(
        cli("jobs", "list", "--limit", "2", "--json", env={"TENURE_JOBS_LIST_ALL": "1"})
    )
    assert (report["shown"], report["more"]) == (3, False)


def test_jobs_purge_state_takes_a_space_separated_list(cli: Any, url: str) -> None:
    with tenure.connect(url) as store:
        for job in ("done", "dead", "cancelled"):
            store.submit(job, max_attempts=1)
        for job in ("done", "dead"):
            lease = store.claim(job, "w1", 30)
            assert lease is not None
            if job == "done":
                store.complete(lease)
            else:
                store.fail(lease, "broken")
        store.cancel("cancelled")
    env = {"TENURE_JOBS_PURGE_STATE": "done dead"}  # as `--state done --state dead`
    report = as_json(cli("jobs", "purge", "--older-than", "0", "--json", env=env))
    assert (report["deleted"], report["states"]) == (2, ["done", "dead"])
    assert [j["job_id"] for j in listed(cli("jobs", "list", "--json"))] == ["cancelled"]
