"""Starting a job from the chat shows a live progress bar and the job's final state."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job
from sessions.models import AgentSession
from tests.browser.chat_page import chat_open, chat_send, logged_seqs, rendered_seqs, wait_settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WATCH_BAR = """
() => {
  window.barWidths = [];
  new MutationObserver(() => {
    const bar = document.querySelector('.job-card .progress .bar');
    if (bar && bar.style.width) window.barWidths.push(bar.style.width);
  }).observe(document.getElementById('log'), {subtree: true, attributes: true, childList: true});
}
"""


def test_a_job_shows_moving_progress_and_its_final_state(page: Any, site: str, user: Any) -> None:
    session = AgentSession.objects.create(owner=user, title="Tests")
    chat_open(page, site, session)
    page.evaluate(WATCH_BAR)
    chat_send(page, "run the tests")

    card = page.locator(".job-card")
    card.wait_for()
    wait_settled(page, session, timeout=120)

    job = Job.objects.get(session=session)
    assert card.get_attribute("data-job") == job.id
    assert (
        card.locator(".status").inner_text().lower() == job.status
    )  # exactly what the server says
    widths = page.evaluate("window.barWidths")
    assert len(set(widths)) >= 2, widths  # the bar moved
    if job.status == Job.Status.DONE:
        assert widths[-1] == "100%"
        assert card.locator(".job-summary").inner_text() != ""
    assert card.locator(".stop").count() == 0  # nothing left to stop
    assert card.locator(".partials li").count() > 0  # partial results arrived
    assert rendered_seqs(page) == logged_seqs(session)


def test_the_stop_button_cancels_a_running_job(page: Any, site: str, user: Any) -> None:
    session = AgentSession.objects.create(owner=user, title="Stop")
    chat_open(page, site, session)
    chat_send(page, "run the tests")
    stop = page.locator(".job-card .stop")
    stop.wait_for()
    stop.click()
    wait_settled(page, session, timeout=120)

    job = Job.objects.get(session=session)
    assert page.locator(".job-card .status").inner_text().lower() == job.status
    assert job.status in {Job.Status.CANCELLED, Job.Status.DONE}  # it may have won the race
