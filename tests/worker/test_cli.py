"""``tenure worker MODULE:APP`` in the test process (the subprocess tests use it too)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

import tenure
from tenure.cli import main
from tenure.cli._worker import _Formatter, load_app
from tests.worker import apps


def test_worker_command_runs_the_app_until_idle(
    url: str, real_store: tenure.Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    events = tmp_path / "events.jsonl"
    real_store.submit("a", {"events": str(events)}, queue="sync")
    real_store.submit("b", {"events": str(events)}, queue="async")
    real_store.submit("c", {"events": str(events)}, queue="cpu")  # a queue it does not serve
    done = CliRunner().invoke(
        main,
        [
            "--store",
            url,
            "worker",
            "tests.worker.apps:app",
            "-q",
            "sync",
            "-q",
            "async",
            "--concurrency",
            "2",
            "--ttl",
            "5",
            "--owner",
            "cli-worker",
            "--burst",
            "--log-level",
            "debug",
        ],
    )
    assert done.exit_code == 0, done.output
    started = [r for r in caplog.records if r.getMessage().startswith("worker started")]
    # The first line names the store it opened (so a worker on the wrong store says so).
    assert started[0].getMessage() == (
        f"worker started on {real_store.url}: queues sync, async, concurrency 2, ttl 5 s"
    )
    assert started[0].owner == "cli-worker"  # type: ignore[attr-defined]
    states = {job.job_id: (job.state, job.owner) for job in real_store.jobs()}
    assert states == {
        "a": ("done", "cli-worker"),
        "b": ("done", "cli-worker"),
        "c": ("ready", None),
    }
    assert apps.app.queues == ("sync", "async")


def test_log_lines_carry_the_structured_fields() -> None:
    record = logging.makeLogRecord(
        {"msg": "lease lost: %s", "args": ("why",), "levelname": "WARNING", "job_id": "J"}
    )
    record.generation = 3
    text = _Formatter(json_mode=False).format(record)
    assert text.endswith("WARNING lease lost: why  job_id=J generation=3")
    data = json.loads(_Formatter(json_mode=True).format(record))
    assert (data["level"], data["message"], data["job_id"], data["generation"]) == (
        "warning",
        "lease lost: why",
        "J",
        3,
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module_xyz:app", "cannot import 'no_such_module_xyz'"),
        ("tests.worker.apps:missing", "has no attribute 'missing'"),
        ("tests.worker.apps", "has no attribute 'worker'"),
        ("tests.worker.apps:json", "is a module, not a tenure.Worker"),
        (":app", "MODULE:APP expected"),
    ],
)
def test_bad_app_specs_are_usage_errors(spec: str, message: str) -> None:
    done = CliRunner().invoke(main, ["worker", spec, "--burst"])
    assert done.exit_code == 2, done.output
    assert message in done.output


def test_bad_options_name_the_argument(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'x.db'}"
    done = CliRunner().invoke(
        main, ["--store", store, "worker", "tests.worker.apps:app", "--ttl", "0"]
    )
    assert done.exit_code == 2, done.output
    assert "ttl:" in done.output


def test_load_app_accepts_a_factory() -> None:
    assert load_app("tests.worker.apps:app") is apps.app
