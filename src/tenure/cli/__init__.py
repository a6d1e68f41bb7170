"""The ``tenure`` command line (also ``python -m tenure``).

Commands live in small modules and are listed in `COMMANDS` as ``"module:attribute"``; a
command is imported only when it runs (or when ``--help`` lists it). Adding one is one line
here plus its module, e.g. ``"worker": "tenure.cli._worker:worker"``.

Shared by every command (`CliState`, `common_options`):

* ``--store URL`` (``TENURE_STORE_URL``, default ``sqlite:///tenure.db``) and ``--json``
  (``TENURE_JSON``), accepted before or after the command name;
* every other option is mirrored by an environment variable ``TENURE_<COMMAND>_<OPTION>``
  named after its long option (``tenure jobs list --state`` ← ``TENURE_JOBS_LIST_STATE``;
  a repeatable option takes a space-separated list), shown in ``--help`` (`name_envvars`);
* errors: a `TenureError` prints one line on stderr (a JSON object with ``--json``) and exits
  with 2 for `InvalidArgument` (like a usage error) or 1 for the others; no traceback. Usage
  errors (unknown command or option, bad value) are JSON on stderr too with ``--json``, and
  a bad value read from an environment variable names the variable: a bad type or range
  (click's) as well as an `InvalidArgument` of the library naming an argument that an
  option of the command gives by the same name (``--ttl`` → ``ttl``).
"""

from __future__ import annotations

import difflib
import importlib
import json
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, TypeVar

import click

from .. import __version__
from .._store import Store
from ..errors import InvalidArgument, TenureError
from ..stores import DEFAULT_URL
from ._output import Output

__all__ = [
    "COMMANDS",
    "ENV_PREFIX",
    "CliError",
    "CliState",
    "CliUsageError",
    "bind_socket",
    "common_options",
    "main",
    "name_envvars",
]

F = TypeVar("F", bound=Callable[..., Any])

ENV_PREFIX = "TENURE"  # of every option's environment variable (`name_envvars`)

# command name -> "module:attribute" of its click command
COMMANDS: dict[str, str] = {
    "chaos": "tenure.cli._chaos:chaos",
    "check": "tenure.cli._chaos:check",
    "dashboard": "tenure.cli._dashboard:dashboard",
    "demo": "tenure.cli._demo:demo",
    "jobs": "tenure.cli._jobs:jobs",
    "migrate": "tenure.cli._migrate:migrate",
    "now": "tenure.cli._jobs:now",
    "queues": "tenure.cli._queues:queues",
    "schedules": "tenure.cli._schedules:schedules",
    "sink": "tenure.cli._sink:sink",
    "worker": "tenure.cli._worker:worker",
}


@dataclass
class CliState:
    """What the global options decided; commands get it with ``@click.pass_obj``."""

    store_url: str = DEFAULT_URL
    json: bool = False
    _store: Store | None = field(default=None, repr=False)
    # The context of the command that runs (the last one `common_options` parsed): where
    # an `InvalidArgument` looks for the option that gave the argument it names.
    command: click.Context | None = field(default=None, repr=False)

    def output(self) -> Output:
        return Output(json_mode=self.json)

    def store(self, *, create: bool = True) -> Store:
        """The store of ``--store``, opened on first use and closed when the command ends.

        ``create=False`` (commands that only read): a store that does not exist is an
        error naming it (`CliError`, exit code 1), and nothing is created."""
        if self._store is None:
            from .. import connect

            if not create:
                from ._probe import probe_store

                found = probe_store(self.store_url)
                if found.exists is False:
                    raise CliError(found.message(), json_mode=self.json, kind="StoreNotFound")

            try:
                self._store = connect(self.store_url)
            except ImportError as exc:  # a backend whose client library is not installed
                raise CliError(str(exc), json_mode=self.json) from exc
            click.get_current_context().call_on_close(self.close)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


class CliError(click.ClickException):
    """An expected failure: one line on stderr (JSON with ``--json``), no traceback.

    Exit code 1 unless ``exit_code`` says otherwise; bad input (`CliUsageError`, or
    ``exit_code=2``) exits with 2, like click's usage errors."""

    def __init__(
        self,
        message: str,
        *,
        exit_code: int | None = None,
        json_mode: bool = False,
        kind: str = "Error",
    ) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code  # type: ignore[misc]  # click declares a ClassVar
        self.json_mode = json_mode
        self.kind = kind

    def show(self, file: IO[Any] | None = None) -> None:
        message = " ".join(self.format_message().split())  # one line, always
        if self.json_mode:
            text = json.dumps({"error": self.kind, "message": message}, ensure_ascii=False)
        else:
            text = f"Error: {message}"
        click.echo(text, file=file, err=file is None)

    @staticmethod
    def from_tenure_error(
        exc: TenureError, *, json_mode: bool, ctx: click.Context | None = None
    ) -> CliError:
        """``exc`` as a CLI error; an `InvalidArgument` naming an argument that an option of
        ``ctx``'s command gave from its environment variable names the variable instead,
        as a bad type does (`_name_the_envvar`)."""
        if not isinstance(exc, InvalidArgument):
            return CliError(str(exc), json_mode=json_mode, kind=type(exc).__name__)
        param = None if ctx is None else _option_named(ctx, exc.argument)
        hint = None if param is None or ctx is None else _envvar_hint(param, ctx)
        message = str(exc) if hint is None else f"{hint}: {exc.rule}"
        return CliUsageError(message, json_mode=json_mode, kind=type(exc).__name__)


