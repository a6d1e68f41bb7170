"""What the sync and async Redis drivers share: URL options, key layout, scripts, replies.

Nothing here does I/O. The key layout is documented in ``docs/redis.md``; in short, every
key of one store starts with the hash tag ``{prefix}`` (so the whole store lives in one
Cluster slot and every script touches one slot), and job ids and queue names enter key
names only percent-encoded, so no id can be mistaken for key syntax.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import SplitResult, quote, urlencode, urlunsplit

from ..._protocol import JobRow, Outcome, Status
from ..._resources import load_text
from ...errors import InvalidArgument, StoreLost, StoreUnavailable
from .. import refuse_fragment, split_url, url_host, url_number, url_query
from ._lua import script_text

__all__ = [
    "LAYOUT_VERSION",
    "SCRIPTS",
    "Keys",
    "RedisOptions",
    "Script",
    "all_plain",
    "connection_options",
    "decode_batch",
    "decode_float",
    "decode_item",
    "decode_outcome",
    "decode_row",
    "decode_text",
    "encode",
    "CHECKED_CONFIG",
    "eviction_risk",
    "config_noted",
    "note_server_config",
    "pack_request",
    "parse_redis_url",
    "persistence_risk",
    "handshake_refused",
    "refused",
    "unique_args",
    "unreachable",
]

log = logging.getLogger("tenure")


@lru_cache(maxsize=1)
def connection_options() -> dict[str, Any]:
    """Options for every redis-py connection pool of tenure. redis-py 7 and later read their
    own version from the installed package's metadata for each new connection (for CLIENT
    SETINFO), a millisecond or two each time, most of a worker's start on Redis: tenure
    tells them the version, read once. (Earlier redis-py read it once, at import.)"""
    import redis

    try:
        from redis.driver_info import DriverInfo
    except ImportError:
        return {}
    return {"driver_info": DriverInfo(name="redis-py", lib_version=redis.__version__)}


_PACKAGE = __package__ or "tenure.stores.redis"

# Bumped when the key layout changes incompatibly; stored in {prefix}:meta.
# 2: the clock key is named by the store id ({prefix}:clock:<id>), so that a client whose
# store's keys vanished is refused (see _lib.lua's store_now).
# 3 (issue #20): each queue's leases set ({prefix}:q:<queue>:leased) and the known queues
# ({prefix}:queues), built for an older store when a client first opens it (index_leases).
LAYOUT_VERSION = 3
DEFAULT_PREFIX = "tenure"
DEFAULT_TIMEOUT = 5.0
_PREFIX = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
# Passed through to redis-py (TLS settings of rediss:// URLs, client name).
_PASSTHROUGH = frozenset(
    {"ssl_cert_reqs", "ssl_ca_certs", "ssl_ca_path", "ssl_certfile", "ssl_keyfile", "client_name"}
)
# What redis-py takes for ssl_cert_reqs, and what Redis takes for a client name (CLIENT
# SETNAME refuses spaces, newlines and other characters outside '!'..'~').
_CERT_REQS = ("none", "optional", "required")
_CLIENT_NAME = re.compile(r"[!-~]*")
# The largest database number Redis parses (SELECT: a 32-bit int; `databases` bounds it).
MAX_DB = 2**31 - 1


# -- URL ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RedisOptions:
    redis_url: str  # what redis-py is given (tenure's own options removed)
    public_url: str  # the store URL without its password
    prefix: str
    timeout: float | None
    connect_timeout: float | None
    max_connections: int | None
    address: str = field(default="")  # host:port/db, for log records


def _seconds(name: str, value: str) -> float | None:
    if value.lower() in ("none", "0"):
        return None
    seconds: float = url_number(f"{name} (seconds)", value, 0, 3600)
    if not seconds:
        raise InvalidArgument("url", f"{name} must be from 0 to 3600 seconds, got {value!r}")
    return seconds


def _port(parts: SplitResult) -> int:
    """The port of a redis URL (6379 when it has none): ASCII digits from 1 to 65535 (the
    port of ``urlsplit`` takes other scripts' digits before Python 3.11, and 0)."""
    text = parts.netloc.rpartition("@")[2].rpartition("]")[2].partition(":")[2]
    return url_number("the port", text, 1, 65535, int) if text else 6379


def _passthrough(scheme: str, key: str, value: str) -> tuple[str, str]:
    """A redis-py option of the URL, checked here rather than by redis-py at the first
    connection (which raises a TypeError for a TLS option of a plain redis:// URL)."""
    if key.startswith("ssl_"):
        if scheme != "rediss":
            raise InvalidArgument("url", f"{key} is a TLS option: it needs a rediss:// URL")
        if key == "ssl_cert_reqs" and value not in _CERT_REQS:
            raise InvalidArgument(
                "url", f"ssl_cert_reqs must be one of {', '.join(_CERT_REQS)}, got {value!r}"
            )
        if not value:
            raise InvalidArgument("url", f"{key} must not be empty")
    elif not _CLIENT_NAME.fullmatch(value):
        raise InvalidArgument(
            "url",
            f"client_name must be printable ASCII without spaces (as Redis takes), got {value!r}",
        )
    return key, value


def parse_redis_url(url: str) -> RedisOptions:
    """``redis://[[user]:password@]host[:port][/db][?prefix=tenure&timeout=5]``, or
    ``rediss://`` for TLS. Options: ``prefix`` (the store's key prefix, default ``tenure``;
    letters, digits, ``_.-``), ``timeout`` and ``connect_timeout`` (seconds, default 5;
    ``none`` waits forever), ``max_connections``, and redis-py's TLS options."""
    parts = split_url(url)
    if parts.scheme not in ("redis", "rediss"):
        raise InvalidArgument("url", f"must start with redis:// or rediss://, got {url!r}")
    refuse_fragment(url)
    if not parts.hostname:
        raise InvalidArgument("url", "must name a host, e.g. redis://127.0.0.1:6379/0")
    url_host(parts.hostname)
    port = _port(parts)
    path = parts.path.strip("/")
    if path:
        path = str(url_number("the path (a database number)", path, 0, MAX_DB, int))
    prefix = DEFAULT_PREFIX
    timeout: float | None = DEFAULT_TIMEOUT
    connect_timeout: float | None = DEFAULT_TIMEOUT
    max_connections: int | None = None
    passthrough: list[tuple[str, str]] = []
    for key, value in url_query(parts):
        if key == "prefix":
            if not _PREFIX.fullmatch(value):
                raise InvalidArgument(
                    "url",
                    "prefix must be 1-64 letters, digits or '_.-' (it becomes the hash tag "
                    f"of every key), got {value!r}",
                )
            prefix = value
        elif key == "timeout":
            timeout = _seconds("timeout", value)
        elif key == "connect_timeout":
            connect_timeout = _seconds("connect_timeout", value)
        elif key == "max_connections":
            max_connections = url_number(key, value, 1, MAX_DB, int)
        elif key in _PASSTHROUGH:
            passthrough.append(_passthrough(parts.scheme, key, value))
        else:
            known = ", ".join(["prefix", "timeout", "connect_timeout", "max_connections"])
            raise InvalidArgument("url", f"unknown redis option {key!r} (known: {known})")
    redis_url = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(passthrough), ""))
    netloc = parts.netloc.rpartition("@")[2]
    if parts.username:
        netloc = f"{parts.username}@{netloc}"
    public_query = urlencode([("prefix", prefix), *passthrough])
    public_url = urlunsplit((parts.scheme, netloc, parts.path, public_query, ""))
    return RedisOptions(
        redis_url=redis_url,
        public_url=public_url,
        prefix=prefix,
        timeout=timeout,
        connect_timeout=connect_timeout,
        max_connections=max_connections,
        address=f"{parts.hostname}:{port}/{path or '0'}",
    )


