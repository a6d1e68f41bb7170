"""HTTP: the httpx auth that stamps requests, the ASGI middleware that fences them, and the
header format between the two (in process; the real sink process is in test_sink.py)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")

from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

with warnings.catch_warnings():  # starlette 1.x would rather have httpx2 behind TestClient
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

import tenure  # noqa: E402
from tenure import fence  # noqa: E402
from tenure.fence import asgi  # noqa: E402
from tenure.fence import headers as wire  # noqa: E402
from tenure.fence.asgi import FenceMiddleware  # noqa: E402
from tenure.fence.http import TenureAuth, raise_for_fence  # noqa: E402

JOB = "export/2024 ü"
KEY = b"http-test-secret-0123456789"


def token(generation: int, job: str = JOB) -> tenure.FencingToken:
    return tenure.FencingToken(job, generation)


def make_app(**options: Any) -> tuple[Starlette, list[Any], list[Any]]:
    """An app that records what reached it, behind the middleware."""
    reached: list[Any] = []
    refused: list[Any] = []

    async def effect(request: Request) -> JSONResponse:
        reached.append(getattr(request.state, "tenure_token", None))
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/effect", effect, methods=["GET", "POST", "PUT"])])
    app.add_middleware(
        FenceMiddleware, on_rejected=lambda rejection, scope: refused.append(rejection), **options
    )
    return app, reached, refused


@pytest.fixture
def ring() -> fence.Keyring:
    return fence.Keyring({"k1": KEY})


def post(client: TestClient, headers: dict[str, str]) -> Any:
    return client.post("/effect", headers=headers, json={})


def test_headers_of_a_token(ring: fence.Keyring) -> None:
    assert wire.token_headers(token(7)) == {
        "Tenure-Job": "export%2F2024%20%C3%BC",
        "Tenure-Generation": "7",
    }
    signed = wire.token_headers(token(7), ring)
    assert set(signed) == {
        "Tenure-Job",
        "Tenure-Generation",
        "Tenure-Issued-At",
        "Tenure-Key-Id",
        "Tenure-Token-Signature",
    }
    assert wire.check_headers(signed, ring) == token(7)
    assert wire.check_headers({"tenure-job": "a", "TENURE-GENERATION": "3"}) == token(3, "a")
    assert wire.check_headers({"Content-Type": "text/plain"}) is None


@pytest.mark.parametrize(
    "headers",
    [
        {"Tenure-Job": "a"},
        {"Tenure-Generation": "3"},
        {"Tenure-Job": "a", "Tenure-Generation": "03"},
        {"Tenure-Job": "a", "Tenure-Generation": "-3"},
        {"Tenure-Job": "a", "Tenure-Generation": "0"},
        {"Tenure-Job": "a", "Tenure-Generation": str(2**63)},
        {"Tenure-Job": "a", "Tenure-Generation": "3.0"},
        {"Tenure-Job": "a%zz", "Tenure-Generation": "3"},
        {"Tenure-Job": "%FF", "Tenure-Generation": "3"},  # not UTF-8
        {"Tenure-Job": "a%00b", "Tenure-Generation": "3"},  # a control character
        {"Tenure-Job": "a b", "Tenure-Generation": "3"},  # not percent-encoded
        {"Tenure-Job": "a", "Tenure-Generation": "3", "Tenure-Key-Id": "k1"},
        {"tenure-job": ["a", "b"], "Tenure-Generation": "3"},
    ],
)
def test_malformed_headers(headers: dict[str, Any]) -> None:
    found = wire.check_headers(headers)
    assert isinstance(found, wire.Rejection)
    assert (found.kind, found.status) == ("malformed", 400)


def test_the_middleware_fences_requests() -> None:
    app, reached, refused = make_app()
    with TestClient(app) as client:
        assert post(client, wire.token_headers(token(7))).status_code == 200
        assert post(client, wire.token_headers(token(7))).status_code == 200  # same again
        assert post(client, wire.token_headers(token(8))).status_code == 200
        late = post(client, wire.token_headers(token(7)))
        assert client.get("/effect").status_code == 200  # no token, safe method: passes
        missing = client.post("/effect", json={})
        other_job = post(client, wire.token_headers(token(1, "another")))
    assert late.status_code == 409
    assert late.headers["content-type"] == "application/problem+json"
    problem = late.json()
    assert problem == {
        "type": "urn:tenure:problem:stale",
        "title": "Stale fencing token",
        "status": 409,
        "detail": problem["detail"],
        "instance": "/effect",
        "job_id": JOB,
        "presented_generation": 7,
        "current_generation": 8,
    }
    assert "generation 8 was already accepted" in problem["detail"]
    assert missing.status_code == 428
    assert other_job.status_code == 200
    assert reached == [token(7), token(7), token(8), None, token(1, "another")]
    assert [r.kind for r in refused] == ["stale", "missing"]


def test_strict_accepts_one_request_per_generation() -> None:
    app, reached, _ = make_app(strict=True)
    with TestClient(app) as client:
        assert post(client, wire.token_headers(token(3))).status_code == 200
        again = post(client, wire.token_headers(token(3)))
    assert again.status_code == 409
    assert again.json()["type"] == "urn:tenure:problem:strict"
    assert len(reached) == 1


def test_signed_tokens(ring: fence.Keyring) -> None:
    store = asgi.MemoryFenceStore()
    app, reached, refused = make_app(store=store, keyring=ring)
    with TestClient(app) as client:
        good = wire.token_headers(token(7), ring)
        assert post(client, good).status_code == 200
        forged = {**good, "Tenure-Generation": str(2**63 - 1)}
        answer = post(client, forged)
        assert (answer.status_code, answer.json()["type"]) == (
            403,
            "urn:tenure:problem:bad-signature",
        )
        assert store.highest(JOB) == 7  # the forged generation never reached the fence
        assert post(client, wire.token_headers(token(8), ring)).status_code == 200
        truncated = {**good, "Tenure-Token-Signature": good["Tenure-Token-Signature"][:-2]}
        assert post(client, truncated).status_code == 400
        cross_job = {**good, "Tenure-Job": "another-job"}
        assert post(client, cross_job).status_code == 403
        unsigned = post(client, wire.token_headers(token(9)))
        assert unsigned.json()["type"] == "urn:tenure:problem:unsigned"
        replayed = post(client, good)  # a captured, genuine generation-7 request
        assert replayed.status_code == 409
        stranger = wire.token_headers(token(9), fence.Keyring({"k9": KEY}))
        assert post(client, stranger).json()["type"] == "urn:tenure:problem:unknown-key"
    assert reached == [token(7), token(8)]
    assert [r.status for r in refused] == [403, 400, 403, 403, 409, 403]
    assert store.highest(JOB) == 8


def test_sqlite_fence_store_survives_restarts(tmp_path: Path) -> None:
    path = tmp_path / "fence.db"
    app, _, _ = make_app(store=asgi.SQLiteFenceStore(path))
    with TestClient(app) as client:
        assert post(client, wire.token_headers(token(5))).status_code == 200
    app, reached, _ = make_app(store=asgi.SQLiteFenceStore(path))
    with TestClient(app) as client:
        assert post(client, wire.token_headers(token(4))).status_code == 409
    assert reached == []


def test_non_http_scopes_pass_through() -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    import anyio

    anyio.run(FenceMiddleware(app), {"type": "lifespan"}, None, None)
    assert seen == ["lifespan"]
    with pytest.raises(tenure.InvalidArgument, match="strict"):
        FenceMiddleware(app, strict="yes")  # type: ignore[arg-type]


# -- the client side ---------------------------------------------------------------------


def capture() -> tuple[Any, list[Any]]:
    sent: list[Any] = []

    def handler(request: Any) -> Any:
        sent.append(request)
        return httpx.Response(200, json={})

    return httpx.MockTransport(handler), sent


def test_tenure_auth_stamps_every_request(ring: fence.Keyring) -> None:
    transport, sent = capture()
    current = {"token": token(7)}
    auth = TenureAuth(lambda: current["token"], keyring=ring)
    with httpx.Client(transport=transport, auth=auth, base_url="http://sink") as client:
        client.post("/a", json={})
        current["token"] = token(8)
        client.put("/b", json={})
    assert [wire.check_headers(dict(r.headers), ring) for r in sent] == [token(7), token(8)]
    assert sent[0].headers["Tenure-Job"] == "export%2F2024%20%C3%BC"


@pytest.mark.anyio
async def test_tenure_auth_with_an_async_client() -> None:
    transport, sent = capture()
    async with httpx.AsyncClient(transport=transport, auth=TenureAuth(token(3))) as client:
        await client.get("http://sink/x")
    assert wire.check_headers(dict(sent[0].headers)) == token(3)


def test_tenure_auth_against_the_middleware(ring: fence.Keyring) -> None:
    app, reached, _ = make_app(keyring=ring)
    with TestClient(app) as client:
        answer = client.post("/effect", json={}, auth=TenureAuth(token(2), keyring=ring))
        assert answer.status_code == 200
        late = client.post("/effect", json={}, auth=TenureAuth(token(1), keyring=ring))
    with pytest.raises(tenure.StaleToken) as caught:
        raise_for_fence(late)
    assert (caught.value.job_id, caught.value.generation, caught.value.highest_seen) == (
        JOB,
        1,
        2,
    )
    raise_for_fence(answer)  # not a refusal: nothing raised
    assert reached == [token(2)]


def test_bad_auth_arguments() -> None:
    with pytest.raises(tenure.InvalidArgument, match="token"):
        TenureAuth("7:job")
    with pytest.raises(tenure.InvalidArgument, match="keyring"):
        TenureAuth(token(1), keyring="secret")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("headers", "options", "argument"),
    [
        (None, {}, "headers"),
        ("Tenure-Job: a", {}, "headers"),
        ([("Tenure-Job", "a")], {}, "headers"),
        ({1: "x"}, {}, "headers"),
        ({b"Tenure-Job": b"a"}, {}, "headers"),
        ({"Tenure-Job": b"a"}, {}, "headers['Tenure-Job']"),
        ({"Tenure-Generation": 3}, {}, "headers['Tenure-Generation']"),
        ({"Tenure-Job": ["a", None]}, {}, "headers['Tenure-Job']"),
        ({"Tenure-Job": "a", "Tenure-Generation": "3"}, {"keyring": "x"}, "keyring"),
    ],
)
def test_bad_header_arguments(headers: Any, options: dict[str, Any], argument: str) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        wire.check_headers(headers, **options)
    assert caught.value.argument == argument


def test_header_objects_are_read(ring: fence.Keyring) -> None:
    signed = wire.token_headers(token(7), ring)
    assert wire.check_headers(httpx.Headers(signed), ring) == token(7)
    from starlette.datastructures import Headers

    assert wire.check_headers(Headers(signed), ring) == token(7)
    repeated = Headers(raw=[(b"tenure-job", b"a"), (b"tenure-job", b"b")])
    found = wire.check_headers(repeated)
    assert isinstance(found, wire.Rejection)
    assert found.kind == "malformed"


@pytest.mark.parametrize("keyring", ["x", b"k1=" + KEY, {"k1": KEY}])
def test_token_headers_refuse_what_tenure_auth_refuses(keyring: Any) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        wire.token_headers(token(7), keyring)
    assert caught.value.argument == "keyring"
    with pytest.raises(tenure.InvalidArgument) as caught:
        TenureAuth(token(7), keyring=keyring)
    assert caught.value.argument == "keyring"


async def _asgi_app(scope: Any, receive: Any, send: Any) -> None:
    pass


class _NoHighest:
    blocking = False

    def advance(self, token: Any, *, strict: bool = False) -> asgi.FenceVerdict:
        return asgi.FenceVerdict(True, None)


@pytest.mark.parametrize(
    ("app", "options", "argument"),
    [
        (None, {}, "app"),
        ("myapp:app", {}, "app"),
        (_asgi_app, {"store": 42}, "store"),
        (_asgi_app, {"store": "fence.db"}, "store"),
        (_asgi_app, {"store": _NoHighest()}, "store"),
        (_asgi_app, {"on_rejected": 42}, "on_rejected"),
        (_asgi_app, {"on_rejected": "log"}, "on_rejected"),
        (_asgi_app, {"keyring": "x"}, "keyring"),
    ],
)
def test_bad_middleware_arguments(app: Any, options: dict[str, Any], argument: str) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        FenceMiddleware(app, **options)
    assert caught.value.argument == argument


def test_problem_body_is_json(ring: fence.Keyring) -> None:
    rejection = wire.Rejection.stale(token(1), 2, strict=False)
    assert json.loads(rejection.body("/x"))["instance"] == "/x"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
