"""The argument rules of docs/design.md §6 (pure).

Every public entry point calls these before touching a store, so bad input raises
`InvalidArgument` naming the argument and the rule, and the store is left unchanged.
"""

from __future__ import annotations

import json
import json.encoder
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any

from .errors import InvalidArgument

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_PAYLOAD_LIMIT",
    "DEFAULT_QUEUES",
    "FINISHED_STATES",
    "MAX_ATTEMPTS",
    "MAX_BATCH",
    "MAX_GENERATION",
    "MAX_HEADERS",
    "MAX_HEADERS_SIZE",
    "MAX_QUEUE_LIMIT",
    "MAX_ID_LENGTH",
    "MAX_PRIORITY",
    "MAX_TTL",
    "MIN_PRIORITY",
    "MAX_UNIQUE_FOR",
    "MIN_TTL",
    "PURGE_BATCH",
    "SECRET_LENGTH",
    "SECRET_TEXT",
    "decode_json",
    "encode_headers",
    "encode_json",
    "error_text",
    "validate_age",
    "validate_attempts",
    "validate_cursor",
    "validate_delay",
    "validate_finished_states",
    "validate_flag",
    "validate_generation",
    "validate_headers",
    "validate_id",
    "validate_job_timeout",
    "validate_limit",
    "validate_payload_limit",
    "validate_queue_limit",
    "validate_queue_rate",
    "validate_priority",
    "validate_queues",
    "validate_positive_seconds",
    "validate_real",
    "validate_reason",
    "validate_secret",
    "validate_timeout",
    "validate_ttl",
    "validate_unique",
    "validate_wait_timeout",
]

MAX_ID_LENGTH = 255
MIN_TTL = 0.01
MAX_TTL = 7 * 24 * 3600.0
MAX_DELAY = 366 * 24 * 3600.0
MAX_ATTEMPTS = 1_000_000
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_PAYLOAD_LIMIT = 1024 * 1024
# Above this a single row/hash field gets unwieldy for every store (PostgreSQL's jsonb, Redis).
MAX_PAYLOAD_LIMIT = 64 * 1024 * 1024
# The default of every ``queues`` argument; `validate_queues` knows it is valid.
DEFAULT_QUEUES = ("default",)
MAX_ERROR_LENGTH = 16_384
MAX_QUEUES = 64
MAX_BATCH = 1000
# Signed 64-bit: what PostgreSQL BIGINT, SQLite INTEGER and Redis HINCRBY all hold exactly.
MAX_GENERATION = 2**63 - 1
# The largest fleet-wide queue limit (set_queue_limit): more leases than any fleet holds.
MAX_QUEUE_LIMIT = 1_000_000
# The largest fleet-wide queue rate (set_queue_rate), in jobs a second, and bucket size.
MAX_QUEUE_RATE = 1_000_000
# The slowest rate, about a job in 11.6 days: slower is no rate anyone means, and every
# store must refuse the same values (Redis's script had a floor of its own, 1e-300).
MIN_QUEUE_RATE = 1e-6
_MAX_DEPTH = 64


def validate_id(argument: str, value: object) -> str:
    """Ids (job ids, owners, queues): 1-255 characters of text, no control characters."""
    if not isinstance(value, str):
        raise InvalidArgument(argument, f"must be a str, not {type(value).__name__}")
    if not value:
        raise InvalidArgument(argument, "must not be empty (1-255 characters)")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidArgument(
            argument, f"must be at most {MAX_ID_LENGTH} characters, got {len(value)}"
        )
    if not value.isprintable() or not value.isascii():
        # isprintable() is False for spaces other than ' ' too: allow those, refuse Cc/Cs/Cn.
        # Unassigned code points (Cn) are refused because ids travel to three stores and into
        # HTTP headers: a code point a later Unicode version assigns may be normalised or
        # rejected differently by a peer that knows it.
        for position, char in enumerate(value):
            category = unicodedata.category(char)
            if category == "Cc":
                raise InvalidArgument(
                    argument, f"must not contain control characters ({char!r} at {position})"
                )
            if category == "Cs":
                raise InvalidArgument(
                    argument, f"must be valid Unicode text (lone surrogate at {position})"
                )
            if category == "Cn":
                raise InvalidArgument(
                    argument,
                    f"must not contain unassigned code points (U+{ord(char):04X} at {position})",
                )
    return value


