"""Who may look: the bind rule, authentication (a token or a user and password), the CSRF
check of every POST, and the headers every answer carries.

The rule: the dashboard listens on a loopback address (127.0.0.1, ::1, localhost) unless
authentication is set; `check_bind` refuses anything else before a socket is opened.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgument

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "SECURITY_HEADERS",
    "SecurityHeaders",
    "Auth",
    "AuthMiddleware",
    "LOOPBACK_NAMES",
    "HostCheck",
    "check_bind",
    "csrf_ok",
    "is_loopback",
    "new_csrf_token",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CSRF_COOKIE = "tenure_csrf"
CSRF_FIELD = "csrf_token"

# Every page: no framing, no inline or foreign scripts (htmx is served by the dashboard
# itself), no sniffing, forms post only to the dashboard.
SECURITY_HEADERS: dict[str, str] = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


@dataclass(frozen=True)
class Auth:
    """What a request must present: ``token`` (as ``Authorization: Bearer <token>``, or as
    the password of HTTP basic auth with any user name, which a browser can prompt for),
    and/or ``user`` + ``password`` (HTTP basic auth)."""

    token: str | None = None
    user: str | None = None
    password: str | None = None

    def __post_init__(self) -> None:
        if self.token is not None and not self.token:
            raise InvalidArgument("auth_token", "must not be empty")
        if (self.user is None) != (self.password is None):
            raise InvalidArgument(
                "user/password",
                "give both (TENURE_DASHBOARD_USER and TENURE_DASHBOARD_PASSWORD) or neither",
            )
        if self.password is not None and not (self.user and self.password):
            raise InvalidArgument("user/password", "must not be empty")

    @property
    def enabled(self) -> bool:
        return self.token is not None or self.user is not None

    def allows(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header value passes (always, when not enabled)."""
        if not self.enabled:
            return True
        if not authorization:
            return False
        scheme, _, value = authorization.partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer":
            return self.token is not None and _same(value, self.token)
        if scheme.lower() != "basic":
            return False
        try:
            user, sep, password = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        if not sep:
            return False
        if self.token is not None and _same(password, self.token):
            return True
        return (
            self.user is not None
            and self.password is not None
            and _same(user, self.user) & _same(password, self.password)
        )


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, auth: Auth) -> None:
    """Refuse to listen beyond this machine without authentication (`InvalidArgument`)."""
    if not is_loopback(host) and not auth.enabled:
        raise InvalidArgument(
            "host",
            f"{host!r} is not a loopback address, and the dashboard shows every job's payload: "
            "set --auth-token (TENURE_DASHBOARD_AUTH_TOKEN) or TENURE_DASHBOARD_USER and "
            "TENURE_DASHBOARD_PASSWORD, or bind 127.0.0.1",
        )


class AuthMiddleware:
    """An ASGI middleware: every HTTP request must pass `Auth.allows`, else 401 with a
    basic-auth challenge (the browser asks for a user and password)."""

    def __init__(self, app: ASGIApp, auth: Auth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.auth.enabled:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"").decode("latin-1")
        if self.auth.allows(given):
            await self.app(scope, receive, send)
            return
        body = b"authentication required: a bearer token or basic auth (see docs/dashboard.md)"
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Basic realm="tenure dashboard", charset="UTF-8"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class SecurityHeaders:
    """An ASGI middleware giving every HTTP response the `SECURITY_HEADERS` it does not set
    itself: the pages set them, and this covers the rest (``/metrics``, static files,
    Starlette's own 404 and 405, the 401 and 421 of the middlewares inside it)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.headers = [(name.encode(), value.encode()) for name, value in SECURITY_HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                present = {name.lower() for name, _ in headers}
                headers += [(n, v) for n, v in self.headers if n not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


# The Host headers a dashboard bound to loopback answers (with any port).
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def host_name(header: str) -> str:
    """The name of a Host header, without its port (``[::1]:8321`` -> ``::1``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


class HostCheck:
    """An ASGI middleware answering only requests whose ``Host`` is one of ``names``
    (421 otherwise). A dashboard on 127.0.0.1 without authentication uses it against DNS
    rebinding: a page of another site whose name resolves to 127.0.0.1 sends its own host
    name, and is turned away."""

    def __init__(self, app: ASGIApp, names: tuple[str, ...]) -> None:
        self.app = app
        self.names = frozenset(name.lower().strip("[]") for name in names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            name = host_name(headers.get(b"host", b"").decode("latin-1"))
            if name not in self.names:
                body = (
                    b"wrong Host: this dashboard answers only "
                    + ", ".join(sorted(self.names)).encode()
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": 421,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def csrf_ok(cookie: str | None, field: str | None) -> bool:
    """The double-submit check: the form's token equals the cookie's (which another site's
    page can neither read nor set; the cookie is SameSite=Strict as well)."""
    return bool(cookie) and bool(field) and _same(str(field), str(cookie))