# -- keys -----------------------------------------------------------------------------


_PLAIN = re.compile(r"[A-Za-z0-9_.~-]+")


def encode(name: str) -> str:
    """A job id or queue name as it appears inside key names and set members: UTF-8,
    percent-encoded except ``A-Z a-z 0-9 _ . - ~``. Injective, so distinct ids never
    share a key, and free of ``{``, ``}``, ``:``, ``*``, spaces and other key syntax."""
    if _PLAIN.fullmatch(name):  # the common case, and what quote() would answer
        return name
    return quote(name, safe="")


def all_plain(names: Sequence[str]) -> bool:
    """Whether `encode` answers each of ``names`` (non-empty strings) with the name itself:
    one match of them all joined, rather than one a name."""
    return _PLAIN.fullmatch("".join(names)) is not None


class Keys:
    """The key names of one store (see docs/redis.md)."""

    __slots__ = (
        "clock",
        "floor",
        "job_prefix",
        "jobs",
        "layout1_clock",
        "limits",
        "meta",
        "paused",
        "prefix",
        "queues",
        "rates",
        "schedules",
        "seq",
        "tag",
    )

    def __init__(self, prefix: str, store_id: str = "") -> None:
        self.prefix = prefix
        self.tag = "{" + prefix + "}"
        self.meta = self.tag + ":meta"
        # Named by the store id, known once the store is opened (`for_store`).
        self.clock = self.tag + ":clock:" + store_id
        self.layout1_clock = self.tag + ":clock"
        self.seq = self.tag + ":seq"
        self.jobs = self.tag + ":jobs"
        self.job_prefix = self.tag + ":j:"
        # The generation floor (the highest generation deleted; see _lib.lua's floor_key).
        self.floor = self.tag + ":floor"
        # The paused queues: a hash from each one's candidate set key (what the claim
        # scripts hold) to its name (what paused_queues answers).
        self.paused = self.tag + ":paused"
        # The queue limits (issue #18): a hash from each limited queue's candidate set key
        # to "<limit> <name>".
        self.limits = self.tag + ":limits"
        # The queue rates (issue #18): a hash from each rate-limited queue's candidate set
        # key to its token bucket, "<per_second> <burst> <tokens> <at> <name>" (_lib.lua).
        self.rates = self.tag + ":rates"
        # The store schedules: a hash from each one's name to its times and spec (see
        # _schedules_async.py).
        self.schedules = self.tag + ":schedules"
        # The known queues (issue #20): a hash from each one's candidate set key to its
        # name, kept by the scripts (_lib.lua's queue_known), read by queue_stats.lua.
        self.queues = self.tag + ":queues"

    def for_store(self, store_id: str) -> Keys:
        return Keys(self.prefix, store_id)

    def job(self, job_id: str) -> str:
        return self.job_prefix + encode(job_id)

    def unique(self, unique_key: str) -> str:
        """The pointer to the job that last took ``unique_key`` (issue #18)."""
        return self.tag + ":u:" + encode(unique_key)

    def candidates(self, queue: str) -> str:
        return _queue_key(self.prefix, "q", queue)

    def listing(self, queue: str) -> str:
        return _queue_key(self.prefix, "l", queue)

    def wake(self, queue: str) -> str:
        return _queue_key(self.prefix, "w", queue)


