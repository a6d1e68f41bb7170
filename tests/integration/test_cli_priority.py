"""`tenure jobs submit --priority/--timeout` (and in --from-file lines), and the priority in
`tenure jobs list` and `show`, plain and --json (issue #18)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration._support import as_json, ok


def test_submit_with_a_priority_and_a_timeout(cli: Any, tmp_path: Path) -> None:
    ok(cli("jobs", "submit", "low", "--priority", "-1"))
    job = as_json(
        ok(cli("jobs", "submit", "high", "--priority", "7", "--timeout", "2.5", "--json"))
    )
    assert (job["priority"], job["timeout"]) == (7, 2.5)
    lines = tmp_path / "jobs.jsonl"
    lines.write_text('{"job_id": "mid", "priority": 3}\n{"job_id": "dflt"}\n')
    ok(cli("jobs", "submit", "--from-file", str(lines), "--priority", "1", "--timeout", "4"))
    listed = as_json(ok(cli("jobs", "list", "--json")))["jobs"]
    assert [(j["job_id"], j["priority"], j["timeout"]) for j in listed] == [
        ("low", -1, None),
        ("high", 7, 2.5),
        ("mid", 3, 4.0),
        ("dflt", 1, 4.0),
    ]
    table = ok(cli("jobs", "list")).stdout
    assert "PRI" in table.splitlines()[0]
    shown = ok(cli("jobs", "show", "high")).stdout
    assert "priority      7" in shown
    assert "2.5 s" in shown


def test_a_bad_priority_or_timeout_is_refused(cli: Any, tmp_path: Path) -> None:
    refused = cli("jobs", "submit", "J", "--priority", str(2**31))
    assert refused.exit_code != 0
    assert "priority" in refused.output
    refused = cli("jobs", "submit", "J", "--timeout", "0")
    assert refused.exit_code != 0
    assert "timeout" in refused.output
    lines = tmp_path / "jobs.jsonl"
    lines.write_text('{"job_id": "a"}\n{"job_id": "b", "priority": "high"}\n')
    refused = cli("jobs", "submit", "--from-file", str(lines))
    assert refused.exit_code != 0
    assert "line 2" in refused.output
    assert "priority" in refused.output
    assert as_json(ok(cli("jobs", "list", "--json")))["jobs"] == []
