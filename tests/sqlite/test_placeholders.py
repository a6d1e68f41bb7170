"""The SQLite store's statements take plain ``?`` or ``:name`` placeholders, never numbered
``?NNN`` ones: Python 3.12's sqlite3 counts those as named and warns when they are bound
from a tuple, and Python 3.14 refuses them (a ProgrammingError on every such submit). On
3.12 and later the suite's filter turns that warning into a failure too (pyproject.toml);
this check holds on every version."""

from __future__ import annotations

import re
from importlib import resources

NUMBERED = re.compile(r"\?\d")


def test_no_statement_uses_numbered_placeholders() -> None:
    sql = resources.files("tenure.stores.sqlite") / "sql"
    numbered = {
        path.name: NUMBERED.findall(path.read_text())
        for path in sql.iterdir()
        if path.name.endswith(".sql")
    }
    assert len(numbered) > 10  # the statements were found
    assert {name: found for name, found in numbered.items() if found} == {}