@lru_cache(maxsize=1024)
def _queue_key(prefix: str, kind: str, queue: str) -> str:
    # Queues are few and named on every claim: their keys are worth remembering.
    return "{" + prefix + "}:" + kind + ":" + encode(queue)


# -- scripts --------------------------------------------------------------------------


@dataclass(frozen=True)
class Script:
    name: str
    text: str
    sha: str


def _script(name: str) -> Script:
    # Each script carries the definitions of _lib.lua it uses (_lua.py says why and how).
    text = script_text(load_text(_PACKAGE, "lua/_lib.lua"), load_text(_PACKAGE, f"lua/{name}.lua"))
    return Script(name, text, hashlib.sha1(text.encode()).hexdigest())


SCRIPTS: dict[str, Script] = {
    name: _script(name)
    for name in (
        "open",
        "identity",
        "now",
        "submit",
        "claim",
        "claim_next",
        "renew",
        "renew_many",
        "complete",
        "complete_many",
        "complete_and_claim",
        "release",
        "fail",
        "get",
        "attempts",
        "find_leases",
        "list",
        "wait",
        "submit_many",
        "wait_job",
        "cancel",
        "requeue",
        "delete",
        "purge",
        "pause_queue",
        "set_queue_limit",
        "set_queue_rate",
        "schedule_put",
        "queue_stats",
        "index_leases",
    )
}


