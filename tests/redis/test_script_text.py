"""Each Redis script carries the definitions of ``_lib.lua`` it uses and no other
(``stores/redis/_lua.py``): what it uses, directly or through other definitions, is kept in
the library's order; the rest, never called, is left out, for Redis runs a script's whole
text at each call."""

from __future__ import annotations

import re

from tenure._resources import load_text
from tenure.stores.redis._common import SCRIPTS
from tenure.stores.redis._lua import script_text

LIBRARY = """\
-- the library's header
if redis.replicate_commands then
  redis.replicate_commands()
end

local LIMIT = 5
local function a(x)
  return x + LIMIT
end

-- b calls a
local function b(x)
  return a(x) * 2
end

local function c()
  return 'c'
end
local seen, cache = {}, nil
local function d()
  return 'names c in a string: c'
end
"""


def test_what_an_operation_uses_is_kept_in_order_and_the_rest_left_out() -> None:
    text = script_text(LIBRARY, "return b(1)\n")
    assert "local function b" in text
    assert "local function a" in text
    assert "local LIMIT = 5" in text
    assert "redis.replicate_commands()" in text  # defines nothing: always kept
    assert "local function c" not in text
    assert "local function d" not in text
    assert "local seen, cache" not in text
    assert (
        text.index("local LIMIT") < text.index("local function a") < text.index("local function b")
    )
    assert text.endswith("return b(1)\n")


def test_a_name_anywhere_but_a_whole_line_comment_keeps_its_definition() -> None:
    # The cut reads words, not Lua: a name in a string keeps too much, never too little.
    kept = script_text(LIBRARY, "return d()\n")
    assert "local function d" in kept
    assert "local function c" in kept
    assert "local function c" not in script_text(LIBRARY, "-- c\nreturn 1\n")
    assert "local seen, cache" in script_text(LIBRARY, "cache = seen\n")


def _defined(text: str) -> set[str]:
    return set(re.findall(r"^local function (\w+)", text, re.MULTILINE))


def _called(text: str) -> set[str]:
    code = "".join(
        line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("--")
    )
    return set(re.findall(r"[A-Za-z_]\w*", code))


def test_every_script_defines_each_library_function_it_names() -> None:
    library = load_text("tenure.stores.redis", "lua/_lib.lua")
    functions = _defined(library)
    for name, script in SCRIPTS.items():
        missing = (_called(script.text) & functions) - _defined(script.text)
        assert not missing, f"{name}.lua names {sorted(missing)} without their definitions"
        operation = load_text("tenure.stores.redis", f"lua/{name}.lua")
        assert script.text.endswith(operation)
    # And the cut is real: the smallest operations carry a fraction of the library.
    assert len(SCRIPTS["now"].text) < len(library) / 4
