"""The text of each Redis script: the operation's own file after the definitions of
``lua/_lib.lua`` that it uses.

Redis runs a script's whole text at every ``EVALSHA``, so each definition of the shared
library is made again at each run: about 5 µs of server time for all of ``_lib.lua``, as
much as the work of a small operation (``now.lua``: 11.6 µs with all of it, 7.4 µs with what
it uses; ``benchmarks/redis_server_time.py`` measures the server's time per job). So an
operation's script carries only the top-level definitions it refers to, directly or through
other definitions.

Which those are is read from names, not parsed: ``_lib.lua`` is cut at its top-level
statements (a line that starts with ``local`` or ``if`` at the first column; the house Lua
style indents everything inside a block), each statement defines the names after its
``local`` (a ``function`` or the variables it declares), and a statement is kept when any
name it defines appears as a word in the operation or in a statement already kept. A word
is any identifier outside whole-line comments, so a name in a string or a trailing comment
keeps a definition it did not need: the cut can keep too much, never too little. A
statement that defines nothing (``if redis.replicate_commands ...``) is always kept. The
order of the library is kept, so every definition still comes before its uses.
"""

from __future__ import annotations

import re

__all__ = ["script_text"]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFINES = re.compile(r"local\s+(?:function\s+([A-Za-z_]\w*)|([A-Za-z_][\w\s,]*?)\s*(?:=|$))")


def script_text(library: str, operation: str) -> str:
    """The script of ``operation``: the statements of ``library`` it uses, then itself."""
    statements = _top_level(library)
    wanted = _words(operation)
    kept = [not names for names, _, _ in statements]
    for index, keep in enumerate(kept):
        if keep:
            wanted |= statements[index][1]
    grew = True
    while grew:  # to a fixed point: a kept statement's words may want earlier ones
        grew = False
        for index, (names, words, _) in enumerate(statements):
            if not kept[index] and names & wanted:
                kept[index] = True
                wanted |= words
                grew = True
    return (
        "".join(text for keep, (_, _, text) in zip(kept, statements, strict=True) if keep)
        + operation
    )


def _top_level(library: str) -> list[tuple[set[str], set[str], str]]:
    """``library`` cut at its top-level statements: (names defined, words used, text)."""
    pieces: list[list[str]] = [[]]
    for line in library.splitlines(keepends=True):
        if line.startswith(("local ", "if ")):
            pieces.append([])
        pieces[-1].append(line)
    statements = []
    for lines in pieces:
        text = "".join(lines)
        first = next((line for line in lines if line.startswith(("local ", "if "))), "")
        found = _DEFINES.match(first)
        names: set[str] = set()
        if found:
            names = {found[1]} if found[1] else {n.strip() for n in found[2].split(",")}
        statements.append((names, _words(text) - names, text))
    return statements


def _words(text: str) -> set[str]:
    """The identifiers of ``text``, whole-line comments left out."""
    code = "".join(
        line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("--")
    )
    return set(_WORD.findall(code))
