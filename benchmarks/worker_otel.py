"""The worker's no-op job rate with and without OpenTelemetry, in paired rounds.

Each round submits ``--jobs`` no-op jobs to a fresh SQLite file store and times
``Worker.run(burst=True)``; rounds alternate between the worker as it runs without
opentelemetry-api (its spans module switched off) and with the API installed but no SDK
(the API's non-recording spans: what a library user gets until they configure tracing),
and, with ``--sdk``, an SDK provider with a no-op span processor (spans recorded, exported
nowhere). With ``--traced`` (needs ``--sdk``) the jobs are submitted inside a span, so each
carries a trace context in its headers and the worker's handler spans continue it (issue
#20: the extraction is in the measured rounds). Prints the median jobs/s of each and the
ratio of medians.

    python benchmarks/worker_otel.py [--jobs 2000] [--rounds 5] [--sdk [--traced]]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import tenure
from tenure.worker import _telemetry


def _round(jobs: int, directory: Path, index: int, traced: bool) -> float:
    url = f"sqlite:///{directory / f'round{index}.db'}"
    store = tenure.connect(url)
    with contextlib.ExitStack() as stack:
        if traced:  # a current span: submit_many puts its context in every job's headers
            api = sys.modules["opentelemetry.trace"]
            stack.enter_context(api.get_tracer("bench").start_as_current_span("submit"))
        store.submit_many([tenure.JobSpec(f"j{n}", queue="q") for n in range(jobs)])
    store.close()
    worker = tenure.Worker(url, concurrency=8, summary_every=0)
    worker.register("q", lambda ctx: None)
    started = time.perf_counter()
    worker.run(burst=True, install_signal_handlers=False)
    elapsed = time.perf_counter() - started
    assert worker.stats()["completed"] == jobs
    return jobs / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sdk", action="store_true")
    parser.add_argument("--traced", action="store_true")
    args = parser.parse_args()
    if args.traced and not args.sdk:
        raise SystemExit("--traced needs --sdk (without a provider no span is current)")
    api = _telemetry._trace
    if api is None:
        raise SystemExit("needs opentelemetry-api installed: pip install 'tenure[otel]'")
    if args.sdk:
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

        provider = TracerProvider()
        provider.add_span_processor(SpanProcessor())
        api.set_tracer_provider(provider)
    rates: dict[str, list[float]] = {"without": [], "with": []}
    with tempfile.TemporaryDirectory() as tmp:
        count = 0
        for index in range(args.rounds):
            for name in ("without", "with") if index % 2 == 0 else ("with", "without"):
                _telemetry._trace = None if name == "without" else api  # type: ignore[assignment]
                count += 1
                rates[name].append(_round(args.jobs, Path(tmp), count, args.traced))
    without, with_ = (statistics.median(rates[n]) for n in ("without", "with"))
    label = "SDK, no-op processor" if args.sdk else "API, no SDK"
    label += ", jobs traced from their submit" if args.traced else ""
    print(f"without OpenTelemetry: {without:,.0f} jobs/s  {[round(r) for r in rates['without']]}")
    print(f"with ({label}): {with_:,.0f} jobs/s  {[round(r) for r in rates['with']]}")
    print(f"with / without (ratio of medians): {with_ / without:.3f}")


if __name__ == "__main__":
    main()
