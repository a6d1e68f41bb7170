"""``tenure chaos`` (run workers under a seeded nemesis, record a history, check it) and
``tenure check HISTORY`` (verify I1-I5, and I6 with queue limits, on a recorded
history). See docs/reliability.md.

Both print the counts, one line per invariant, and end with two lines: the verdict and the
report's path (``tenure chaos`` prints the ``tenure dashboard`` command that shows the
run's store just before them, unless the store was a server of the run's own, gone
since; preceded by ``pip install 'tenure[dashboard]'`` when the dashboard's dependencies
are not installed). Exit status: 0 for a VALID verdict, 1 for INVALID (an invariant was
violated), 3 for UNPROVEN (nothing was violated but the faults did not bite), 2 for bad
options.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import click

from ..stores import DEFAULT_URL
from . import CliError, CliState, common_options
from ._dashboard import INSTALL_DASHBOARD, dashboard_hint, dashboard_missing
from ._params import Duration

__all__ = ["chaos", "check"]

EXIT = {"VALID": 0, "INVALID": 1, "UNPROVEN": 3}

_NO_PNG_HELP = (
    "Do not screenshot the report (report.png needs headless Chromium; without it the run "
    "says so and writes the HTML report alone)."
)
_CHROMIUM_HELP = (
    "The browser that screenshots the report: a path or command (default: chromium, "
    "chromium-browser, google-chrome or chrome on PATH; also TENURE_CHROMIUM)."
)


def _why_no_png(wanted: bool, png: Path | None, browser: str | None) -> str | None:
    """One line on why there is no PNG of the report (None when there is one, or none was
    wanted)."""
    if not wanted or png is not None:
        return None
    from ..chaos import CHROMIUM_HINT, chromium

    found = chromium(browser)
    if found is None:
        named = browser or os.environ.get("TENURE_CHROMIUM")
        if named and named.strip().lower() == "none":
            return "no png: TENURE_CHROMIUM=none"
        where = f"{named!r} was not found" if named else "Chromium is not installed"
        return f"no png: {where}; {CHROMIUM_HINT}"
    return f"no png: {found} did not produce a screenshot; the HTML report is complete"


def dashboard_command(store_url: str) -> str:
    """The ``tenure dashboard`` command that shows a run's store (its password, if the URL
    has one, left for the reader to fill in)."""
    parts = urlsplit(store_url)
    if parts.password:
        host = parts.netloc.rpartition("@")[2]
        netloc = f"{parts.username or ''}:PASSWORD@{host}"
        store_url = urlunsplit(parts._replace(netloc=netloc))
    return f"tenure dashboard --store {shlex.quote(store_url)}"


def _finish(
    state: CliState,
    verdict: Any,
    report: Path,
    png: Path | None,
    no_png: str | None,
    look: str | None = None,
) -> None:
    if state.json:
        violated = verdict.by_invariant()
        click.echo(
            json.dumps(
                {
                    "verdict": verdict.status,
                    "headline": verdict.headline(),
                    "counts": verdict.counts,
                    "faults": verdict.faults,
                    "reexecutions": {
                        "store_faults": verdict.counts.get("reexecutions_store_faults", 0),
                        "all": verdict.counts.get("reexecutions", 0),
                        "store_outages": verdict.counts.get("store_outages", 0),
                        "failover": verdict.counts.get("reexecutions_failover", 0),
                    },
                    # Each invariant the verdict lists (I6 only with queue limits), held or
                    # not, and the limited queues' peaks and draws: what the text's lines say.
                    "invariants": {
                        key: {"name": name, "violations": len(violated[key])}
                        for key, name in verdict.shown_invariants().items()
                    },
                    "limits": verdict.limits,
                    "top_token": verdict.top_token(),
                    "violations": [
                        {"invariant": v.invariant, "job": v.job, "message": v.message, "ops": v.ops}
                        for v in verdict.violations
                    ],
                    "report": str(report),
                    "png": str(png) if png else None,
                    "no_png": no_png,
                    "dashboard": look,
                    "dashboard_install": (
                        INSTALL_DASHBOARD if look and dashboard_missing() else None
                    ),
                },
                default=str,
            )
        )
    else:
        for line in verdict.lines():
            click.echo(line)
        if png is not None:
            click.echo(f"png: {png}")
        elif no_png is not None:
            click.echo(no_png)
        if look is not None:
            click.echo(f"look at its jobs: {dashboard_hint(look)}")
        click.echo(f"verdict: {verdict.headline()}")
        click.echo(f"report: {report}")
    sys.exit(EXIT[verdict.status])


@click.command()
@click.option("--workers", type=click.IntRange(1, 64), default=4, help="Worker processes.")
@click.option("--jobs", type=click.IntRange(1, 1_000_000), default=200, help="Jobs to run.")
@click.option(
    "--ttl", type=Duration(0.2, 600), default=2.0, help="Lease TTL, e.g. 2, 2s, 1m (seconds)."
)
@click.option(
    "--duration", type=Duration(1, 86400), default=20.0, help="How long faults go on, e.g. 20s, 5m."
)
@click.option(
    "--seed", type=int, default=None, help="Seed of the fault schedule (default: random)."
)
@click.option(
    "--unsafe",
    type=click.Choice(["client-clock", "no-fence"]),
    default=None,
    help="Break the protocol on purpose: the check must then fail.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory for the history, report and logs (default: ./tenure-chaos-<seed>).",
)
@click.option("--concurrency", type=click.IntRange(1, 100), default=4, help="Jobs per worker.")
@click.option(
    "--fault-interval",
    type=Duration(0.05, 3600),
    default=2.0,
    help="Mean time between faults, e.g. 2s (a number alone: seconds).",
)
@click.option("--storm", type=click.IntRange(0, 64), default=6, help="Claim-storm processes.")
@click.option(
    "--faults",
    default=None,
    metavar="KIND,...",
    help="Only these fault kinds (pause, pause-handler, pause-renew, pause-complete, storm, "
    "skew, kill, proxy-delay, proxy-drop, store-pause; and, only when named: cancel (random "
    "cancels and requeues through the store), store-restart, store-kill (these two run the "
    "store on a server of the run's own, never the --store one), failover (PostgreSQL: the "
    "run's own primary killed -9 and its streaming replica promoted).",
)
@click.option(
    "--work", type=Duration(0, 60), default=0.2, help="Longest short-job work, e.g. 0.2 (seconds)."
)
@click.option(
    "--drain-timeout",
    type=Duration(1, 86400),
    default=120.0,
    help="How long to wait for the queue to drain after the faults, e.g. 120s, 5m.",
)
@click.option("--no-faketime", is_flag=True, help="Do not run workers under faketime.")
@click.option(
    "--workload",
    type=click.Choice(["jobs", "locks", "flow"]),
    default="jobs",
    help="jobs: workers run a queue of jobs. locks: WORKERS processes take one named lock "
    "(tenure.Lock) over and over, each holding writing to the fenced sink with its token; "
    "no storms, cancels or pause-complete. flow: the jobs workload with priorities, "
    "queue limits (two queues limited to 1 and 3 leases) and a queue rate (4 a second, "
    "burst 2), which I6 checks, and jobs with a timeout of their own that their handler "
    "overruns.",
)
@click.option("--no-png", is_flag=True, help=_NO_PNG_HELP)
@click.option("--chromium", "browser", metavar="PATH", default=None, help=_CHROMIUM_HELP)
@click.option("--dry-run", is_flag=True, help="Print the fault schedule (JSON) and exit.")
@common_options
@click.pass_obj
def chaos(
    state: CliState,
    workers: int,
    jobs: int,
    ttl: float,
    duration: float,
    seed: int | None,
    unsafe: str | None,
    out: str | None,
    concurrency: int,
    fault_interval: float,
    storm: int,
    faults: str | None,
    work: float,
    drain_timeout: float,
    no_faketime: bool,
    workload: str,
    no_png: bool,
    browser: str | None,
    dry_run: bool,
) -> None:
    """Run workers under a seeded nemesis and check the invariants of the history.

    Starts WORKERS `tenure.Worker` processes on the store (--store), the reference fenced
    sink, claim-storm processes and a nemesis (pauses, claim storms, clock skew, kills,
    network and store faults), then checks I1-I5. Without --store, a fresh SQLite file in
    the output directory. With --faults store-restart / store-kill on PostgreSQL or Redis,
    the store runs on a throwaway server the run starts (initdb + pg_ctl, redis-server)
    and restarts; --store then gives only its kind and options (schema, key prefix).
    With --workload locks, the processes take one named lock instead (docs/locks.md); with
    --workload flow, the jobs have priorities and timeouts over limited and rated queues.
    """
    from ..chaos import ChaosOptions, run_chaos, schedule_for

    if seed is None:
        seed = random.SystemRandom().randrange(1_000_000)
    directory = Path(out) if out else Path(f"tenure-chaos-{seed}")
    store_url = state.store_url
    if store_url == DEFAULT_URL and not os.environ.get("TENURE_STORE_URL"):
        store_url = f"sqlite:///{(directory / 'store.db').resolve()}"
    options = ChaosOptions(
        store_url=store_url,
        workers=workers,
        jobs=jobs,
        ttl=ttl,
        duration=duration,
        seed=seed,
        unsafe=unsafe,
        out=directory,
        concurrency=concurrency,
        fault_interval=fault_interval,
        storm=storm,
        work=work,
        drain_timeout=drain_timeout,
        faketime=not no_faketime,
        workload=workload,
        kinds=tuple(k.strip() for k in faults.split(",") if k.strip()) if faults else None,
        png=not no_png,
        chromium=browser,
    )
    try:
        options.check()
        schedule = schedule_for(options)
    except ValueError as exc:
        raise CliError(str(exc), exit_code=2, json_mode=state.json) from exc
    if dry_run:
        click.echo(json.dumps({"seed": seed, "faults": [f.as_json() for f in schedule]}))
        return

    def echo(text: str) -> None:
        click.echo(text, err=state.json)

    try:
        result = run_chaos(options, echo)
    except (RuntimeError, OSError, ImportError) as exc:
        raise CliError(f"chaos run failed: {exc}", json_mode=state.json) from exc
    why = _why_no_png(not no_png, result.png, browser)
    look = None if options.store_faults else dashboard_command(store_url)  # own server: gone
    _finish(state, result.verdict, result.report, result.png, why, look)


@click.command()
@click.argument("history", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--report",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where to write the HTML report (default: report.html next to HISTORY).",
)
@click.option("--no-png", is_flag=True, help=_NO_PNG_HELP)
@click.option("--chromium", "browser", metavar="PATH", default=None, help=_CHROMIUM_HELP)
@common_options
@click.pass_obj
def check(
    state: CliState, history: str, report: str | None, no_png: bool, browser: str | None
) -> None:
    """Check a chaos history (JSON lines) against the invariants I1-I5."""
    from ..chaos import check_history, read_history, run_origin, write_report

    path = Path(history)
    events = list(read_history(path))
    verdict = check_history(events)
    target = Path(report) if report else path.with_name("report.html")
    page, png = write_report(
        verdict, target, png=not no_png, origin=run_origin(events), browser=browser
    )
    _finish(state, verdict, page, png, _why_no_png(not no_png, png, browser))