# -- replies --------------------------------------------------------------------------

_STATUS = {
    "applied": Status.APPLIED,
    "missed": Status.MISSED,
    "missing": Status.MISSING,
    "buried": Status.BURIED,
}


def _text(value: Any) -> str | None:
    # RESP2 answers nil for Lua's false, RESP3 may answer False.
    if value is None or value is False:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _float(value: Any) -> float | None:
    text = _text(value)
    return None if text is None else float(text)


def decode_row(fields: Sequence[Any]) -> JobRow:
    """A JobRow from the 19 fields a script answers (JOB_COLUMNS order; a job written
    before priorities has no ``pr`` or ``to`` field: priority 0, no timeout; one without a
    unique key no ``uk``, one without headers no ``hd``).

    The connection decodes bulk strings to str and (RESP2) Lua's false to None; this is
    the hot path of every operation, so it converts the few numeric fields and no more."""
    (job_id, queue, state, owner, generation, secret_hash, lease_until, available_at,
     attempts, max_attempts, payload, result, error, created_at, updated_at, priority,
     timeout, unique_key, headers) = fields  # fmt: skip
    return JobRow(
        job_id,
        queue,
        state,
        owner,
        int(generation),
        secret_hash,
        None if lease_until is None else float(lease_until),
        float(available_at),
        int(attempts),
        int(max_attempts),
        payload,
        result,
        error,
        float(created_at),
        float(updated_at),
        0 if priority is None else int(priority),
        None if timeout is None else float(timeout),
        unique_key,
        headers,
    )


def unique_args(
    keys: Keys, unique_key: str | None, unique_for: float | None
) -> tuple[str | None, str | None, str | None]:
    """A batch item's unique key, its window and its pointer's name (all None: no key)."""
    if unique_key is None:
        return None, None, None
    window = None if unique_for is None else repr(float(unique_for))
    return unique_key, window, keys.unique(unique_key)


def decode_outcome(reply: Sequence[Any]) -> Outcome:
    """``{status, now}`` or ``{status, now, <row>}`` as an Outcome."""
    row = decode_row(reply[2:]) if len(reply) > 2 else None
    return Outcome(_STATUS[reply[0]], row, float(reply[1]))


def decode_batch(reply: str) -> tuple[float, list[Any]]:
    """The store time and the items of a batch reply: one JSON string (see ``json_row`` in
    ``lua/_lib.lua``) holding ``[now, item, ...]``; every value in it is a string or null."""
    items = json.loads(reply)
    return float(items[0]), items[1:]


def decode_item(item: Sequence[Any], now: float) -> Outcome:
    """``[status]`` or ``[status, <row>]`` of a batch reply as an Outcome."""
    row = decode_row(item[1:]) if len(item) > 1 else None
    return Outcome(_STATUS[item[0]], row, now)


def decode_float(value: Any) -> float | None:
    return _float(value)


def decode_text(value: Any) -> str | None:
    return _text(value)


# -- errors ---------------------------------------------------------------------------

# Answers with which the server refuses a command without running it.
_REFUSALS = (
    "LOADING",
    "BUSY",
    "READONLY",
    "MASTERDOWN",
    "MISCONF",
    "OOM",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "NOAUTH",
    "WRONGPASS",
    "NOPERM",
    "MOVED",
    "ASK",
)


_FRAME = b"$%d\r\n%s\r\n"  # one argument of a request: its length, then its bytes


