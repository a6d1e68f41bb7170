"""The web dashboard: queues, jobs and each job's lease (owner, generation, time left by
the store's clock), live in a browser, and the store's metrics for Prometheus.

::

    tenure dashboard --store postgresql://...            # http://127.0.0.1:8321

    from tenure.dashboard import create_app               # or mount it in your own app
    app.mount("/tenure", create_app(store))

Needs ``pip install 'tenure[dashboard]'`` (Starlette, Jinja2, uvicorn); ``/metrics`` needs
``tenure[metrics]`` (prometheus_client) too. See docs/dashboard.md.
"""

from __future__ import annotations

try:
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised by tests/dashboard/test_security.py
    raise ImportError(
        f"tenure.dashboard needs {exc.name!r}: pip install 'tenure[dashboard]' "
        "(Starlette, Jinja2 and uvicorn)",
        name=exc.name,
    ) from exc

from ._actions import ACTIONS, Action
from ._app import create_app
from ._metrics import StoreCollector
from ._security import LOOPBACK_NAMES, Auth, check_bind, is_loopback

__all__ = [
    "ACTIONS",
    "LOOPBACK_NAMES",
    "Action",
    "Auth",
    "StoreCollector",
    "check_bind",
    "create_app",
    "is_loopback",
]
