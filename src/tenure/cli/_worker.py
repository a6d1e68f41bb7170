"""``tenure worker MODULE:APP``: run the handlers of a `tenure.Worker`."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import click

from ..errors import InvalidArgument
from ..stores import DEFAULT_URL
from ..worker import Worker, serve_metrics
from . import CliError, CliState, common_options
from ._params import DURATION, Duration

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["load_app", "worker"]

_RECORD_FIELDS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


def load_app(spec: str) -> Worker:
    """``module:attribute`` (``module`` alone means ``module:worker``) → a `Worker`; a
    callable attribute is called without arguments and must return one."""
    module_name, _, attribute = spec.partition(":")
    if not module_name:
        raise CliError(f"MODULE:APP expected, got {spec!r}", exit_code=2)
    # Like `python -m` and other workers: modules of the current directory are importable.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise CliError(
                f"cannot import {module_name!r}: {exc} (run from the directory that contains "
                "it, or install it)",
                exit_code=2,
            ) from exc
        raise
    for part in (attribute or "worker").split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise CliError(
                f"{module_name!r} has no attribute {attribute or 'worker'!r}", exit_code=2
            ) from None
    if not isinstance(found, Worker) and callable(found):
        found = found()
    if not isinstance(found, Worker):
        raise CliError(f"{spec!r} is a {type(found).__name__}, not a tenure.Worker", exit_code=2)
    return found


class _Formatter(logging.Formatter):
    """One line per record: time, level, message, then the structured ``extra`` fields."""

    def __init__(self, json_mode: bool) -> None:
        super().__init__()
        self.json_mode = json_mode

    def format(self, record: logging.LogRecord) -> str:
        extra = {k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS}
        message = record.getMessage()
        if self.json_mode:
            data = {
                "time": record.created,
                "level": record.levelname.lower(),
                "message": message,
                **extra,
            }
            if record.exc_info:
                data["traceback"] = self.formatException(record.exc_info)
            return json.dumps(data, default=str, ensure_ascii=False)
        # Mappings (a summary's counters) are for --json: the message already says them.
        fields = " ".join(f"{k}={v}" for k, v in extra.items() if not isinstance(v, dict))
        line = f"{self.formatTime(record)} {record.levelname:<7} {message}"
        if fields:
            line = f"{line}  {fields}"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


class _ConsoleHandler(logging.Handler):
    """Log lines printed through a rich console, above its live progress line."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        from rich.text import Text

        try:
            self.console.print(Text(self.format(record)), soft_wrap=True)
        except Exception:
            self.handleError(record)


class _LiveProgress:
    """The live line under the log on a terminal: counters and rate, redrawn by rich."""

    def __init__(self, found: Worker) -> None:
        self.worker = found
        self.started = time.monotonic()

    def __rich__(self) -> Any:
        from rich.text import Text

        values = self.worker.stats()
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = values["completed"] / elapsed
        text = Text()
        text.append("● ", style="green" if values["in_flight"] else "dim")
        text.append(f"{values['completed']:g} done", style="green")
        for name, word, style in (
            ("failed", "failed", "yellow"),
            ("retried", "retried", ""),
            ("dead", "dead", "red"),
            ("leases_lost", "lost", "red"),
            ("in_flight", "in flight", "bold"),
        ):
            text.append(" · ")
            text.append(f"{values[name]:g} {word}", style=style if values[name] else "")
        text.append(f" · {rate:.3g} jobs/s · {elapsed:.0f} s", style="dim")
        return text


def _rich_console(json_mode: bool) -> Console | None:
    """A rich console on stderr when it is a terminal (and rich is installed), else None."""
    if json_mode or importlib.util.find_spec("rich") is None:
        return None
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty:
        return None
    from rich.console import Console

    return Console(stderr=True, highlight=False)


@contextlib.contextmanager
def _live_progress(found: Worker, console: Console | None) -> Iterator[None]:
    """A live progress line on ``console`` while the worker runs (nothing without one)."""
    if console is None:
        yield
        return
    from rich.live import Live

    with Live(
        _LiveProgress(found),
        console=console,
        refresh_per_second=2,
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
    ):
        yield


def _configure_logging(
    level: str, json_mode: bool, console: Console | None = None
) -> Callable[[], None]:
    """Log the 'tenure' logger to stderr (through ``console`` when there is one), unless
    the application configured logging; returns how to undo it."""
    logger = logging.getLogger("tenure")
    previous_level = logger.level
    logger.setLevel(level.upper())
    real = [h for h in logger.handlers if not isinstance(h, logging.NullHandler)]
    if real or logging.getLogger().handlers:
        return lambda: logger.setLevel(previous_level)
    handler: logging.Handler
    handler = logging.StreamHandler(sys.stderr) if console is None else _ConsoleHandler(console)
    handler.setFormatter(_Formatter(json_mode))
    logger.addHandler(handler)

    def undo() -> None:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)

    return undo