def pack_request(command: Sequence[str | int]) -> bytes:
    """``command`` as one RESP request (an array of bulk strings), in one buffer: the bytes
    redis-py's ``pack_command`` makes, joined.

    redis-py's pure-Python packer (without hiredis) checks each argument's type five times
    and copies the request built so far at each argument: a batch's request, a hundred
    arguments, cost a quarter of a claim -> complete cycle's client instructions on Redis
    (benchmarks/client_instructions.py). tenure's arguments are text and integers it built
    itself, so one join does.

    Each argument is framed by C code alone (``map`` over ``bytes.__mod__``): a batch's
    request carries a few arguments per job, and the Python steps around each were about
    270 a job of a Worker's 2,660 (`benchmarks/client_opcodes.py`; in instructions, 1-2 %
    of the client's work per job). Text, which is what the drivers send (`_eval` writes its
    key count as text), is encoded the same way; a request with anything else takes the
    per-argument path."""
    try:
        parts = list(map(str.encode, command))  # type: ignore[arg-type]
    except TypeError:  # not all text: a number, or bytes
        parts = [arg.encode() if type(arg) is str else _encoded(arg) for arg in command]
    frames = map(_FRAME.__mod__, zip(map(len, parts), parts, strict=True))
    return b"*%d\r\n" % len(parts) + b"".join(frames)


def _encoded(arg: object) -> bytes:
    """An argument that is not plain text, as redis-py's `Encoder` encodes it."""
    if isinstance(arg, bytes):
        return arg
    if isinstance(arg, str):
        return arg.encode()
    if isinstance(arg, (int, float)) and not isinstance(arg, bool):
        return repr(arg).encode()
    raise TypeError(f"a Redis request argument must be text or a number, not {arg!r}")


def unreachable(operation: str, address: str, exc: BaseException, sent: bool) -> StoreUnavailable:
    """The error for a lost or refused connection. ``sent``: the request may have reached
    the server, so the operation may have taken effect."""
    if sent:
        what = "the connection was lost after the request was sent: it may have taken effect"
    else:
        what = "the request was not sent: nothing changed"
    return StoreUnavailable(
        f"{operation}: Redis at {address} is unavailable ({type(exc).__name__}: {exc}); {what}",
        operation=operation,
        outcome_unknown=sent,
    )


def handshake_refused(
    operation: str, address: str, exc: BaseException
) -> StoreUnavailable | InvalidArgument:
    """The error for a connection whose handshake the server answered with an error: a
    database number the server does not have (its ``databases`` setting) is the URL's
    fault, nothing was sent; anything else as `refused`."""
    if "DB index is out of range" in str(exc):
        return InvalidArgument(
            "url",
            f"names a database the Redis server does not have ({address}: its 'databases' "
            "setting, 16 by default, numbers them from 0); nothing changed",
        )
    return refused(operation, address, exc)


def refused(operation: str, address: str, exc: BaseException) -> StoreUnavailable | InvalidArgument:
    """The error for an error answer from the server."""
    message = str(exc)
    code = getattr(exc, "status_code", None) or message.split(" ", 1)[0]
    if code == "STORELOST":
        # Raised before any write (see _lib.lua): nothing changed.
        return StoreLost(
            f"{operation}: Redis at {address} no longer holds the store this client opened "
            f"(its key {message.partition(' ')[2].split(' script:', 1)[0]} is gone): the "
            "server restarted without persistence, was flushed, evicted keys or failed over "
            "to a replica that missed writes, so generations it issued could be issued "
            "again. This client refuses to go on: stop the workers and read 'A store that "
            "lost its data' in docs/redis.md before starting them again; nothing changed",
            operation=operation,
            outcome_unknown=False,
        )
    if code == "BADARG":
        # A script refused an argument before its first write (see _lib.lua): nothing
        # changed. The client checks the same rules first, so this means one that did not.
        name, _, rule = message.partition(" ")[2].partition(" ")
        return InvalidArgument(name, rule.split(" script:", 1)[0])
    if code in _REFUSALS or type(exc).__name__ in ("BusyLoadingError", "ReadOnlyError"):
        hint = ""
        if code in ("MOVED", "ASK"):
            hint = " (this driver talks to one Redis node; see docs/redis.md on Cluster)"
        elif code == "READONLY":
            hint = " (connected to a replica: point the URL at the primary)"
        return StoreUnavailable(
            f"{operation}: Redis at {address} refused the request ({code} {message}){hint}; "
            "nothing changed",
            operation=operation,
            outcome_unknown=False,
        )
    # A script that failed while running may have made some of its writes.
    return StoreUnavailable(
        f"{operation}: a tenure script failed in Redis at {address}: {message}. Are other "
        "programs writing to this store's keys? (the outcome is unknown)",
        operation=operation,
        outcome_unknown=True,
    )


