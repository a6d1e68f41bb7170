"""The chaos control files are written whole or not at all (`write_atomically`), by the
harness (``w1.json``) and by the worker it controls (``w1.hit``) at the same time: neither
write may take the other's temporary file away (CI once failed a run on exactly that)."""

from __future__ import annotations

import threading
from pathlib import Path

from tenure.chaos._control import write_atomically


def test_a_file_and_its_neighbour_written_at_once_both_land(tmp_path: Path) -> None:
    errors: list[BaseException] = []

    def write(name: str) -> None:
        try:
            for n in range(300):
                write_atomically(tmp_path / name, f"{name} {n}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(name,)) for name in ("w1.json", "w1.hit")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert (tmp_path / "w1.json").read_text() == "w1.json 299"
    assert (tmp_path / "w1.hit").read_text() == "w1.hit 299"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["w1.hit", "w1.json"]