# What `tenure._protocol.new_secret` draws: 24 bytes from the OS CSPRNG, as lowercase hex.
SECRET_LENGTH = 48
SECRET_TEXT = re.compile(f"[0-9a-f]{{{SECRET_LENGTH}}}")


def validate_secret(argument: str, value: object) -> str:
    """A lease secret: the 48 lowercase hex digits a claim drew (never any other text)."""
    if not isinstance(value, str):
        raise InvalidArgument(argument, f"must be a str, not {type(value).__name__}")
    if SECRET_TEXT.fullmatch(value) is None:
        raise InvalidArgument(
            argument,
            f"must be the {SECRET_LENGTH} lowercase hex digits the claim drew "
            f"(got {len(value)} characters); pass the Lease the store returned",
        )
    return value


def validate_real(argument: str, value: object) -> float:
    """A finite real number (a time on some clock): int or float, not bool, NaN or inf."""
    return _finite(argument, value, "a number", "finite number")


def validate_positive_seconds(argument: str, value: object) -> float:
    """A finite number of seconds above 0 (how long to wait for something)."""
    seconds = validate_real(argument, value)
    if not seconds > 0:
        raise InvalidArgument(argument, f"must be a positive number of seconds, got {value!r}")
    return seconds


def _seconds(argument: str, value: object) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds()
    return _finite(
        argument, value, "a number of seconds or a timedelta", "finite number of seconds"
    )


def _finite(argument: str, value: object, kind: str, finite: str) -> float:
    """``value`` as a float: an int or float (not bool) that is neither NaN nor infinite;
    ``kind`` and ``finite`` name what is wanted in the messages."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(argument, f"must be {kind}, not {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:  # an int beyond float range: as out of range as infinity
        bits = int(value).bit_length()
        raise InvalidArgument(argument, f"must be a {finite}, got an int of {bits} bits") from None
    if not math.isfinite(number):
        raise InvalidArgument(argument, f"must be a {finite}, got {value!r}")
    return number


def validate_ttl(value: object, argument: str = "ttl") -> float:
    if type(value) is float and MIN_TTL <= value <= MAX_TTL:
        return value  # the common case, without the calls below (a NaN fails the test)
    seconds = _seconds(argument, value)
    if not MIN_TTL <= seconds <= MAX_TTL:
        raise InvalidArgument(
            argument, f"must be from {MIN_TTL} seconds to 7 days ({MAX_TTL:.0f} s), got {value!r}"
        )
    return seconds


def validate_delay(value: object, argument: str = "delay") -> float:
    seconds = _seconds(argument, value)
    if not 0.0 <= seconds <= MAX_DELAY:
        raise InvalidArgument(argument, f"must be from 0 seconds to 366 days, got {value!r}")
    return seconds


def validate_timeout(value: object, argument: str = "timeout") -> float:
    """A handler's per-attempt timeout (the worker's ``timeout=``): seconds or a timedelta,
    from 0.01 s (as the shortest ttl) to 366 days (as the longest delay)."""
    seconds = _seconds(argument, value)
    if not MIN_TTL <= seconds <= MAX_DELAY:
        raise InvalidArgument(
            argument,
            f"must be from {MIN_TTL} seconds to 366 days, or None for no timeout; got {value!r}",
        )
    return seconds


def validate_attempts(value: object, argument: str = "max_attempts") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(argument, f"must be an int, not {type(value).__name__}")
    if not 1 <= value <= MAX_ATTEMPTS:
        raise InvalidArgument(argument, f"must be from 1 to {MAX_ATTEMPTS}, got {value}")
    return value


# Job priorities (issue #18): a 32-bit signed integer, what every store keeps exactly (a
# PostgreSQL integer column, SQLite's integer, a Lua number in Redis). Higher runs first.
MIN_PRIORITY = -(2**31)
MAX_PRIORITY = 2**31 - 1


def validate_priority(value: object, argument: str = "priority") -> int:
    """A job's priority: an int (not a bool) from -2**31 to 2**31-1; claims take the highest
    first."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(argument, f"must be an int, not {type(value).__name__}")
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise InvalidArgument(
            argument,
            f"must be from -2**31 to 2**31-1 ({MIN_PRIORITY} to {MAX_PRIORITY}), got {value}",
        )
    return value


def validate_job_timeout(value: object, argument: str = "timeout") -> float | None:
    """A job's own per-attempt timeout: None (the handler's applies), or seconds / a
    timedelta as for a handler's `validate_timeout`."""
    return None if value is None else validate_timeout(value, argument)


