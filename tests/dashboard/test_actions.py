"""The dashboard's actions on the store's job control (cancel, requeue, delete), on every
backend: each offered for the states it takes, confirmed on a page of its own, done by a
POST carrying the CSRF token, refused without it and in read-only mode, and the store's
refusal (`JobStateConflict`) shown as a clear message."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from starlette.testclient import TestClient

import tenure
import tenure.dashboard
from tenure.dashboard import create_app

HOSTILE = '<script>alert(1)</script>"onmouseover=x</textarea>é'


@pytest.fixture
def client(store: tenure.Store) -> Iterator[TestClient]:
    with TestClient(create_app(store)) as opened:
        yield opened


def _token(client: TestClient, job_id: str, action: str) -> str:
    page = client.get("/job/confirm", params={"id": job_id, "action": action})
    assert page.status_code == 200, page.text
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def _act(client: TestClient, job_id: str, action: str, token: str | None = None) -> object:
    token = _token(client, job_id, action) if token is None else token
    return client.post(
        "/job/action",
        data={"csrf_token": token, "id": job_id, "action": action},
        follow_redirects=False,
    )


def _offered(client: TestClient, job_id: str) -> set[str]:
    page = client.get("/job", params={"id": job_id}).text
    return set(re.findall(r"action=(cancel|requeue|delete)", page))


def test_cancel_a_ready_job_then_requeue_then_delete(
    client: TestClient, store: tenure.Store
) -> None:
    store.submit("j1")
    assert _offered(client, "j1") == {"cancel"}
    done = _act(client, "j1", "cancel")
    assert done.status_code == 303  # type: ignore[attr-defined]
    assert done.headers["location"] == "/job?id=j1"  # type: ignore[attr-defined]
    job = store.get("j1")
    assert job.state == "cancelled"
    assert job.error == "cancelled from the tenure dashboard"
    assert _offered(client, "j1") == {"requeue", "delete"}
    assert _act(client, "j1", "requeue").status_code == 303  # type: ignore[attr-defined]
    assert store.get("j1").state == "ready"
    store.cancel("j1")
    gone = _act(client, "j1", "delete")
    assert gone.status_code == 303  # type: ignore[attr-defined]
    assert gone.headers["location"] == "/jobs"  # type: ignore[attr-defined]
    with pytest.raises(tenure.JobNotFound):
        store.get("j1")


def test_cancel_a_leased_job_moves_its_generation_and_its_holder_loses(
    client: TestClient, store: tenure.Store
) -> None:
    store.submit("j1")
    lease = store.claim("j1", "w1", 30)
    assert lease is not None
    assert _offered(client, "j1") == {"cancel"}
    assert _act(client, "j1", "cancel").status_code == 303  # type: ignore[attr-defined]
    job = store.get("j1")
    assert (job.state, job.generation) == ("cancelled", lease.generation + 1)
    with pytest.raises(tenure.LeaseLost) as lost:
        store.complete(lease, {"late": True})
    assert lost.value.reason == "cancelled"


def test_requeue_a_dead_job_from_the_dead_jobs_view(
    client: TestClient, store: tenure.Store
) -> None:
    store.submit("j1", max_attempts=1)
    lease = store.claim("j1", "w1", 30)
    assert lease is not None
    store.fail(lease, "boom", retry_in=0)
    assert store.get("j1").state == "dead"
    view = client.get("/jobs", params={"state": "dead"})
    assert "/job/confirm?id=j1&amp;action=requeue" in view.text
    assert "/job/confirm?id=j1&amp;action=delete" in view.text
    assert 'href="/jobs?state=dead"' in view.text  # the nav link to this view
    assert _act(client, "j1", "requeue").status_code == 303  # type: ignore[attr-defined]
    assert store.get("j1").state == "ready"
    assert "action=requeue" not in client.get("/jobs", params={"state": "ready"}).text


def test_a_job_whose_state_changed_since_the_page_is_refused(
    client: TestClient, store: tenure.Store
) -> None:
    store.submit("j1")
    token = _token(client, "j1", "cancel")
    lease = store.claim("j1", "w1", 30)
    assert lease is not None
    store.complete(lease, None)  # done before the operator confirmed
    refused = _act(client, "j1", "cancel", token)
    assert refused.status_code == 409  # type: ignore[attr-defined]
    text = refused.text  # type: ignore[attr-defined]
    assert "Job j1 is done: cancel takes only a job that is ready or leased" in text
    assert store.get("j1").state == "done"
    # Asked for an action the job's state does not take: said so, nothing offered.
    page = client.get("/job/confirm", params={"id": "j1", "action": "cancel"})
    assert page.status_code == 409
    assert "Job j1 is done: cancel takes only a job that is ready or leased" in page.text


def test_the_stores_refusal_is_shown_as_such(store: tenure.Store) -> None:
    # The state can change between the dashboard's look and the store's call: the store's
    # own refusal (JobStateConflict) is the answer then. An action offered for done jobs
    # that cancels makes that refusal every time.
    cancel_done = tenure.dashboard.Action(
        "cancel", "Cancel", "Cancel {job}?", states=("done",), run=lambda s, j: s.cancel(j)
    )
    store.submit("j1")
    lease = store.claim("j1", "w1", 30)
    assert lease is not None
    store.complete(lease, None)
    with TestClient(create_app(store, actions=[cancel_done])) as client:
        refused = _act(client, "j1", "cancel")
    assert refused.status_code == 409  # type: ignore[attr-defined]
    text = refused.text  # type: ignore[attr-defined]
    assert "Refused by the store" in text
    assert "cancel refused for job &#39;j1&#39;: it is done" in text
    assert store.get("j1").state == "done"


def test_every_action_needs_the_csrf_token(client: TestClient, store: tenure.Store) -> None:
    store.submit("j1")
    _token(client, "j1", "cancel")  # the cookie is set
    for token in ("", "forged"):
        refused = _act(client, "j1", "cancel", token)
        assert refused.status_code == 403  # type: ignore[attr-defined]
        assert "CSRF" in refused.text  # type: ignore[attr-defined]
    assert store.get("j1").state == "ready"
    store.cancel("j1")
    for action in ("requeue", "delete"):
        assert _act(client, "j1", action, "forged").status_code == 403  # type: ignore[attr-defined]
    assert store.get("j1").state == "cancelled"


def test_read_only_offers_no_action_and_refuses_each(store: tenure.Store) -> None:
    store.submit("j1")
    store.submit("j2")
    store.cancel("j2")
    with TestClient(create_app(store, read_only=True)) as client:
        assert _offered(client, "j1") == set()
        listed = client.get("/jobs", params={"state": "cancelled"}).text
        assert "j2" in listed
        assert "/job/confirm" not in listed
        client.cookies.set("tenure_csrf", "t")
        for job_id, action in (("j1", "cancel"), ("j2", "requeue"), ("j2", "delete")):
            confirm = client.get("/job/confirm", params={"id": job_id, "action": action})
            assert confirm.status_code == 403
            assert _act(client, job_id, action, "t").status_code == 403  # type: ignore[attr-defined]
    assert (store.get("j1").state, store.get("j2").state) == ("ready", "cancelled")


def test_hostile_ids_are_escaped_on_the_confirm_page(
    client: TestClient, store: tenure.Store
) -> None:
    store.submit(HOSTILE)
    page = client.get("/job/confirm", params={"id": HOSTILE, "action": "cancel"})
    assert page.status_code == 200
    assert "<script>alert" not in page.text
    assert '"onmouseover=' not in page.text
    assert "</textarea>é" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&#34;onmouseover=x&lt;/textarea&gt;é" in page.text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token is not None
    done = _act(client, HOSTILE, "cancel", token.group(1))
    assert done.status_code == 303  # type: ignore[attr-defined]
    assert store.get(HOSTILE).state == "cancelled"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _async_act(client: httpx.AsyncClient, job_id: str, action: str) -> httpx.Response:
    page = await client.get("/job/confirm", params={"id": job_id, "action": action})
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found is not None
    client.cookies.set("tenure_csrf", found.group(1))
    return await client.post(
        "/job/action", data={"csrf_token": found.group(1), "id": job_id, "action": action}
    )


@pytest.mark.anyio
async def test_actions_on_an_async_store(url: str, clock: tenure.ManualClock) -> None:
    astore = await tenure.aio.connect(url, clock=clock, store_clock=clock)
    try:
        await astore.submit("j1")
        transport = httpx.ASGITransport(app=create_app(astore))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            assert (await _async_act(client, "j1", "cancel")).status_code == 303
            assert (await astore.get("j1")).state == "cancelled"
            assert (await _async_act(client, "j1", "requeue")).status_code == 303
            assert (await astore.get("j1")).state == "ready"
    finally:
        await astore.close()
