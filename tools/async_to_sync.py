"""Generate the sync twin of each async source file (psycopg's approach, by text rules).

Usage: ``python tools/async_to_sync.py`` rewrites the generated files;
``python tools/async_to_sync.py --check`` exits 1 if any is out of date, or if a generated
file has lost its source (CI runs this).

One naming rule, for files and names alike: **the sync twin drops "async"**.

* A source file ``<name>_async.py`` generates ``<name>.py`` beside it; every such file under
  ``src/tenure`` is a source (there is no list to keep).
* ``Async<Name>`` becomes ``<Name>`` (``AsyncStore`` -> ``Store``, ``AsyncDriver`` ->
  ``Driver``, psycopg's ``AsyncConnection`` -> ``Connection``), and ``<name>_async`` becomes
  ``<name>`` (modules, and functions such as ``open_driver_async`` -> ``open_driver``).
* The few primitives whose sync and async forms differ live in ``tenure/_concurrency.py``
  under the same rule (``pause_async`` / ``pause``).
* Then the keywords: ``async def``/``with``/``for``, ``await``, ``__aenter__``/``__aexit__``,
  ``aclose``, ``asynccontextmanager``, ``Awaitable[T]``, and the async homes of the client
  libraries (``redis.asyncio``) and of tenure (``tenure.aio``).

Async source is written so that the rules apply (e.g. ``await pause_async(s)`` rather than
``await anyio.sleep(s)``).
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "tenure"
SUFFIX = "_async.py"
NOTICE = "by tools/async_to_sync.py: do not edit."


def pairs() -> list[tuple[str, str]]:
    """Each (async source, generated sync file), relative to ``src/tenure``."""
    found = []
    for source in sorted(PACKAGE.rglob(f"*{SUFFIX}")):
        target = source.with_name(source.name.removesuffix(SUFFIX) + ".py")
        found.append((str(source.relative_to(PACKAGE)), str(target.relative_to(PACKAGE))))
    return found


RULES: list[tuple[str, str]] = [
    # the naming rule
    (r"\bAsync([A-Z]\w*)", r"\1"),
    (r"\b(\w+?)_async\b", r"\1"),
    # the keywords
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bawait ", ""),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\baclose\b", "close"),
    (r"\basynccontextmanager\b", "contextmanager"),
    (r"\bAwaitable\[(\w+)\]", r"\1"),
    (r"\bAwaitable, ", ""),
    # the async homes of the libraries
    (r"\bredis\.asyncio\b", "redis"),
    (r"\btenure\.aio\.", "tenure."),
]


def header(source: str) -> str:
    return (
        f'"""Generated {NOTICE}\n\n'
        f"Source: tenure/{source}.\nEdit it and run ``python tools/async_to_sync.py``.\n"
        '"""\n'
    )


def convert(source: str, text: str) -> str:
    # Replace the module docstring with the generated-file notice.
    match = re.match(r'\s*""".*?"""\n', text, re.DOTALL)
    body = text[match.end() :] if match else text
    for pattern, replacement in RULES:
        body = re.sub(pattern, replacement, body)
    return _format(header(source) + body, source)


def _format(text: str, source: str) -> str:
    # Renamed imports may sort differently (AsyncX -> X), and removing "async"/"await"
    # shortens lines: let ruff sort and format them as it would any file.
    for command in (["check", "--select", "I", "--fix", "--quiet"], ["format"]):
        text = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", source, "-"],
            input=text,
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
        ).stdout
    return text


def orphans() -> list[str]:
    """Generated files whose source is gone (renamed or deleted)."""
    made = {target for _, target in pairs()}
    return [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if NOTICE in path.read_text()[:300] and str(path.relative_to(PACKAGE)) not in made
    ]


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for source, target in pairs():
        dst_path = PACKAGE / target
        expected = convert(source, (PACKAGE / source).read_text())
        current = dst_path.read_text() if dst_path.exists() else ""
        if current == expected:
            continue
        stale.append(target)
        if check:
            sys.stdout.writelines(
                difflib.unified_diff(
                    current.splitlines(True),
                    expected.splitlines(True),
                    target,
                    f"{target} (expected)",
                )
            )
        else:
            dst_path.write_text(expected)
            print(f"wrote {dst_path.relative_to(ROOT)}")
    lost = orphans()
    if lost:
        print(f"generated files without a source (delete them): {', '.join(lost)}")
    if check and stale:
        print(f"out of date: {', '.join(stale)}; run python tools/async_to_sync.py")
    return 1 if (check and stale) or lost else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
