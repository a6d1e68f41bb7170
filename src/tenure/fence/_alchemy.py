"""SQLAlchemy sessions and connections as fence targets (imported only when one is used).

SQLAlchemy is optional: nothing here is imported unless a ``Session`` or ``Connection`` is
passed to `advance_fence` / `record_effect`. The statements run through ``text()`` in the
session's current transaction (SQLAlchemy begins one on first use), with named parameters.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgument
from ._sql import DIALECTS, QUERIES, Executor, fence_statement

__all__ = ["alchemy_executor"]


class _AlchemyExecutor(Executor):
    def run(self, name: str, params: tuple[Any, ...] = ()) -> tuple[int, Any]:
        from sqlalchemy import text

        statement = text(fence_statement(self.dialect, name, "named"))
        result = self.cur.execute(statement, {f"p{n}": value for n, value in enumerate(params)})
        row = result.fetchone() if name in QUERIES else None
        count = int(getattr(result, "rowcount", -1))
        result.close()
        return count, row

    def close(self) -> None:
        pass  # the session's connection is the caller's


def alchemy_executor(target: Any, dialect: str | None) -> Executor:
    """An executor over a SQLAlchemy ``Session`` (or ``scoped_session``) or ``Connection``."""
    if dialect is None:
        bind = target.get_bind() if hasattr(target, "get_bind") else target
        found = getattr(getattr(bind, "dialect", None), "name", None)
        if found not in DIALECTS:
            raise InvalidArgument(
                "conn",
                f"a SQLAlchemy {type(target).__name__} on the {found!r} dialect; the fence "
                f"speaks {', '.join(DIALECTS)}",
            )
        dialect = str(found)
    elif dialect not in DIALECTS:
        raise InvalidArgument("dialect", f"must be one of {', '.join(DIALECTS)}, got {dialect!r}")
    if not callable(getattr(target, "execute", None)):
        raise InvalidArgument("conn", f"a {type(target).__name__} cannot execute statements")
    return _AlchemyExecutor(target, dialect, "named")
