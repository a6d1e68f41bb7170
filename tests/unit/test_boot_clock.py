"""The optional boot clock of `SystemClock` and `ManualClock` (what SQLite's store time runs
on within one boot of the host), and `boot_clock`, which finds it on any clock."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import tenure
from tenure import _clock
from tenure._clock import boot_clock


class WallOnly:
    """A user's clock with only what the `Clock` protocol asks for."""

    def time(self) -> float:
        return 5.0

    def monotonic(self) -> float:
        return 6.0


@pytest.fixture
def fresh_boot_cache() -> Iterator[None]:
    """`SystemClock` reads the boot id once per process: forget it around a test."""
    _clock._host_boot.cache_clear()
    yield
    _clock._host_boot.cache_clear()


# -- ManualClock ---------------------------------------------------------------------------


def test_manual_boot_clock_starts_at_monotonic_time_and_moves_with_advance() -> None:
    clock = tenure.ManualClock(100.0, monotonic_start=5.0, boot_id="b1")
    assert clock.boot() == ("b1", 5.0)
    clock.advance(2.5)
    assert clock.boot() == ("b1", 7.5)
    assert (clock.time(), clock.monotonic()) == (102.5, 7.5)


def test_manual_boot_clock_ignores_wall_steps() -> None:
    clock = tenure.ManualClock(100.0, monotonic_start=5.0, boot_id="b1")
    clock.jump(7200)
    clock.jump(-14_400)
    assert clock.boot() == ("b1", 5.0)
    assert clock.time() == 100.0 - 7200


def test_manual_suspend_moves_wall_and_boot_clock_but_not_monotonic_time() -> None:
    clock = tenure.ManualClock(100.0, monotonic_start=5.0, boot_id="b1")
    clock.suspend(60)
    assert (clock.time(), clock.monotonic(), clock.boot()) == (160.0, 5.0, ("b1", 65.0))
    with pytest.raises(ValueError, match=">= 0"):
        clock.suspend(-1)


def test_manual_reboot_is_a_new_boot_with_clocks_from_zero() -> None:
    clock = tenure.ManualClock(100.0, monotonic_start=5.0, boot_id="b1")
    clock.advance(10)
    clock.reboot(boot_id="b2")
    assert (clock.time(), clock.monotonic(), clock.boot()) == (110.0, 0.0, ("b2", 0.0))
    clock.reboot()
    boot_id, seconds = clock.boot()
    assert boot_id not in ("b1", "b2")
    assert seconds == 0.0


def test_each_manual_clock_is_its_own_boot_unless_told() -> None:
    assert tenure.ManualClock().boot()[0] != tenure.ManualClock().boot()[0]
    assert tenure.ManualClock(boot_id="x").boot()[0] == "x"


# -- boot_clock: optional, not part of the Clock protocol ----------------------------------


def test_a_clock_without_boot_still_satisfies_the_protocol() -> None:
    assert isinstance(WallOnly(), tenure.Clock)
    assert boot_clock(WallOnly()) is None


def test_boot_clock_finds_the_method() -> None:
    clock = tenure.ManualClock(boot_id="b1")
    found = boot_clock(clock)
    assert found is not None
    assert found() == ("b1", 1000.0)
    assert boot_clock(tenure.SystemClock()) is not None


# -- SystemClock -----------------------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the boot clock is Linux's")
def test_system_boot_clock_is_clock_boottime_with_the_kernels_boot_id() -> None:
    reading = tenure.SystemClock().boot()
    assert reading is not None
    boot_id, seconds = reading
    assert boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    # (No time namespace shifts this test's boot clock: /proc/self/timens_offsets is 0.)
    assert abs(seconds - time.clock_gettime(time.CLOCK_BOOTTIME)) < 1.0
    later = tenure.SystemClock().boot()
    assert later is not None
    assert later[0] == boot_id
    assert later[1] >= seconds


def test_system_clock_without_a_boot_id_has_no_boot_clock(
    fresh_boot_cache: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_clock, "_BOOT_ID", str(tmp_path / "missing"))
    assert tenure.SystemClock().boot() is None


def test_system_clock_without_clock_boottime_has_no_boot_clock(
    fresh_boot_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(time, "CLOCK_BOOTTIME", raising=False)
    assert tenure.SystemClock().boot() is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the boot clock is Linux's")
def test_system_boot_clock_takes_off_a_time_namespace_shift(
    fresh_boot_cache: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    offsets = tmp_path / "timens_offsets"
    offsets.write_text("monotonic           0         0\nboottime         7200 500000000\n")
    monkeypatch.setattr(_clock, "_TIME_NAMESPACE", str(offsets))
    reading = tenure.SystemClock().boot()
    assert reading is not None
    assert abs(reading[1] - (time.clock_gettime(time.CLOCK_BOOTTIME) - 7200.5)) < 1.0
