"""A fencing token on the wire: the HTTP headers that carry it, for any client or server.

`token_headers` gives the headers for a token (signed with a `Keyring`: the token, when
it was issued and the key id, under one HMAC); `check_headers` reads them back and answers
the token or the `Rejection` to send (an RFC 9457 problem). The httpx auth
(`tenure.fence.http.TenureAuth`) and the ASGI middleware (`tenure.fence.asgi`) are built on
these. See docs/fencing.md.
"""

from __future__ import annotations

from ._headers import (
    EFFECT_KEY_HEADER,
    GENERATION_HEADER,
    ISSUED_AT_HEADER,
    JOB_HEADER,
    KEY_ID_HEADER,
    PROBLEM_CONTENT_TYPE,
    SIGNATURE_HEADER,
    Rejection,
    check_headers,
    token_headers,
)

__all__ = [
    "EFFECT_KEY_HEADER",
    "GENERATION_HEADER",
    "ISSUED_AT_HEADER",
    "JOB_HEADER",
    "KEY_ID_HEADER",
    "PROBLEM_CONTENT_TYPE",
    "SIGNATURE_HEADER",
    "Rejection",
    "check_headers",
    "token_headers",
]
