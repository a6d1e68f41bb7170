"""What the CLI tests read from a command's result."""

from __future__ import annotations

import json
from typing import Any

from click.testing import Result


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result


def as_json(result: Result) -> Any:
    return json.loads(ok(result).stdout)


def listed(result: Result) -> list[dict[str, Any]]:
    """The jobs of a ``jobs list --json``."""
    found: list[dict[str, Any]] = as_json(result)["jobs"]
    return found
