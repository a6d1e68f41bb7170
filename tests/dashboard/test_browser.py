"""The dashboard in a real browser (Playwright for Python driving the system's Chromium,
headless), served by a real ``tenure dashboard`` process, over a store filled by a real
worker run: every page shows what the store holds, the jobs table refreshes itself without
reloading the page, hostile values stay text."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import tenure
from tests.backends import Backend
from tests.dashboard._support import Running, dashboard_server, require_browser

pytestmark = pytest.mark.slow

XSS_ID = '<script>window.__xss=1</script>"onmouseover="window.__xss=2'


def _fill(url: str, store: tenure.Store) -> None:
    """A short real run: a worker completes the emails, buries a poison report."""
    for index in range(5):
        store.submit(f"email-{index}", {"to": f"user{index}@example.com"}, queue="emails")
    store.submit("report-poison", {"month": "2026-11"}, queue="reports", max_attempts=1)
    worker = tenure.Worker(url, concurrency=2, ttl=10, poll_interval=0.1)

    @worker.handler("emails")
    def send(ctx: tenure.JobContext) -> dict[str, Any]:
        return {"sent": ctx.payload["to"]}

    @worker.handler("reports")
    def report(ctx: tenure.JobContext) -> None:
        raise RuntimeError("the printer </textarea> is on fire")

    worker.run(burst=True, install_signal_handlers=False)
    store.submit("waiting", {"n": 1}, queue="emails")
    store.submit("held", {"n": 2}, queue="reports")
    assert store.claim("held", "holder-7", 600) is not None
    store.submit(XSS_ID, {"html": "<img src=x onerror=window.__xss=3>"}, queue="emails")


@pytest.fixture
def served(backend: Backend, url: str, real_store: tenure.Store) -> Iterator[Running]:
    _fill(url, real_store)
    with dashboard_server(url, "--refresh", "0.5") as running:
        yield running


@pytest.fixture
def page(served: Running) -> Iterator[Any]:
    browser_path = require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=browser_path, headless=True, args=["--no-sandbox"]
        )
        try:
            opened = browser.new_page()
            yield opened
        finally:
            browser.close()


def test_every_page_in_a_browser(served: Running, page: Any, real_store: tenure.Store) -> None:
    base = served.base
    page.goto(f"{base}/queues")
    queues = page.inner_text("main")
    assert "emails" in queues
    assert "reports" in queues
    row = page.inner_text("tr.queue-row:has-text('reports')")
    assert row.split("\t")[:4] == ["reports", "0", "0", "1"], row  # held is leased now

    page.goto(f"{base}/jobs")
    table = page.inner_text("#jobs-table")
    for job_id in ("email-0", "email-4", "report-poison", "held", "waiting"):
        assert job_id in table
    page.goto(f"{base}/jobs?state=dead")
    assert page.locator("tr.job-row").count() == 1
    assert "report-poison" in page.inner_text("#jobs-table")

    page.goto(f"{base}/job?id=held")
    details = page.inner_text("dl.job")
    assert "holder-7" in details
    assert "leased" in details
    assert " left" in page.inner_text(".lease-left")  # time left by the store's clock

    page.goto(f"{base}/job?id=report-poison")
    assert "dead" in page.inner_text("dl.job")
    assert "the printer </textarea> is on fire" in page.inner_text("pre.error")
    # Its attempt history: one bar (generation 1, failed), and the row with its error.
    assert page.locator(".timeline .bar").count() == 1
    assert "failed" in page.inner_text("table.attempts")
    assert "the printer </textarea> is on fire" in page.inner_text("table.attempts")
    timeline = page.locator(".timeline").screenshot()
    assert len(set(timeline[100:])) > 20  # drawn, not blank
    page.goto(f"{base}/job?id=email-3")
    assert "user3@example.com" in page.inner_text("pre.result")
    png = page.screenshot(full_page=True)
    assert len(png) > 5_000
    assert len(set(png[100:])) > 50


def test_the_jobs_table_refreshes_without_reloading(
    served: Running, page: Any, real_store: tenure.Store
) -> None:
    page.goto(f"{served.base}/jobs?queue=emails")
    page.wait_for_function("() => window.htmx !== undefined")
    page.evaluate("() => { window.__same_page = 'yes'; }")
    assert "fresh-job" not in page.inner_text("#jobs-table")
    real_store.submit("fresh-job", queue="emails")
    page.wait_for_selector("#jobs-table >> text=fresh-job", timeout=15_000)
    assert page.evaluate("() => window.__same_page") == "yes"  # no reload happened
    held = real_store.claim("fresh-job", "late-worker", 60)
    assert held is not None
    page.wait_for_selector("tr.job-row:has-text('late-worker')", timeout=15_000)
    assert page.evaluate("() => window.__same_page") == "yes"
    # a job's page follows its lease too
    page.goto(f"{served.base}/job?id=fresh-job")
    page.evaluate("() => { window.__same_page = 'job'; }")
    assert "late-worker" in page.inner_text("#job-summary")
    real_store.release(held)
    page.wait_for_selector("#job-summary >> text=none held", timeout=15_000)
    assert page.evaluate("() => window.__same_page") == "job"


def test_hostile_values_stay_text_in_the_browser(served: Running, page: Any) -> None:
    page.goto(f"{served.base}/jobs")
    cell = page.locator("td.id", has_text=XSS_ID)
    assert cell.inner_text() == XSS_ID
    cell.hover()  # an injected onmouseover would fire here
    page.goto(f"{served.base}/job?" + str(httpx.QueryParams({"id": XSS_ID})))
    assert page.inner_text("h1 code") == XSS_ID
    assert "<img src=x onerror=window.__xss=3>" in page.inner_text("pre.payload")
    time.sleep(0.3)  # give an injected handler the time to run
    assert page.evaluate("() => window.__xss") is None


def test_metrics_over_http_from_the_server(served: Running) -> None:
    answer = httpx.get(f"{served.base}/metrics", timeout=10)
    assert answer.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(answer.text)}
    assert families["tenure_store_up"].samples[0].value == 1
    jobs = {
        (s.labels["queue"], s.labels["state"]): s.value for s in families["tenure_jobs"].samples
    }
    assert jobs[("reports", "leased")] == 1
    assert jobs[("emails", "ready")] == 2


def test_cancel_a_leased_job_and_requeue_a_dead_one_by_clicking(
    served: Running, page: Any, real_store: tenure.Store
) -> None:
    real_store.submit("to-cancel", {"n": 3}, queue="emails")
    lease = real_store.claim("to-cancel", "clicked-worker", 600)
    assert lease is not None
    page.goto(f"{served.base}/job?id=to-cancel")
    assert "leased" in page.inner_text("dl.job")
    page.click("a.action-cancel")
    assert "Cancel job to-cancel?" in page.inner_text("p.question")
    page.click("form button[type=submit]")
    page.wait_for_url("**/job?id=to-cancel")
    assert "cancelled" in page.inner_text("dl.job")
    assert real_store.get("to-cancel").state == "cancelled"
    with pytest.raises(tenure.LeaseLost) as lost:  # its holder loses the lease
        real_store.renew(lease)
    assert lost.value.reason == "cancelled"
    # The dead jobs view, with its requeue button.
    page.click("header a.nav-dead")
    page.click("tr.job-row:has-text('report-poison') a.action-requeue")
    page.click("form button[type=submit]")
    page.wait_for_url("**/job?id=report-poison")
    assert "ready" in page.inner_text("dl.job")
    assert real_store.get("report-poison").state == "ready"