def validate_payload_limit(value: object, argument: str = "payload_limit") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(
            argument, f"must be an int number of bytes, not {type(value).__name__}"
        )
    if not 1 <= value <= MAX_PAYLOAD_LIMIT:
        raise InvalidArgument(argument, f"must be from 1 to {MAX_PAYLOAD_LIMIT} bytes, got {value}")
    return value


def validate_limit(value: object, argument: str = "limit") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(argument, f"must be an int, not {type(value).__name__}")
    if not 1 <= value <= MAX_BATCH:
        raise InvalidArgument(argument, f"must be from 1 to {MAX_BATCH}, got {value}")
    return value


def validate_wait_timeout(value: object, argument: str = "timeout") -> float:
    """How long `Store.wait` waits: 0 seconds (look once) to 366 days."""
    return validate_delay(value, argument)


_CURSOR = re.compile(r"[0-9]{1,19}")


def validate_cursor(value: object, argument: str = "cursor") -> int | None:
    """A listing cursor: None (the first page) or a page's ``next_cursor``, unchanged."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgument(
            argument, f"must be a str (a page's next_cursor), not {type(value).__name__}"
        )
    if _CURSOR.fullmatch(value) is None or int(value) > MAX_GENERATION:
        raise InvalidArgument(argument, f"must be a page's next_cursor, unchanged; got {value!r}")
    return int(value)


def validate_generation(argument: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(argument, f"must be an int, not {type(value).__name__}")
    if not 1 <= value <= MAX_GENERATION:
        raise InvalidArgument(argument, f"must be from 1 to 2**63-1, got {value}")
    return value


def validate_queues(value: object, argument: str = "queues") -> tuple[str, ...]:
    if value is DEFAULT_QUEUES:  # the default argument: nothing to check (claim hot path)
        return DEFAULT_QUEUES
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidArgument(
            argument, "must be a tuple or list of queue names (a bare string is not accepted)"
        )
    queues = tuple(value)
    if not 1 <= len(queues) <= MAX_QUEUES:
        raise InvalidArgument(argument, f"must name 1 to {MAX_QUEUES} queues, got {len(queues)}")
    for queue in queues:
        validate_id(f"{argument} item", queue)
    return tuple(dict.fromkeys(queues))


# Leaves `_check_json` accepts without a call of its own (exact types; subclasses and floats
# take the full check): most payloads are flat objects of these.
_PLAIN_LEAVES = frozenset((str, int, bool, type(None)))


def _check_json(argument: str, value: object, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise InvalidArgument(argument, f"must not nest deeper than {_MAX_DEPTH} levels")
    # Containers first (a payload is most often an object); an item one level below the
    # deepest allowed takes the full check, which refuses it.
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidArgument(
                    argument, f"must be JSON: object keys must be str, got {type(key).__name__}"
                )
            if type(item) not in _PLAIN_LEAVES or depth >= _MAX_DEPTH:
                _check_json(argument, item, depth + 1)
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            if type(item) not in _PLAIN_LEAVES or depth >= _MAX_DEPTH:
                _check_json(argument, item, depth + 1)
        return
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument(argument, f"must be JSON: {value!r} has no JSON form")
        return
    kind = type(value)
    name = (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )
    raise InvalidArgument(
        argument,
        "must be JSON-serialisable (dict, list, tuple, str, int, float, bool or None), got "
        f"an instance of {name}: convert it first (an ISO string for a datetime, a list for a set)",
    )


# One encoder for every payload and result: what json.dumps(value, ensure_ascii=False,
# allow_nan=False, separators=(",", ":")) does, with its C encoder made once rather than
# at every call. Without a cycle check (markers None): `_check_json`, which runs first,
# refuses a cycle as too deep. It keeps no state between calls.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_C_ENCODER = getattr(json.encoder, "c_make_encoder", None)
if _C_ENCODER is not None:
    _C_ENCODER = _C_ENCODER(
        None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )


def _encode(value: Any) -> str:
    if _C_ENCODER is None:  # a Python without the json module's C part
        return _ENCODER.encode(value)
    return "".join(_C_ENCODER(value, 0))


def encode_json(argument: str, value: Any, limit: int = DEFAULT_PAYLOAD_LIMIT) -> str | None:
    """Encode a payload or result as JSON text, refusing what would not round-trip."""
    if value is None:
        return None
    _check_json(argument, value, 0)
    try:
        text = _encode(value)
    except ValueError as exc:  # e.g. an int with more digits than Python will print
        raise InvalidArgument(argument, f"must be JSON-serialisable: {exc}") from None
    if text.isascii():  # one byte a character, and no lone surrogate
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidArgument(argument, "must be valid Unicode text (lone surrogate)") from exc
    if size > limit:
        raise InvalidArgument(
            argument, f"must encode to at most {limit} bytes of JSON, got {size} bytes"
        )
    return text


# json.loads's own scanner (the default decoder's), called without loads's checks around it.
_DECODER: Any = json.JSONDecoder()  # typeshed does not declare its scanner
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once


def decode_json(text: str | None) -> Any:
    if text is None:
        return None
    if type(text) is str:
        try:
            value, end = _SCAN(text, 0)
        except StopIteration:  # not a JSON value at 0 (space before it?): loads says why
            return json.loads(text)
        if end == len(text):
            return value
    return json.loads(text)  # bytes, or something after the value: loads decides


def error_text(error: object) -> str:
    """Turn what a worker passes to ``fail`` into a bounded string."""
    if isinstance(error, BaseException):
        text = f"{type(error).__name__}: {error}"
    elif isinstance(error, str):
        text = error
    else:
        raise InvalidArgument("error", f"must be a str or an exception, not {type(error).__name__}")
    # Lone surrogates and NUL (which PostgreSQL text cannot hold) become replacement marks,
    # so that every store keeps the same text.
    text = text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")
    if len(text) > MAX_ERROR_LENGTH:
        text = text[: MAX_ERROR_LENGTH - 15] + " …[truncated]"
    return text


MAX_AGE = 100 * 366 * 24 * 3600.0
MAX_REASON_LENGTH = 4096
FINISHED_STATES = ("done", "dead", "cancelled")
PURGE_BATCH = 500


def validate_age(value: object, argument: str = "older_than") -> float:
    """A job age, for purge and retention: seconds (or a timedelta) from 0 to 100 years."""
    seconds = _seconds(argument, value)
    if not 0.0 <= seconds <= MAX_AGE:
        raise InvalidArgument(argument, f"must be from 0 seconds to 100 years, got {value!r}")
    return seconds


def validate_reason(value: object, argument: str = "reason") -> str | None:
    """A cancel reason: None, or a str of at most 4096 characters (no NUL)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgument(argument, f"must be a str or None, not {type(value).__name__}")
    if len(value) > MAX_REASON_LENGTH:
        raise InvalidArgument(
            argument, f"must be at most {MAX_REASON_LENGTH} characters, got {len(value)}"
        )
    if "\x00" in value:
        raise InvalidArgument(argument, "must not contain NUL characters")
    return value.encode("utf-8", "replace").decode("utf-8")


