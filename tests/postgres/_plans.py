"""Plans of tenure's statements as its connections run them: a generic plan, EXPLAIN
ANALYZE'd with literal arguments, and a walk over its nodes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tenure.stores.postgres._common import Statement


def literal(value: Any) -> str:
    """A parameter as a SQL literal, for EXECUTE of a prepared statement."""
    if value is None:
        return "NULL"
    if isinstance(value, list):
        if value and isinstance(value[0], float):
            return "ARRAY[" + ",".join(repr(v) for v in value) + "]::float8[]"
        kind = "bigint" if value and isinstance(value[0], int) else "text"
        return "ARRAY[" + ",".join(literal(v) for v in value) + f"]::{kind}[]"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def explain(conn: Any, statement: Statement, params: dict[str, Any]) -> dict[str, Any]:
    """EXPLAIN ANALYZE of the generic plan, in a transaction that is rolled back."""
    text = statement.text.decode()
    args = ", ".join(literal(value) for value in statement.args(params))
    with conn.transaction(force_rollback=True):
        conn.execute(f"PREPARE tenure_plan AS {text}")
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")  # as configure.sql
        rows = conn.execute(
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE tenure_plan({args})"
        ).fetchall()
    conn.execute("DEALLOCATE ALL")
    value = rows[0][0]
    plan: dict[str, Any] = (json.loads(value) if isinstance(value, str) else value)[0]
    return plan


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of ``plan``, its subplans' (CTEs, InitPlans) included."""
    stack = [plan["Plan"]]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.get("Plans", []))


def scans_of_jobs(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The nodes of ``plan`` that read tenure_jobs (not the one that writes it)."""
    return [
        n
        for n in nodes(plan)
        if n.get("Relation Name") == "tenure_jobs" and n["Node Type"] != "ModifyTable"
    ]


def buffers(plan: dict[str, Any]) -> int:
    """The shared buffers ``plan`` touched (hit or read)."""
    top = plan["Plan"]
    return int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