def bind_socket(host: str, port: int, *, json_mode: bool = False) -> socket.socket:
    """A socket bound to ``host``:``port`` (0: a port the system picks, read back from the
    socket) for a command that serves HTTP (`tenure sink`, `tenure dashboard`); inheritable,
    not yet listening. `CliError` when the address cannot be had."""
    shown = f"[{host}]" if ":" in host else host
    sock: socket.socket | None = None
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        if sock is not None:
            sock.close()
        raise CliError(
            f"cannot listen on {shown}:{port}: {exc.strerror or exc}", json_mode=json_mode
        ) from exc
    sock.set_inheritable(True)
    return sock


class CliUsageError(CliError):
    """Bad input (`InvalidArgument`): exit code 2."""

    exit_code = 2


def _set_store(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    state = ctx.ensure_object(CliState)
    state.command = ctx  # called for every command with `common_options`, given or not
    if value is not None:
        state.store_url = value


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(CliState).json = True


def common_options(command: F) -> F:
    """``--store`` and ``--json`` after the command name too (``tenure jobs list --json``).

    Given here they override the global ones; they read no environment variable themselves
    (the global options do), so an explicit ``tenure --store X jobs list`` is never
    overridden by ``TENURE_STORE_URL``.
    """
    command = click.option(
        "--json",
        "json_",
        is_flag=True,
        default=False,
        expose_value=False,
        allow_from_autoenv=False,
        callback=_set_json,
        help="Print JSON for scripts (same as the global --json).",
    )(command)
    command = click.option(
        "--store",
        metavar="URL",
        default=None,
        expose_value=False,
        allow_from_autoenv=False,
        callback=_set_store,
        help="Store URL (same as the global --store).",
    )(command)
    return command


def _json_wanted(ctx: click.Context | None, args: Sequence[str] = ()) -> bool:
    """Whether ``--json`` (or ``TENURE_JSON``) was asked for, also when parsing failed."""
    if ctx is not None:
        state = ctx.find_object(CliState)
        if (state is not None and state.json) or ctx.find_root().params.get("json_"):
            return True
    if "--json" in args:
        return True
    return os.environ.get("TENURE_JSON", "").strip().lower() in ("1", "true", "yes", "on")


def _env_word(name: str) -> str:
    return name.lstrip("-").replace("-", "_").upper()


def name_envvars(command: click.Command, prefix: str) -> click.Command:
    """Give each option of ``command`` the variable ``<prefix>_<LONG OPTION>``, and each
    subcommand's options theirs after its own name (``tenure jobs submit --max-attempts``:
    ``TENURE_JOBS_SUBMIT_MAX_ATTEMPTS``), shown in ``--help``.

    Named here, not by click's ``auto_envvar_prefix``: click names the variable after the
    Python parameter, so an option read into another name (``--state`` into ``state_``,
    ``--queue`` into ``queues``) read a variable no doc mentions. An option that names its
    own variable (``--store``: ``TENURE_STORE_URL``) keeps it; one with
    ``allow_from_autoenv=False``, or without a long name, reads none. Naming again changes
    nothing, so a command may pass through here each time it is loaded."""
    for param in command.params:
        if not isinstance(param, click.Option) or not param.allow_from_autoenv:
            continue
        long = next((opt for opt in param.opts if opt.startswith("--")), None)
        if param.envvar is None and long is not None:
            param.envvar = f"{prefix}_{_env_word(long)}"
        param.show_envvar = param.envvar is not None
    if isinstance(command, click.Group):
        for name, subcommand in command.commands.items():
            name_envvars(subcommand, f"{prefix}_{_env_word(name)}")
    return command


def _envvar_hint(param: click.Parameter, ctx: click.Context) -> str | None:
    """``TENURE_WORKER_TTL (the environment variable of --ttl)`` when ``param``'s value in
    ``ctx`` came from its environment variable, else None."""
    if not isinstance(param, click.Option) or param.name is None:
        return None
    if ctx.get_parameter_source(param.name) is not click.core.ParameterSource.ENVIRONMENT:
        return None
    envvar = param.envvar
    if isinstance(envvar, (list, tuple)):
        envvar = next((name for name in envvar if os.environ.get(name) is not None), envvar[0])
    if not envvar:
        return None
    return f"{envvar} (the environment variable of {' / '.join(param.opts)})"


def _option_named(ctx: click.Context, argument: str) -> click.Option | None:
    """The option of ``ctx``'s command that gives the library's ``argument`` (``ttl``,
    ``poll_interval``, ``--delay``): the one whose parameter or long name is that word."""
    word = _env_word(argument).lower()
    for param in ctx.command.params:
        if not isinstance(param, click.Option):
            continue
        longs = [_env_word(opt).lower() for opt in param.opts if opt.startswith("--")]
        if param.name == word or word in longs:
            return param
    return None


def _name_the_envvar(exc: click.BadParameter) -> None:
    """A bad value that came from an environment variable: say which variable. One from
    the command line names the option alone (click's own hint names the variable whenever
    ``--help`` shows it, wherever the value came from); a missing one keeps click's hint,
    which says the variable can give it."""
    param, ctx = exc.param, exc.ctx
    if not isinstance(param, click.Option) or ctx is None or param.name is None:
        return
    if isinstance(exc, click.MissingParameter):
        return
    hint = _envvar_hint(param, ctx)
    if hint is not None:
        exc.param_hint = hint
    elif ctx.get_parameter_source(param.name) is not click.core.ParameterSource.ENVIRONMENT:
        exc.param_hint = " / ".join(f"'{opt}'" for opt in param.opts)


def _as_json(exc: click.UsageError) -> CliError:
    message = exc.format_message()
    return CliError(message, exit_code=exc.exit_code, json_mode=True, kind="UsageError")


class TenureGroup(click.Group):
    """Loads commands from `COMMANDS` on demand and turns `TenureError` into `CliError`;
    usage errors name the environment variable a bad value came from, and are JSON with
    ``--json``."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0]) if args else ""
        unknown = args and not ctx.resilient_parsing and not name.startswith("-")
        if unknown and self.get_command(ctx, name) is None:
            # click suggests only among the commands it has loaded; these load on demand.
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=3)
            hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
            ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        given = list(args)  # parsing consumes the list
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            if isinstance(exc, click.BadParameter):
                _name_the_envvar(exc)
            if _json_wanted(None, given):
                raise _as_json(exc) from exc
            raise

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in COMMANDS:
            module_name, _, attribute = COMMANDS[cmd_name].partition(":")
            command = getattr(importlib.import_module(module_name), attribute)
            assert isinstance(command, click.Command), COMMANDS[cmd_name]
        if command is not None:  # every way to a command names its variables
            name_envvars(command, f"{ENV_PREFIX}_{_env_word(cmd_name)}")
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TenureError as exc:
            state = ctx.find_object(CliState)
            json_mode, command = bool(state and state.json), state.command if state else None
            raise CliError.from_tenure_error(exc, json_mode=json_mode, ctx=command) from exc
        except CliError:
            raise
        except click.UsageError as exc:
            if isinstance(exc, click.BadParameter):
                _name_the_envvar(exc)
            if _json_wanted(exc.ctx or ctx):
                raise _as_json(exc) from exc
            raise


# No auto_envvar_prefix: click would name variables after the Python parameters
# (`name_envvars` names them after the options instead).
@click.group(
    cls=TenureGroup,
    context_settings={
        "help_option_names": ["-h", "--help"],
        "show_default": True,
    },
)
@click.option(
    "--store",
    "store_url",
    metavar="URL",
    envvar="TENURE_STORE_URL",
    show_envvar=True,
    default=DEFAULT_URL,
    help="The store: sqlite:///path.db, postgresql://..., redis://...",
)
@click.option(
    "--json",
    "json_",
    is_flag=True,
    envvar="TENURE_JSON",
    show_envvar=True,
    default=False,
    help="Print JSON for scripts instead of tables.",
)
# No variable: TENURE_VERSION would print the version in place of any command.
@click.version_option(__version__, "--version", "-V", prog_name="tenure", allow_from_autoenv=False)
@click.pass_context
def main(ctx: click.Context, store_url: str, json_: bool) -> None:
    """tenure: jobs on distributed workers under expiring leases with fencing tokens.

    Start with `tenure demo`: it shows, in a few lines, a stalled worker whose late write
    and completion are both refused.
    """
    state = ctx.ensure_object(CliState)
    state.store_url = store_url
    state.json = json_


name_envvars(main, ENV_PREFIX)  # the global options; each command as it loads (get_command)