@click.command("worker")
@click.argument("app", metavar="MODULE:APP")
@click.option(
    "-q",
    "--queue",
    "queues",
    multiple=True,
    metavar="Q",
    help="Serve only this queue (repeatable). Default: every queue with a handler.",
)
@click.option(
    "-c", "--concurrency", type=click.IntRange(1, 1000), default=None, help="Handlers at once."
)
@click.option(
    "--ttl",
    type=DURATION,
    default=None,
    help="Lease length, e.g. 30s, 5m (a number alone: seconds).",
)
@click.option(
    "--renew-every",
    type=DURATION,
    default=None,
    help="Renewal period, e.g. 10s (default: a third of the ttl).",
)
@click.option(
    "--grace",
    type=DURATION,
    default=None,
    help="How long in-flight handlers get after SIGTERM/SIGINT before their jobs are "
    "released, e.g. 30s, 2m.",
)
@click.option(
    "--isolation",
    type=click.Choice(["thread", "process"]),
    default=None,
    help="Default isolation of handlers that do not choose one.",
)
@click.option(
    "--timeout",
    type=DURATION,
    default=None,
    help="Per-attempt timeout of handlers that set none, e.g. 90s, 10m: past it the handler "
    "is stopped and the attempt failed (retried per the retry policy).",
)
@click.option(
    "--poll-interval", type=DURATION, default=None, help="Longest idle wait, e.g. 0.5, 2s."
)
@click.option("--owner", default=None, help="Owner id of the leases (default host:pid:random).")
@click.option("--burst", is_flag=True, default=False, help="Exit once no job is claimable.")
@click.option(
    "--summary-every",
    type=Duration(0, 86400),
    default=None,
    help="Time between one-line progress summaries at INFO, e.g. 10s, 1m (default 10 s; 0: none).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    metavar="N",
    help="Serve Prometheus metrics of this worker on http://HOST:N/metrics (tenure[metrics]).",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    metavar="HOST",
    help="Address of --metrics-port (0.0.0.0: every interface, for a scraper elsewhere).",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    help="Logging level of the 'tenure' logger (unless the app configures logging).",
)
@common_options
@click.pass_context
def worker(
    ctx: click.Context,
    app: str,
    queues: tuple[str, ...],
    concurrency: int | None,
    ttl: float | None,
    renew_every: float | None,
    grace: float | None,
    isolation: str | None,
    timeout: float | None,
    poll_interval: float | None,
    owner: str | None,
    burst: bool,
    summary_every: float | None,
    metrics_port: int | None,
    metrics_host: str,
    log_level: str,
) -> None:
    """Run the handlers of the tenure.Worker APP until SIGTERM/SIGINT.

    APP is module:attribute (a module alone means module:worker). Options given here
    override the worker's own settings. The first SIGTERM/SIGINT stops claiming and gives
    in-flight handlers the --grace time to finish; a second one releases their jobs at once.
    On a terminal, a live line under the log shows the counters.
    """
    state = ctx.ensure_object(CliState)
    found = load_app(app)  # first: the app may configure logging as it is imported
    console = _rich_console(state.json)
    ctx.call_on_close(_configure_logging(log_level, state.json, console))
    changes: dict[str, Any] = {
        name: value
        for name, value in (
            ("concurrency", concurrency),
            ("ttl", ttl),
            ("renew_every", renew_every),
            ("grace", grace),
            ("isolation", isolation),
            ("timeout", timeout),
            ("poll_interval", poll_interval),
            ("owner", owner),
            ("summary_every", summary_every),
        )
        if value is not None
    }
    if queues:
        changes["queues"] = queues
    if _store_given(ctx, state) or found.url is None:
        changes["url"] = state.store_url
    found.configure(**changes)
    if metrics_port is not None:
        ctx.call_on_close(_serve_metrics(found, metrics_port, metrics_host))
    with _live_progress(found, console):
        found.run(burst=burst)


def _serve_metrics(found: Worker, port: int, host: str) -> Callable[[], None]:
    try:
        served = serve_metrics(found, port, host)
    except InvalidArgument as exc:  # named after the options that gave them
        argument = {"port": "--metrics-port", "host": "--metrics-host"}.get(exc.argument)
        raise InvalidArgument(argument or exc.argument, exc.rule) from None
    except ImportError as exc:
        raise CliError(str(exc)) from exc
    except OSError as exc:
        raise CliError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from exc
    logging.getLogger("tenure").info(
        "worker metrics on %s", served.url, extra={"metrics_port": served.port}
    )
    return served


def _store_given(ctx: click.Context, state: CliState) -> bool:
    """Whether --store / TENURE_STORE_URL was given (else the app's own URL stands)."""
    if state.store_url != DEFAULT_URL:
        return True
    source = ctx.find_root().get_parameter_source("store_url")
    return source not in (None, click.core.ParameterSource.DEFAULT)