def validate_finished_states(value: object, argument: str = "states") -> tuple[str, ...]:
    """A non-empty list or tuple of distinct finished states (done, dead, cancelled)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise InvalidArgument(argument, "must be a list or tuple of states, e.g. ('done',)")
    states = tuple(str(state) if isinstance(state, str) else state for state in value)
    if not states:
        raise InvalidArgument(argument, "must name at least one state")
    for state in states:
        if not isinstance(state, str) or state not in FINISHED_STATES:
            raise InvalidArgument(
                argument, f"must hold only {', '.join(FINISHED_STATES)}, got {state!r}"
            )
    if len(set(states)) != len(states):
        raise InvalidArgument(argument, "must name each state at most once")
    return tuple(sorted(set(states), key=FINISHED_STATES.index))


def validate_queue_limit(value: object, argument: str = "n") -> int | None:
    """A queue's limit of running leases: an int from 1 to MAX_QUEUE_LIMIT, or None for no
    limit."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(argument, f"must be an int or None, not {type(value).__name__}")
    if not 1 <= value <= MAX_QUEUE_LIMIT:
        raise InvalidArgument(argument, f"must be from 1 to {MAX_QUEUE_LIMIT}, got {value}")
    return value


def validate_queue_rate(per_second: object, burst: object) -> tuple[float, int] | None:
    """A queue's rate: ``per_second`` a finite number from MIN_QUEUE_RATE to MAX_QUEUE_RATE,
    ``burst`` an int from 1 to MAX_QUEUE_RATE or None for max(1, ceil(per_second)); None
    (with no burst) for no rate. Answers (per_second, burst)."""
    if per_second is None:
        if burst is not None:
            raise InvalidArgument("burst", "must be None when per_second is None (no rate)")
        return None
    if isinstance(per_second, bool) or not isinstance(per_second, (int, float)):
        raise InvalidArgument(
            "per_second", f"must be a number or None, not {type(per_second).__name__}"
        )
    rate = float(min(per_second, MAX_QUEUE_RATE + 1))  # (an int too large for a float)
    if not (math.isfinite(rate) and MIN_QUEUE_RATE <= rate <= MAX_QUEUE_RATE):
        raise InvalidArgument(
            "per_second",
            f"must be a finite number from {MIN_QUEUE_RATE:g} (a job in about 11.6 days) to "
            f"{MAX_QUEUE_RATE}, got {str(per_second)[:40]}",
        )
    if burst is None:
        return rate, max(1, math.ceil(rate))
    if isinstance(burst, bool) or not isinstance(burst, int):
        raise InvalidArgument("burst", f"must be an int or None, not {type(burst).__name__}")
    if not 1 <= burst <= MAX_QUEUE_RATE:
        raise InvalidArgument("burst", f"must be from 1 to {MAX_QUEUE_RATE}, got {burst}")
    return rate, burst


