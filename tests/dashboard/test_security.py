"""The dashboard's security: the bind rule, authentication, the CSRF check and
confirmation of every action, read-only mode, and no lease secret anywhere."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

import tenure
from tenure._protocol import hash_secret
from tenure.cli import main
from tenure.dashboard import Action, Auth, check_bind, create_app, is_loopback
from tests.backends import POSTGRES
from tests.dashboard._support import dashboard_server


def _basic(user: str, password: str) -> dict[str, str]:
    pair = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"authorization": f"Basic {pair}"}


# -- the bind rule ---------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"])
def test_loopback_addresses_need_no_auth(host: str) -> None:
    assert is_loopback(host)
    check_bind(host, Auth())


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "example.com", ""])
def test_any_other_address_needs_auth(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(tenure.InvalidArgument, match="not a loopback address"):
        check_bind(host, Auth())
    check_bind(host, Auth(token="t0ken"))
    check_bind(host, Auth(user="ops", password="pw"))


def test_the_command_refuses_to_listen_openly_without_auth(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TENURE_DASHBOARD_USER", raising=False)
    monkeypatch.delenv("TENURE_DASHBOARD_PASSWORD", raising=False)
    done = CliRunner().invoke(main, ["dashboard", "--host", "0.0.0.0"])
    assert done.exit_code == 2
    assert "not a loopback address" in done.output
    assert "--auth-token" in done.output
    as_json = CliRunner().invoke(main, ["--json", "dashboard", "--host", "10.1.2.3"])
    assert as_json.exit_code == 2
    assert json.loads(as_json.output)["error"] == "InvalidArgument"
    monkeypatch.setenv("TENURE_DASHBOARD_USER", "ops")  # a user without a password
    half = CliRunner().invoke(main, ["dashboard", "--host", "0.0.0.0"])
    assert half.exit_code == 2
    assert "give both" in half.output


def test_auth_arguments_are_checked() -> None:
    with pytest.raises(tenure.InvalidArgument):
        Auth(token="")
    with pytest.raises(tenure.InvalidArgument):
        Auth(user="ops")
    with pytest.raises(tenure.InvalidArgument):
        Auth(user="", password="")


# -- authentication --------------------------------------------------------------------


def test_a_token_is_required_when_set(store: tenure.Store) -> None:
    store.submit("j1", {"card": "4111"})
    with TestClient(create_app(store, auth=Auth(token="s3cret"))) as client:
        for path in ("/queues", "/jobs", "/job?id=j1", "/metrics", "/static/htmx.min.js"):
            refused = client.get(path)
            assert refused.status_code == 401, path
            assert refused.headers["www-authenticate"].startswith("Basic")
            assert "4111" not in refused.text
        assert client.get("/jobs", headers={"authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/jobs", headers=_basic("x", "wrong")).status_code == 401
        assert client.get("/jobs", headers={"authorization": "Basic !!!"}).status_code == 401
        bearer = client.get("/job?id=j1", headers={"authorization": "Bearer s3cret"})
        assert bearer.status_code == 200
        assert "4111" in bearer.text
        assert client.get("/jobs", headers=_basic("anyone", "s3cret")).status_code == 200


def test_basic_auth_with_a_user_and_password(store: tenure.Store) -> None:
    with TestClient(create_app(store, auth=Auth(user="ops", password="pw"))) as client:
        assert client.get("/jobs").status_code == 401
        assert client.get("/jobs", headers=_basic("ops", "nope")).status_code == 401
        assert client.get("/jobs", headers=_basic("eve", "pw")).status_code == 401
        assert client.get("/jobs", headers={"authorization": "Bearer pw"}).status_code == 401
        assert client.get("/jobs", headers=_basic("ops", "pw")).status_code == 200


# -- actions: confirmation, CSRF, read-only ----------------------------------------------
# The machinery is tested with an action of the test's own, which records what it was
# asked to do; the real actions (cancel, requeue, delete) are in test_actions.py.


@pytest.fixture
def recorded() -> list[str]:
    return []


@pytest.fixture
def touch(recorded: list[str]) -> Action:
    def run(store: tenure.Store, job_id: str) -> None:
        store.get(job_id)  # the store given to create_app is the one passed in
        recorded.append(job_id)

    return Action("touch", "Touch", "Really touch job {job}?", states=("ready",), run=run)


@pytest.fixture
def client(store: tenure.Store, touch: Action) -> Iterator[TestClient]:
    store.submit("<b>j1</b>")
    with TestClient(create_app(store, actions=[touch])) as opened:
        yield opened


def _confirm(client: TestClient, job_id: str = "<b>j1</b>") -> str:
    page = client.get("/job/confirm", params={"id": job_id, "action": "touch"})
    assert page.status_code == 200
    assert "Really touch job &lt;b&gt;j1&lt;/b&gt;?" in page.text
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def test_the_store_s_job_control_is_offered_by_default() -> None:
    assert [a.name for a in tenure.dashboard.ACTIONS] == ["cancel", "requeue", "delete"]


def test_an_action_is_offered_confirmed_and_done(
    client: TestClient, recorded: list[str], store: tenure.Store
) -> None:
    page = client.get("/job", params={"id": "<b>j1</b>"})
    assert "/job/confirm?id=%3Cb%3Ej1%3C%2Fb%3E&amp;action=touch" in page.text
    token = _confirm(client)
    assert recorded == []  # the confirmation page changes nothing
    done = client.post(
        "/job/action",
        data={"csrf_token": token, "id": "<b>j1</b>", "action": "touch"},
        follow_redirects=False,
    )
    assert done.status_code == 303
    assert recorded == ["<b>j1</b>"]
    assert done.headers["location"] == "/job?id=%3Cb%3Ej1%3C%2Fb%3E"
    # not offered for a state it does not apply to
    lease = store.claim("<b>j1</b>", "w", 30)
    assert lease is not None
    assert "/job/confirm" not in client.get("/job", params={"id": "<b>j1</b>"}).text


def test_a_post_without_the_csrf_token_is_refused(client: TestClient, recorded: list[str]) -> None:
    _confirm(client)  # the cookie is set
    missing = client.post("/job/action", data={"id": "<b>j1</b>", "action": "touch"})
    assert missing.status_code == 403
    assert "CSRF" in missing.text
    wrong = client.post(
        "/job/action", data={"csrf_token": "forged", "id": "<b>j1</b>", "action": "touch"}
    )
    assert wrong.status_code == 403
    assert recorded == []


def test_a_post_from_another_site_has_no_cookie(
    store: tenure.Store, touch: Action, recorded: list[str]
) -> None:
    with TestClient(create_app(store, actions=[touch])) as first:
        store.submit("<b>j1</b>")
        token = _confirm(first)
    with TestClient(create_app(store, actions=[touch])) as other:  # no cookie jar
        forged = other.post(
            "/job/action", data={"csrf_token": token, "id": "<b>j1</b>", "action": "touch"}
        )
    assert forged.status_code == 403
    assert recorded == []


def test_an_oversized_post_is_refused(client: TestClient, recorded: list[str]) -> None:
    token = _confirm(client)
    huge = client.post(
        "/job/action",
        data={"csrf_token": token, "id": "<b>j1</b>", "action": "touch", "pad": "x" * 20_000},
    )
    assert huge.status_code == 413
    assert recorded == []


def test_unknown_action_and_job(client: TestClient, recorded: list[str]) -> None:
    token = _confirm(client)
    unknown = client.post(
        "/job/action", data={"csrf_token": token, "id": "<b>j1</b>", "action": "explode"}
    )
    assert unknown.status_code == 400
    missing = client.post("/job/action", data={"csrf_token": token, "id": "zz", "action": "touch"})
    assert missing.status_code == 404
    assert recorded == []


def test_an_action_posted_for_a_job_in_a_state_it_does_not_take_is_refused(
    client: TestClient, store: tenure.Store, recorded: list[str]
) -> None:
    # `touch` takes ready jobs: a form posted after the job moved on (or without its
    # confirmation page) must not run it; the store would not refuse one of yours.
    token = _confirm(client)
    assert store.claim("<b>j1</b>", "w", 30) is not None
    refused = client.post(
        "/job/action",
        data={"csrf_token": token, "id": "<b>j1</b>", "action": "touch"},
        follow_redirects=False,
    )
    assert refused.status_code == 409
    assert "takes only a job that is ready" in refused.text
    assert recorded == []


def test_read_only_refuses_before_it_looks_anything_up(store: tenure.Store, touch: Action) -> None:
    with TestClient(create_app(store, actions=[touch], read_only=True)) as client:
        for params in ({"id": "missing", "action": "touch"}, {"id": "j", "action": "nope"}):
            assert client.get("/job/confirm", params=params).status_code == 403
        assert client.get("/queue/confirm", params={"queue": ""}).status_code == 403


def test_every_answer_carries_the_security_headers(store: tenure.Store) -> None:
    # The pages set them; /metrics, static files, Starlette's 404/405 and the 401/421 of
    # the middlewares did not.
    app = create_app(store, auth=Auth(token="t0ken"), allowed_hosts=["testserver"])
    with TestClient(app) as client:
        bearer = {"authorization": "Bearer t0ken"}
        answers = [
            client.get("/metrics", headers=bearer),
            client.get("/static/dashboard.css", headers=bearer),
            client.get("/no/such/page", headers=bearer),
            client.put("/jobs", headers=bearer),
            client.get("/jobs"),  # no token: 401
            client.get("/jobs", headers={**bearer, "host": "evil.example"}),  # 421
        ]
    assert [a.status_code for a in answers] == [200, 200, 404, 405, 401, 421]
    for answer in answers:
        assert answer.headers["x-content-type-options"] == "nosniff", answer.request.url
        assert answer.headers["x-frame-options"] == "DENY", answer.request.url
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]


def test_read_only_offers_nothing_and_refuses_posts(
    store: tenure.Store, touch: Action, recorded: list[str]
) -> None:
    store.submit("j1")
    with TestClient(create_app(store, actions=[touch], read_only=True)) as client:
        page = client.get("/job", params={"id": "j1"})
        assert "/job/confirm" not in page.text
        assert "read-only" in page.text
        assert client.get("/job/confirm", params={"id": "j1", "action": "touch"}).status_code == 403
        client.cookies.set("tenure_csrf", "t")
        refused = client.post(
            "/job/action", data={"csrf_token": "t", "id": "j1", "action": "touch"}
        )
        assert refused.status_code == 403
    assert recorded == []


def test_actions_are_checked(store: tenure.Store, touch: Action) -> None:
    with pytest.raises(tenure.InvalidArgument, match="twice"):
        create_app(store, actions=[touch, touch])
    with pytest.raises(tenure.InvalidArgument, match="Action"):
        create_app(store, actions=["cancel"])  # type: ignore[list-item]


# -- secrets ------------------------------------------------------------------------------


def test_no_lease_secret_or_hash_is_ever_served(
    store: tenure.Store, clock: tenure.ManualClock
) -> None:
    store.submit("held", {"x": 1})
    lease = store.claim("held", "w1", 30)
    assert lease is not None
    store.submit("done")
    finished = store.claim("done", "w2", 30)
    assert finished is not None
    store.complete(finished)
    secrets = {lease.secret, hash_secret(lease.secret), finished.secret}
    secrets.add(hash_secret(finished.secret))
    with TestClient(create_app(store)) as client:
        for path in (
            "/queues",
            "/queues/table",
            "/jobs",
            "/jobs/table",
            "/job?id=held",
            "/job/summary?id=held",
            "/job?id=done",
            "/jobs?state=leased",
            "/metrics",
        ):
            body = client.get(path).text
            for secret in secrets:
                assert secret not in body, path


# -- DNS rebinding, missing extras, the command's store ------------------------------------


def test_only_allowed_host_names_are_answered(store: tenure.Store) -> None:
    app = create_app(store, allowed_hosts=tenure.dashboard.LOOPBACK_NAMES)
    with TestClient(app, base_url="http://127.0.0.1:8321") as client:
        assert client.get("/jobs").status_code == 200
        for host in ("localhost:8321", "[::1]:8321", "127.0.0.1", "LOCALHOST"):
            assert client.get("/jobs", headers={"host": host}).status_code == 200, host
        for host in ("evil.example", "evil.example:8321", "127.0.0.1.evil.example", ""):
            refused = client.get("/jobs", headers={"host": host})
            assert refused.status_code == 421, host
            assert "wrong Host" in refused.text


def test_the_served_dashboard_refuses_a_rebound_host_name(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'rebind.db'}"
    tenure.connect(url).close()
    with dashboard_server(url) as running:
        assert httpx.get(f"{running.base}/jobs", timeout=5).status_code == 200
        rebound = httpx.get(f"{running.base}/jobs", headers={"host": "evil.example"}, timeout=5)
        assert rebound.status_code == 421


def test_the_served_dashboard_never_prints_the_store_password(tmp_path: Path) -> None:
    # Its start line named the URL as given, password and all (PostgreSQL trusts this
    # test server's connections, so the password is carried and ignored).
    with POSTGRES.isolated_url(tmp_path) as url:
        tenure.connect(url).close()  # the store exists (the dashboard creates none)
        secret = url.replace("://postgres@", "://postgres:S3CRETPW@", 1)
        assert "S3CRETPW" in secret
        with dashboard_server(secret) as running:
            assert httpx.get(f"{running.base}/jobs", timeout=5).status_code == 200
        said = running.process.communicate()[0]
    assert "tenure dashboard of postgresql://postgres@" in said
    assert "S3CRETPW" not in said


@pytest.mark.parametrize("missing", ["jinja2", "starlette"])
def test_a_missing_extra_says_what_to_install(missing: str) -> None:
    code = f"import sys; sys.modules[{missing!r}] = None; import tenure.dashboard"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode != 0
    assert f"tenure.dashboard needs {missing!r}" in done.stderr
    assert "pip install 'tenure[dashboard]'" in done.stderr


def test_the_command_does_not_create_a_store(tmp_path: Path) -> None:
    missing = tmp_path / "nothing-here.db"
    done = CliRunner().invoke(main, ["dashboard", "--store", f"sqlite:///{missing}"])
    assert done.exit_code == 1
    assert "nothing-here.db" in done.output
    assert not missing.exists()
