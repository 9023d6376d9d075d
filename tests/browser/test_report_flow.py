"""Ask for a report, close the page, come back later: read it inline and download it."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job
from sessions.models import AgentSession
from tests.browser.chat_page import (
    assistant_texts,
    chat_open,
    chat_send,
    session_settled,
    wait_settled,
)
from tests.conftest import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_report_can_be_read_and_downloaded_after_coming_back(
    page: Any, site: str, user: Any, tmp_path: Any
) -> None:
    session = AgentSession.objects.create(owner=user, title="Report")
    chat_open(page, site, session)
    chat_send(page, "write a report on the state of the shop library")
    page.locator(".job-card").wait_for()
    context = page.context
    page.close()  # leave while the report is being written

    wait_until(lambda: session_settled(session), timeout=120, interval=0.2)
    job = Job.objects.get(session=session, tool="write_report")
    assert job.status == Job.Status.DONE, (job.status, job.error_message)

    page = context.new_page()
    chat_open(page, site, session)
    wait_settled(page, session)
    card = page.locator(f".job-card[data-job='{job.id}']")
    card.locator(".read-report").click()
    report = card.locator(".report")
    report.wait_for()
    assert job.result is not None
    first_line = job.result["markdown"].strip().splitlines()[0].lstrip("# ").strip()
    assert first_line in report.inner_text()

    with page.expect_download() as download_info:
        card.locator(".download-report").click()
    saved = tmp_path / "report.md"
    download_info.value.save_as(saved)
    assert saved.read_text() == job.result["markdown"]


@pytest.mark.parametrize(
    "request_text",
    [
        "Please run the tests in the workspace and write a report on them.",
        "run the test suite and give me a report",
        "Write me a report on the tests",
    ],
)
def test_asking_for_a_report_on_the_tests_runs_them_and_leaves_the_report(
    page: Any, site: str, user: Any, tmp_path: Any, request_text: str
) -> None:
    session = AgentSession.objects.create(owner=user, title="Tests and report")
    chat_open(page, site, session)
    chat_send(page, request_text)
    page.locator(".job-card").nth(1).wait_for()
    tests = Job.objects.get(session=session, tool="run_tests")
    report = Job.objects.get(session=session, tool="write_report")
    cards = page.locator(".job-card").evaluate_all("cards => cards.map(c => c.dataset.job)")
    assert cards == [tests.id, report.id]
    context = page.context
    page.close()  # come back later

    wait_until(lambda: session_settled(session), timeout=180, interval=0.2)
    # The report's completion enters the conversation after its job has ended.
    wait_until(
        lambda: "The report is ready" in " ".join(assistant_texts(session)),
        timeout=60,
        interval=0.2,
    )
    report.refresh_from_db()
    assert report.dependency_ids == [tests.id]
    assert report.status == Job.Status.DONE, (report.status, report.error_message)
    assert report.result is not None and report.result["source_job_ids"] == [tests.id]
    said = " ".join(assistant_texts(session))
    assert f"waits for {tests.id}" in said and "The report is ready" in said

    page = context.new_page()
    chat_open(page, site, session)
    wait_settled(page, session)
    card = page.locator(f".job-card[data-job='{report.id}']")
    card.locator(".read-report").click()
    shown = card.locator(".report")
    shown.wait_for()
    assert f"Test results ({tests.id})" in shown.inner_text()
    with page.expect_download() as download_info:
        card.locator(".download-report").click()
    saved = tmp_path / "report.md"
    download_info.value.save_as(saved)
    assert saved.read_text() == report.result["markdown"]