def validate_flag(value: object, argument: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(argument, f"must be True or False, not {type(value).__name__}")
    return value


# -- unique jobs (issue #18) --------------------------------------------------------------

# The longest uniqueness window after a job finishes: as long as the longest delay.
MAX_UNIQUE_FOR = MAX_DELAY


def validate_unique(
    unique_key: object, unique_for: object, where: str = ""
) -> tuple[str | None, float | None]:
    """``unique_key`` (None, or an id: 1-255 characters, no control characters) and
    ``unique_for`` (None, or seconds or a timedelta above 0 and at most 366 days; only with
    a key). ``where`` prefixes the argument names (``jobs[3].``)."""
    if unique_key is None:
        if unique_for is not None:
            raise InvalidArgument(
                f"{where}unique_for", "needs a unique_key (a window of no key means nothing)"
            )
        return None, None
    key = validate_id(f"{where}unique_key", unique_key)
    if unique_for is None:
        return key, None
    seconds = _seconds(f"{where}unique_for", unique_for)
    if not 0.0 < seconds <= MAX_UNIQUE_FOR:
        raise InvalidArgument(
            f"{where}unique_for",
            f"must be above 0 seconds and at most 366 days, or None; got {unique_for!r}",
        )
    return key, seconds


# -- a job's headers (issue #20) ----------------------------------------------------------

# Headers carry a trace context (traceparent: 55 characters, tracestate: at most 512, W3C
# baggage: at most 8192 bytes) and the like, never data: a job's payload is for that.
MAX_HEADERS = 32
MAX_HEADERS_SIZE = 8192


def validate_headers(value: object, argument: str = "headers") -> dict[str, str]:
    """A job's ``headers``: None (none), or a mapping of at most 32 names to values, each a
    str without control characters, names 1-255 characters, all names and values together
    at most 8192 characters. Answers a copy (a plain dict; empty for None)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidArgument(
            argument, f"must be a mapping of str to str or None, not {type(value).__name__}"
        )
    if len(value) > MAX_HEADERS:
        raise InvalidArgument(argument, f"must hold at most {MAX_HEADERS}, got {len(value)}")
    headers: dict[str, str] = {}
    size = 0
    for name, text in value.items():
        validate_id(f"{argument} name", name)
        if not isinstance(text, str):
            raise InvalidArgument(
                f"{argument}[{name!r}]", f"must be a str, not {type(text).__name__}"
            )
        if not (text.isascii() and text.isprintable()):
            _check_header_text(f"{argument}[{name!r}]", text)
        size += len(name) + len(text)
        headers[name] = text
    if size > MAX_HEADERS_SIZE:
        raise InvalidArgument(
            argument,
            f"must be at most {MAX_HEADERS_SIZE} characters in all (names and values), "
            f"got {size}: headers carry a trace context, the payload carries data",
        )
    return headers


def _check_header_text(argument: str, text: str) -> None:
    for position, char in enumerate(text):
        category = unicodedata.category(char)
        if category == "Cc":
            raise InvalidArgument(
                argument, f"must not contain control characters ({char!r} at {position})"
            )
        if category == "Cs":
            raise InvalidArgument(
                argument, f"must be valid Unicode text (lone surrogate at {position})"
            )


def encode_headers(headers: Mapping[str, str]) -> str | None:
    """Checked headers as the JSON text the stores keep (None: none)."""
    if not headers:
        return None
    return json.dumps(headers, ensure_ascii=False, separators=(",", ":"))
