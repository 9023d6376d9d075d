"""Ask for a report, close the page, come back later: read it inline and download it."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job
from sessions.models import AgentSession
from tests.browser.chat_page import chat_open, chat_send, wait_settled

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

    from tests.browser.chat_page import session_settled
    from tests.conftest import wait_until

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
