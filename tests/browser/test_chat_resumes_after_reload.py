"""Reloading mid-run shows the whole history and follows the run to its end."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job
from sessions.models import AgentSession
from tests.browser.chat_page import chat_open, chat_send, logged_seqs, rendered_seqs, wait_settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reload_mid_run_resumes(page: Any, site: str, user: Any) -> None:
    session = AgentSession.objects.create(owner=user, title="Reload")
    chat_open(page, site, session)
    chat_send(page, "run the tests")
    page.locator(".job-card").wait_for()

    page.reload()
    page.wait_for_selector("#conn[data-state=live]")
    page.wait_for_selector(".msg.user .bubble:has-text('run the tests')")
    wait_settled(page, session, timeout=120)

    job = Job.objects.get(session=session)
    assert page.locator(".job-card .status").inner_text().lower() == job.status
    assert rendered_seqs(page) == logged_seqs(session)
    stored = page.evaluate(f"JSON.parse(localStorage.getItem('agentsite.stream.{session.id}'))")
    assert stored["seq"] == logged_seqs(session)[-1]
