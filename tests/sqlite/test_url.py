"""sqlite:// URLs: a malformed one is refused with `InvalidArgument` (``url``) by
`tenure.connect`, `tenure.aio.connect` and `tenure.Worker`, before any file is created."""

from __future__ import annotations

from pathlib import Path

import pytest

import tenure
from tenure.stores.sqlite import parse_sqlite_url
from tests.url_refusals import refused_on_open

# Relative paths: each test runs in its own empty directory, which must stay empty.
BAD_URLS = [
    ("sqlite://[x/a.db", "not a valid URL"),  # a '[' without its ']'
    ("sqlite://x]/a.db", "not a valid URL"),
    ("sqlite:///a%00b.db", "NUL"),
    ("sqlite:///%ED%A0%80.db", "UTF-8"),  # a lone surrogate, as UTF-8 bytes
    ("sqlite:///%FF.db", "UTF-8"),
    ("sqlite:///a\udc80b.db", "lone surrogate"),
    ("sqlite:///a\nb.db", "control characters"),  # urlsplit would drop the newline
    ("sqlite:///a\tb.db", "control characters"),
    ("sqlite:///a\x00b.db", "control characters"),
    ("sqlite:///a.db?timeout=\u00b2", "ASCII digits"),  # '²': isdigit() says True
    ("sqlite:///a.db?timeout=\u0663", "ASCII digits"),  # Arabic-Indic 3: float() takes it
    ("sqlite:///a.db?timeout=1_0", "ASCII digits"),
    ("sqlite:///a.db?timeout=%205", "ASCII digits"),
    ("sqlite:///a.db?timeout=nan", "ASCII digits"),
    ("sqlite:///a.db?timeout=-1", "from 0 to 3600"),
    ("sqlite:///a.db?timeout=1e9", "from 0 to 3600"),
    ("sqlite:///a.db?synchronous=%FF", "UTF-8"),
]
IDS = [url.encode("unicode_escape").decode() for url, _ in BAD_URLS]


@pytest.fixture
def empty_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(("url", "words"), BAD_URLS, ids=IDS)
def test_bad_urls_are_refused_before_a_file_is_created(
    empty_dir: Path, url: str, words: str
) -> None:
    def no_file() -> None:
        assert list(empty_dir.iterdir()) == []

    refused_on_open(url, words, parse_sqlite_url, no_file)


def test_escapes_of_utf8_text_and_ascii_numbers_are_taken(empty_dir: Path) -> None:
    options = parse_sqlite_url("sqlite:///caf%C3%A9%20%231.db?timeout=2.5&timeout=.5e1")
    assert options == {"path": "café #1.db", "busy_timeout": 5.0}
    assert parse_sqlite_url("sqlite:///caf\u00e9.db?timeout=0")["path"] == "café.db"
    tenure.connect("sqlite:///caf%C3%A9.db?timeout=3").close()
    assert (empty_dir / "café.db").exists()
