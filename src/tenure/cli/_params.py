"""Parameter types and command classes shared by the CLI's commands.

* `Duration` (`DURATION`): every option that takes a length of time takes ``90``, ``90s``,
  ``15m``, ``12h``, ``7d`` or ``2w`` (a number alone is seconds), never a negative one;
* `NegativeNumbers`: a command class whose numeric arguments may be negative (``tenure
  queues rate reports -1`` reaches the command's own validation instead of click's "No
  such option '-1'").
"""

from __future__ import annotations

import re
from typing import Any

import click

__all__ = ["DURATION", "Duration", "NegativeNumbers"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_DURATION = re.compile(r"\s*(-?)\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhdw]?)\s*", re.IGNORECASE)


def _seconds(text: str) -> float | None:
    """``90``, ``90s``, ``15m``, ``12h``, ``7d`` or ``2w`` (a sign allowed, for the range
    check to refuse) as seconds; None for anything else."""
    found = _DURATION.fullmatch(text)
    if found is None:
        return None
    seconds = float(found.group(2)) * _UNITS[(found.group(3) or "s").lower()]
    return -seconds if found.group(1) else seconds


def _number(seconds: float) -> str:
    return f"{seconds:g}"


class Duration(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2 on
    """A length of time as seconds (a float): ``90``, ``90s``, ``15m``, ``12h``, ``7d``,
    ``2w``; from ``low`` to ``high`` seconds when given (like `click.FloatRange`). A bad
    value is a usage error naming the option (or the environment variable it came from)."""

    name = "duration"

    def __init__(self, low: float | None = None, high: float | None = None) -> None:
        self.low = low
        self.high = high

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds: float | None = float(value)  # a default
        else:
            seconds = _seconds(str(value))
        if seconds is None:
            self.fail(
                f"must be a duration like 90s, 15m, 12h, 7d or 2w (a number alone: seconds), "
                f"got {value!r}",
                param,
                ctx,
            )
        assert seconds is not None
        low = 0.0 if self.low is None else self.low
        if self.high is not None and not low <= seconds <= self.high:
            bounds = f"from {_number(low)} to {_number(self.high)} seconds"
        elif seconds < low:
            bounds = f"at least {_number(low)} seconds" if low else "0 seconds or more"
        else:
            return seconds
        shown = "" if str(value).strip() == _number(seconds) else f" ({_number(seconds)} s)"
        self.fail(f"must be {bounds}, got {value!r}{shown}", param, ctx)

    def __repr__(self) -> str:
        return "DURATION"


DURATION = Duration()  # any length from 0 up; the command or the library sets the bounds

_NEGATIVE = re.compile(r"-(\d|\.\d)")


class NegativeNumbers(click.Command):
    """A command whose numeric arguments may be negative: click reads ``-1`` as an option
    and refuses it ("No such option '-1'"); here such a token is taken as an argument, so
    that the command's own validation answers (its options have no digit names). Any other
    unknown option is still refused as click refuses it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            if not _NEGATIVE.match(exc.option_name) or ctx.ignore_unknown_options:
                raise
        ctx.ignore_unknown_options = True
        return super().parse_args(ctx, given)
