"""Generate the sync twin of each async source file (psycopg's approach, by text rules).

Usage: ``python tools/async_to_sync.py`` rewrites the generated files;
``python tools/async_to_sync.py --check`` exits 1 if any is out of date (CI runs this).

The rules are deliberately few and mechanical; async source is written so that they apply
(e.g. ``await pause(s)`` rather than ``await anyio.sleep(s)``).
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "tenure"

# (async source, generated sync file)
FILES = [
    ("aio/_store.py", "_store.py"),
    ("stores/_async_driver.py", "stores/_sync_driver.py"),
    ("stores/postgres/_async.py", "stores/postgres/_sync.py"),
    ("stores/redis/_aio.py", "stores/redis/_sync.py"),
    ("chaos/_drivers.py", "chaos/_drivers_sync.py"),
]

RULES: list[tuple[str, str]] = [
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bawait ", ""),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\baclose\b", "close"),
    (r"\bAsyncStore\b", "Store"),
    (r"\bAsyncDriver\b", "SyncDriver"),
    (r"\bAsyncPostgresDriver\b", "PostgresDriver"),
    (r"\b_async_driver\b", "_sync_driver"),
    (r"\bAsyncConnectionPool\b", "ConnectionPool"),
    (r"\bAsyncConnection\b", "Connection"),
    (r"\bAsyncCursor\b", "Cursor"),
    (r"\bAsyncRawCursor\b", "RawCursor"),
    (r"\bpause\b", "pause_sync"),
    (r"\bAwaitable\[(\w+)\]", r"\1"),
    (r"\bAwaitable, ", ""),
    (r"\bredis\.asyncio\b", "redis"),
    (r"\btenure\.aio\.connect\b", "tenure.connect"),
    # Redis driver
    (r"\bAsyncRedisDriver\b", "RedisDriver"),
    (r"\buncancellable\b", "uncancellable_sync"),
    (r"\blooks_closed\b", "looks_closed_sync"),
    # chaos drivers
    (r"\bAsyncPassThroughDriver\b", "PassThroughDriver"),
    (r"\bAsyncRecordingDriver\b", "RecordingDriver"),
    (r"\bAsyncUnsafeDriver\b", "UnsafeDriver"),
]
# Applied when the generated file sits one package level above its source (aio/x.py -> x.py).
RELOCATE = (r"from \.\.", "from .")


def header(source: str) -> str:
    return (
        f'"""Generated from tenure/{source} by tools/async_to_sync.py: do not edit.\n\n'
        "Edit the async source and run ``python tools/async_to_sync.py``.\n"
        '"""\n'
    )


def convert(source: str, text: str, relocate: bool) -> str:
    # Replace the module docstring with the generated-file notice.
    match = re.match(r'\s*""".*?"""\n', text, re.DOTALL)
    body = text[match.end() :] if match else text
    for pattern, replacement in [*RULES, RELOCATE] if relocate else RULES:
        body = re.sub(pattern, replacement, body)
    return _format(header(source) + body, source)


def _format(text: str, source: str) -> str:
    # Removing "async"/"await" shortens lines; let the formatter join them as it would.
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", source, "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return done.stdout


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for source, target in FILES:
        src_path, dst_path = PACKAGE / source, PACKAGE / target
        relocate = src_path.parent != dst_path.parent
        expected = convert(source, src_path.read_text(), relocate)
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
    if check and stale:
        print(f"out of date: {', '.join(stale)}; run python tools/async_to_sync.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
