"""The reference fenced sink: a real ``tenure sink serve`` process (signed tokens), and the
same app in process for the finer points."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

import tenure  # noqa: E402
from tenure import fence  # noqa: E402
from tenure.fence.headers import token_headers  # noqa: E402
from tenure.fence.http import TenureAuth  # noqa: E402
from tenure.fence.sink import create_app  # noqa: E402
from tests.fence._sink import ROOT, SINK_KEYS, SinkProcess  # noqa: E402

with warnings.catch_warnings():  # starlette 1.x would rather have httpx2 behind TestClient
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

RING = fence.Keyring.parse(SINK_KEYS)  # signs with k2, the sink accepts k1 and k2
OLD_RING = fence.Keyring.parse(SINK_KEYS[1:])  # k1 only: tokens from before the rotation


def new_job() -> str:
    return f"job-{uuid.uuid4().hex[:8]}"


def put(client: Any, job: str, generation: int, key: str, ring: Any = RING, **extra: Any) -> Any:
    auth = TenureAuth(tenure.FencingToken(job, generation), keyring=ring)
    return client.put(f"/records/{key}", json={"g": generation, **extra}, auth=auth)


def test_concurrent_writers_with_mixed_generations(signed_sink: SinkProcess) -> None:
    """Writers race on one job with mixed generations and overlapping effect keys: the
    accepted generations never decrease in acceptance order, each key lands once."""
    job = new_job()
    writers, writes = 6, 25
    answers: list[list[tuple[int, str, int]]] = [[] for _ in range(writers)]
    start = threading.Barrier(writers)

    def work(writer: int) -> None:
        with signed_sink.client() as client:
            start.wait()
            for n in range(writes):
                generation = max(1, n // 3 + (writer * 7 + n * 5) % 5 - 2)
                key = f"effect-{(n * writers + writer) % 40}"  # keys repeat across writers
                answer = put(client, job, generation, key)
                answers[writer].append((generation, key, answer.status_code))

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    with signed_sink.client() as client:
        records = client.get("/records", params={"job": job}).json()["records"]
        refused = client.get("/rejections", params={"job": job}).json()["rejections"]
        highest = client.get(f"/fence/{job}").json()["generation"]
    flat = [a for per_writer in answers for a in per_writer]
    assert len(flat) == writers * writes
    statuses = {status for _, _, status in flat}
    assert statuses <= {200, 201, 409}, statuses
    generations = [r["generation"] for r in records]
    assert generations == sorted(generations), "an accepted generation went backwards"
    keys = [r["effect_key"] for r in records]
    assert len(keys) == len(set(keys)), "an effect key was applied twice"
    assert sorted((g, k) for g, k, s in flat if s == 201) == sorted(
        (r["generation"], r["effect_key"]) for r in records
    )
    # Duplicates count as accepted tokens too (the effect was already there).
    assert highest == max(g for g, _, s in flat if s in (200, 201)) >= max(generations)
    assert sum(s == 409 for _, _, s in flat) > 0  # the test did exercise stale writes
    assert sum(r["kind"] == "stale" for r in refused) == sum(s == 409 for _, _, s in flat)
    assert sum(r["kind"] == "duplicate" for r in refused) == sum(s == 200 for _, _, s in flat)


def test_bad_tokens_are_refused_and_change_nothing(signed_sink: SinkProcess) -> None:
    job = new_job()
    with signed_sink.client() as client:
        assert put(client, job, 7, "a").status_code == 201
        good = token_headers(tenure.FencingToken(job, 7), RING)
        cases = {
            "forged": ({**good, "Tenure-Generation": str(2**63 - 1)}, 403, "bad-signature"),
            "truncated": (
                {**good, "Tenure-Token-Signature": good["Tenure-Token-Signature"][:20]},
                400,
                "malformed",
            ),
            "cross-job": ({**good, "Tenure-Job": new_job()}, 403, "bad-signature"),
            "unsigned": (token_headers(tenure.FencingToken(job, 9)), 403, "unsigned"),
            "no token": ({}, 428, "missing"),
        }
        for what, (headers, status, kind) in cases.items():
            answer = client.post("/records", json={"what": what}, headers=headers)
            assert answer.status_code == status, what
            assert answer.json()["type"] == f"urn:tenure:problem:{kind}", what
        assert client.get(f"/fence/{job}").json()["generation"] == 7  # nothing moved it
        assert put(client, job, 8, "b", ring=OLD_RING).status_code == 201  # k1 still valid
        replayed = client.post("/records", json={}, headers=good)  # genuine, but old now
        assert (replayed.status_code, replayed.json()["current_generation"]) == (409, 8)
        again = put(client, job, 8, "b")
        assert again.status_code == 200
        assert again.json()["duplicate"] is True
        assert again.json()["record"]["generation"] == 8
        records = client.get("/records", params={"job": job}).json()["records"]
        summary = client.get("/").json()
        assert client.get("/healthz").json() == {"ok": True}
        assert client.get("/records", params={"limit": "0"}).status_code == 400
    assert [(r["generation"], r["effect_key"]) for r in records] == [(7, "a"), (8, "b")]
    assert summary["signed"] is True
    assert summary["key_ids"] == ["k2", "k1"]


def test_sink_show_prints_what_was_accepted_and_refused(signed_sink: SinkProcess) -> None:
    job = new_job()
    with signed_sink.client() as client:
        put(client, job, 3, "x")
        put(client, job, 2, "y")
    command = [sys.executable, "-m", "tenure", "sink", "show", "--db", str(signed_sink.db)]
    shown = subprocess.run(
        [*command, "--job", job, "--json"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    report = json.loads(shown.stdout)
    assert [r["generation"] for r in report["records"]] == [3]
    assert [(r["kind"], r["presented_generation"]) for r in report["rejections"]] == [("stale", 2)]
    text = subprocess.run([*command, "--job", job], cwd=ROOT, capture_output=True, text=True)
    assert text.returncode == 0, text.stderr
    assert "accepted (1)" in text.stdout
    assert "refused (1)" in text.stdout


# -- in process ------------------------------------------------------------------------


def test_unsigned_strict_sink_in_process(tmp_path: Path) -> None:
    app = create_app(tmp_path / "sink.db", strict=True)
    plain = token_headers
    with TestClient(app) as client:
        first = client.post("/records", json=[1], headers=plain(tenure.FencingToken("j", 1)))
        assert first.status_code == 201
        assert first.json()["record"]["value"] == [1]
        again = client.post("/records", json=[2], headers=plain(tenure.FencingToken("j", 1)))
        assert again.json()["type"] == "urn:tenure:problem:strict"
        both = {**plain(tenure.FencingToken("j", 2)), "Idempotency-Key": "other"}
        conflict = client.put("/records/k", json={}, headers=both)
        assert conflict.status_code == 400
        bad_json = client.post("/records", content=b"{", headers=plain(tenure.FencingToken("j", 3)))
        assert bad_json.status_code == 400
        keyed = {**plain(tenure.FencingToken("j", 4)), "Idempotency-Key": "k/1"}
        assert client.post("/records", json={}, headers=keyed).status_code == 201
        records = client.get("/records").json()
        refused = client.get("/rejections", params={"job": "j"}).json()["rejections"]
    assert [r["generation"] for r in records["records"]] == [1, 4]
    assert records["records"][1]["effect_key"] == "k/1"
    assert [r["kind"] for r in refused] == ["strict"]


def test_the_cli_reports_a_missing_port(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        db = str(tmp_path / "s.db")
        done = subprocess.run(
            [sys.executable, "-m", "tenure", "sink", "serve", "--port", str(port), "--db", db],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert done.returncode == 1
    assert "cannot listen" in done.stderr
    bad_key = subprocess.run(
        [sys.executable, "-m", "tenure", "sink", "serve", "--key", "k=short"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad_key.returncode == 2
    assert "at least 16 bytes" in bad_key.stderr


@pytest.mark.parametrize(
    ("db", "options", "argument"),
    [
        (None, {}, "path"),
        (42, {}, "path"),
        (":memory:", {}, "path"),
        ("sink.db", {"keyring": "k1=secret"}, "keyring"),
        ("sink.db", {"strict": "yes"}, "strict"),
    ],
)
def test_bad_sink_arguments_create_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: Any, options: dict[str, Any], argument: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(tenure.InvalidArgument) as caught:
        create_app(db, **options)
    assert caught.value.argument == argument
    assert list(tmp_path.iterdir()) == []