# -- persistence ----------------------------------------------------------------------

# The servers whose configuration this process has read: once is enough (it is only
# logged), and a worker opens two stores, each a round trip per setting otherwise.
_noted: set[str] = set()
_noted_lock = threading.Lock()


def config_noted(address: str) -> bool:
    """Whether this process has read the configuration of the server at ``address``."""
    with _noted_lock:
        return address in _noted


def _config_value(reply: Any, name: str) -> str | None:
    if isinstance(reply, dict):
        for key, value in reply.items():
            if _text(key) == name:
                return _text(value)
        return None
    items = list(reply or ())
    for key, value in zip(items[::2], items[1::2], strict=False):
        if _text(key) == name:
            return _text(value)
    return None


def persistence_risk(appendonly: Any, appendfsync: Any, save: Any) -> tuple[int, str] | None:
    """What a restart of a server with this configuration would do to fencing tokens, as
    a (log level, message), or None when every acknowledged write is on disk. Arguments
    are ``CONFIG GET`` replies."""
    aof = (_config_value(appendonly, "appendonly") or "").lower() == "yes"
    fsync = (_config_value(appendfsync, "appendfsync") or "").lower()
    rdb = bool((_config_value(save, "save") or "").strip())
    if aof and fsync == "always":
        return None
    if aof:
        return (
            logging.INFO,
            f"Redis persistence is appendonly yes with appendfsync {fsync or '?'}: a crash "
            "can lose the last second of writes, and with them generations already handed "
            "out (a restarted server could hand the same fencing token out twice); use "
            "appendfsync always where that matters (see docs/redis.md)",
        )
    if rdb:
        return (
            logging.WARNING,
            "Redis keeps only RDB snapshots (appendonly no): a restart loses every write since "
            "the last snapshot, so generations handed out since then can be handed out "
            "again; set appendonly yes and appendfsync always (see docs/redis.md)",
        )
    return (
        logging.WARNING,
        "Redis keeps nothing on disk (appendonly no, no save points): a restart empties the "
        "store and resets every job's generation, so fencing tokens would be handed out "
        "again; set appendonly yes and appendfsync always (see docs/redis.md)",
    )


def eviction_risk(maxmemory_policy: Any) -> tuple[int, str] | None:
    """An ``allkeys-*`` eviction policy may drop a job's hash (and its generation) when
    memory runs short; tenure sets no expiry, so ``volatile-*`` policies never touch it."""
    policy = (_config_value(maxmemory_policy, "maxmemory-policy") or "").lower()
    if not policy.startswith("allkeys"):
        return None
    return (
        logging.WARNING,
        f"Redis evicts keys under memory pressure (maxmemory-policy {policy}): an evicted "
        "job loses its generation, and a fencing token could then be handed out twice; use "
        "maxmemory-policy noeviction for tenure's server (see docs/redis.md)",
    )


# The CONFIG parameters the driver reads at connect.
CHECKED_CONFIG = ("appendonly", "appendfsync", "save", "maxmemory-policy")


def note_server_config(address: str, replies: Sequence[Any], *, unchecked: str = "") -> None:
    """Log what the server's configuration (``CONFIG GET`` replies, CHECKED_CONFIG order)
    risks for fencing tokens, once per server and process. ``unchecked``: why the
    configuration could not be read (then nothing is known)."""
    risks: list[tuple[int, str]] = []
    if unchecked:
        risks.append(
            (
                logging.INFO,
                f"could not read Redis persistence settings ({unchecked}); make sure the "
                "server runs with appendonly yes, appendfsync always and maxmemory-policy "
                "noeviction (see docs/redis.md)",
            )
        )
    else:
        appendonly, appendfsync, save, maxmemory_policy = replies
        for risk in (
            persistence_risk(appendonly, appendfsync, save),
            eviction_risk(maxmemory_policy),
        ):
            if risk is not None:
                risks.append(risk)
    with _noted_lock:
        if address in _noted:
            return
        _noted.add(address)
    for level, message in risks:
        log.log(level, message, extra={"store": "redis", "address": address})
