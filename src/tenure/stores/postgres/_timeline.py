"""The refusal of sql/_next_generation.sql as the error to raise: a claim that would take a
job's generation to the next timeline's base (2^40 claims of one job per timeline)."""

from __future__ import annotations

import re

from ...errors import GenerationExhausted

__all__ = ["TIMELINE_LIMIT", "timeline_limit"]

# The words of sql/_next_generation.sql's error (they start as _timeline.sql's).
TIMELINE_LIMIT = "tenure timeline limit"
_WORDS = re.compile(r'generation (\d+), timeline (\d+), job (.*)"')


def timeline_limit(operation: str, exc: BaseException) -> GenerationExhausted:
    """The claim was refused and nothing changed (the failing cast's text names the job)."""
    found = _WORDS.search(str(exc).splitlines()[0] if str(exc) else "")
    generation, timeline, job = (int(found[1]), int(found[2]), found[3]) if found else (0, 0, "?")
    return GenerationExhausted(
        job,
        generation - 1,
        f"{operation}: job {job!r} is at generation {generation - 1} on PostgreSQL timeline "
        f"{timeline}: its next generation, {generation}, would be the base of timeline "
        f"{timeline + 1} (2^40 claims of one job per timeline), so a promotion could issue "
        "it again; the claim is refused and nothing changed. The job refuses new claims: "
        "submit the work again under a new job id (read 'Failover' in docs/postgres.md)",
    )
