"""The sink's ledger read into the history after a run, page by page."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenure import FencingToken
from tenure.chaos import Recorder, read_history
from tenure.chaos._ledger import record_sink
from tenure.fence import sink as sink_module
from tenure.fence.sink import Sink


def test_every_record_and_rejection_over_several_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = Sink(tmp_path / "sink.db")
    for step in range(5):  # 5 records: pages of 2, 2 and 1
        sink.accept(FencingToken("j1", 1), None, f"g1-s{step}")
    for _ in range(4):  # 4 rejections: pages of 2, 2 and an empty one
        sink.reject(
            None, kind="stale", status=409, detail="stale", job_id="j1", presented=1, current=2
        )
    sink.close()
    monkeypatch.setattr(sink_module, "MAX_PAGE", 2)
    rec = Recorder(tmp_path / "harness.jsonl", "harness")
    record_sink(tmp_path / "sink.db", rec)
    rec.close()
    events = list(read_history(tmp_path / "harness.jsonl"))
    records = [e for e in events if e["f"] == "sink-record"]
    assert [e["record"] for e in records] == [1, 2, 3, 4, 5]
    assert [e["key"] for e in records] == [f"g1-s{step}" for step in range(5)]
    assert list(records[0])[-5:] == ["record", "job", "gen", "key", "accepted_at"]
    rejections = [e for e in events if e["f"] == "sink-rejection"]
    assert [e["rejection"] for e in rejections] == [1, 2, 3, 4]
    assert {
        (e["kind"], e["status"], e["job"], e["presented"], e["current"]) for e in rejections
    } == {("stale", 409, "j1", 1, 2)}
