"""docs/tutorial.md, run as a reader would: its ``sh`` and ``python`` blocks in order, in a
scratch folder, each ``text`` block right after one being the output that block must print.

* ``sh`` blocks run in bash (``set -e``) with the environment and the working directory the
  previous block left (``export`` and ``cd`` carry over, as in one terminal);
* a ``python`` block whose first line is ``# NAME.py`` is written to that file; any other
  runs as a script;
* a ``text`` block is compared with what the block before it printed (stdout and stderr):
  runs of spaces count as one, ``…`` stands for any text within a line and a line of ``…``
  alone for any number of lines;
* ``<!-- not run: why -->`` on the line before a block skips it (installing, for example).

The PostgreSQL section uses a database of its own: the tutorial's name for it is replaced by
a unique one, dropped afterwards; without a reachable server that part is `unavailable`.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.backends import POSTGRES_URL, unavailable

TUTORIAL = Path(__file__).resolve().parent.parent / "docs" / "tutorial.md"
DATABASE = "tenure_tutorial"  # the tutorial's database, replaced by a unique name here

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
_NOT_RUN = re.compile(r"<!--\s*not run:[^>]*-->\s*$")


@dataclass
class Block:
    language: str
    text: str
    line: int
    skipped: bool
    expected: str | None = None  # the text block that follows it, if any


def blocks(markdown: str) -> list[Block]:
    """The code blocks of ``markdown`` with the output each must print."""
    found: list[Block] = []
    previous_end = 0
    for match in _FENCE.finditer(markdown):
        language, text = match.group(1), match.group(2)
        before = markdown[previous_end : match.start()]
        line = markdown.count("\n", 0, match.start()) + 1
        if language == "text" and found and not before.strip() and not found[-1].skipped:
            found[-1].expected = text
        else:
            found.append(Block(language, text, line, bool(_NOT_RUN.search(before.rstrip()))))
        previous_end = match.end()
    return found


def _normal(line: str) -> str:
    return " ".join(line.split())


def output_matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is what ``expected`` shows (see the module docstring)."""
    pattern = ""
    for line in expected.splitlines():
        line = _normal(line)
        if line == "…":
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pattern += "[^\n]*?".join(re.escape(part) for part in line.split("…")) + r"\n"
    text = "".join(_normal(line) + "\n" for line in actual.splitlines())
    return re.fullmatch(pattern, text) is not None


class Reader:
    """Runs blocks the way a person with one terminal would."""

    def __init__(self, folder: Path, replacements: dict[str, str]) -> None:
        self.cwd = folder
        self.replacements = replacements
        self.state = folder.parent / "shell-state.sh"  # export -p of the last block
        self.where = folder.parent / "shell-cwd"  # its working directory
        env = {k: v for k, v in os.environ.items() if not k.startswith("TENURE_")}
        # The tenure script of the environment running the tests, first on PATH.
        env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
        self.env = env
        self.state.write_text("", encoding="utf-8")

    def _replace(self, text: str) -> str:
        for old, new in self.replacements.items():
            text = text.replace(old, new)
        return text

    def run(self, block: Block) -> str:
        text = self._replace(block.text)
        if block.language == "sh":
            return self._shell(text)
        first = text.splitlines()[0] if text.strip() else ""
        if re.fullmatch(r"#\s*[\w./-]+\.py\s*", first):
            (self.cwd / first.lstrip("# ").strip()).write_text(text, encoding="utf-8")
            return ""
        script = self.state.with_name(f"block-{block.line}.py")
        script.write_text(text, encoding="utf-8")
        return self._process([sys.executable, str(script)], block)

    def _shell(self, text: str) -> str:
        # Load what earlier blocks left, run this one, then save the environment and the
        # working directory for the next.
        state, where = shlex.quote(str(self.state)), shlex.quote(str(self.where))
        program = f"set -e\n. {state}\n{text}\nexport -p > {state}; pwd > {where}\n"
        output = self._process(["bash", "-c", program], None)
        self.cwd = Path(self.where.read_text(encoding="utf-8").strip())
        return output

    def _process(self, argv: list[str], block: Block | None) -> str:
        if block is not None:  # a Python script: the cwd and environment the shell left
            argv = ["bash", "-c", f". {shlex.quote(str(self.state))} && exec {shlex.join(argv)}"]
        done = subprocess.run(
            argv,
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=180,
        )
        output = self._restore(done.stdout)
        assert done.returncode == 0, f"exit status {done.returncode}:\n{output}"
        return output

    def _restore(self, text: str) -> str:
        """Output with the unique names put back to the tutorial's, to compare."""
        for old, new in self.replacements.items():
            text = text.replace(new, old)
        return text


def _needs_postgres(block: Block) -> bool:
    return block.language == "sh" and DATABASE in block.text


@pytest.fixture
def database() -> Iterator[str]:
    """A unique database name for the PostgreSQL section, dropped afterwards."""
    name = f"{DATABASE}_{uuid.uuid4().hex[:10]}"
    yield name
    try:
        import psycopg
    except ImportError:
        return
    try:
        with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except psycopg.OperationalError:
        pass


def _postgres_reachable() -> str | None:
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed: pip install -e '.[postgres]'"
    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        return f"PostgreSQL is not reachable at {POSTGRES_URL} ({exc})"
    return None


@pytest.mark.slow
def test_the_tutorial_runs_as_written(tmp_path: Path, database: str) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    reader = Reader(scratch, {DATABASE: database})
    found = blocks(TUTORIAL.read_text(encoding="utf-8"))
    assert [b for b in found if not b.skipped], "no runnable block found"
    for block in found:
        if block.skipped or block.language not in ("sh", "python"):
            continue
        if _needs_postgres(block):
            why = _postgres_reachable()
            if why is not None:
                unavailable(f"the tutorial's PostgreSQL section: {why}")
        output = reader.run(block)
        if block.expected is not None:
            assert output_matches(block.expected, output), (
                f"docs/tutorial.md line {block.line}: the output differs from the tutorial's."
                f"\n--- the tutorial shows:\n{block.expected}--- the program printed:\n{output}"
            )


def test_the_runner_reads_blocks_and_compares_output() -> None:
    markdown = (
        "<!-- not run: slow -->\n```sh\npip install .\n```\n\n"
        "```sh\necho hi\n```\n\n```text\nhi\n```\n\nprose\n\n```text\nnot an output\n```\n"
    )
    first, second, third = blocks(markdown)
    assert (first.skipped, second.skipped) == (True, False)
    assert second.expected == "hi\n"
    assert third.language == "text"
    assert output_matches("a  b\n…\nlast …\n", "a b\nx\ny\nlast line\n")
    assert output_matches("…started on X: …\n", "12:00 INFO worker started on X: q  f=1\n")
    assert not output_matches("hi\n", "hi\nmore\n")
    assert not output_matches("a …\n", "b c\n")
