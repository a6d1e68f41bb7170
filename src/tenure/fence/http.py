"""HTTP clients: stamp every request with the fencing token (needs ``httpx``: the
``tenure[http]`` extra).

::

    import httpx
    from tenure.fence.http import TenureAuth, raise_for_fence

    with httpx.Client(base_url=url, auth=TenureAuth(lease, keyring=keyring)) as client:
        response = client.put("/records/invoice-42", json=body)
        raise_for_fence(response)          # a 409 from a fenced destination -> StaleToken

`TenureAuth` works with `httpx.Client` and `httpx.AsyncClient`. It refuses to send (raises
`LeaseLost`) once the worker runtime has marked the lease lost, and signs each request
afresh when given a `Keyring`. The headers are documented in `tenure.fence._headers` and
docs/fencing.md; `token_headers` gives them for any other client.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from typing import Any

import httpx

from ..errors import StaleToken
from ..models import FencingToken, Lease
from ._headers import PROBLEM_CONTENT_TYPE, token_headers
from ._loss import refuse_if_lost
from ._signed import Keyring, SignedToken, validate_keyring
from ._token import fencing_token

__all__ = ["TenureAuth", "raise_for_fence", "token_headers"]


class TenureAuth(httpx.Auth):
    """An `httpx.Auth` that adds the fencing-token headers to every request.

    ``token``: a `FencingToken`, `Lease`, worker ``JobContext`` or `SignedToken`, or a
    callable returning one (read at each request). ``keyring``: sign each request with its
    current key (issued now). Other authentication can be combined by sending it in headers
    of your own; ``httpx`` takes one ``auth`` per request.
    """

    def __init__(self, token: object, *, keyring: Keyring | None = None) -> None:
        keyring = validate_keyring(keyring)
        direct = isinstance(token, (FencingToken, Lease, SignedToken)) or not callable(token)
        if direct:
            fencing_token(token)  # bad tokens fail here, not at the first request
        self._token = token
        self._source: Callable[[], object] | None = None if direct else token  # type: ignore[assignment]
        self.keyring = keyring

    def __repr__(self) -> str:
        return f"<TenureAuth {self._token if self._source is None else 'callable'}>"

    def headers(self) -> dict[str, str]:
        """The headers for a request sent now; `LeaseLost` if the lease is lost."""
        token = self._token if self._source is None else self._source()
        refuse_if_lost(fencing_token(token))
        return token_headers(token, self.keyring)

    def stamp(self, request: httpx.Request) -> httpx.Request:
        """Add the headers to a request built ahead of sending (``client.build_request``)."""
        request.headers.update(self.headers())
        return request

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        yield self.stamp(request)


def raise_for_fence(response: httpx.Response) -> None:
    """Raise `StaleToken` when ``response`` is a fenced destination's refusal (409, or 403
    for a token that did not verify, with an ``application/problem+json`` body of tenure's
    ``urn:tenure:problem:*`` types); return quietly otherwise. Reads the body."""
    if response.status_code not in (403, 409):
        return
    if response.headers.get("content-type", "").split(";")[0].strip() != PROBLEM_CONTENT_TYPE:
        return
    try:
        problem: Any = json.loads(response.read())
    except ValueError:
        return
    if not isinstance(problem, dict) or not str(problem.get("type", "")).startswith(
        "urn:tenure:problem:"
    ):
        return
    job_id = problem.get("job_id")
    presented = problem.get("presented_generation")
    current = problem.get("current_generation")
    raise StaleToken(
        f"{response.request.method} {response.request.url} refused by the destination "
        f"({response.status_code} {problem.get('title')}): {problem.get('detail')}",
        job_id=job_id if isinstance(job_id, str) else "?",
        generation=presented if isinstance(presented, int) else None,
        highest_seen=current if isinstance(current, int) else None,
    )
