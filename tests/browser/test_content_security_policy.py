"""The pages run under a strict Content-Security-Policy and break none of it.

The chat renders a model's text as Markdown; the policy (no inline script or style,
nothing from other origins) is the second wall behind the renderer. A page that
needed an inline script or style would report a violation in the browser.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job
from sessions.models import AgentSession
from tests.browser.chat_page import chat_send, wait_settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Counts the page's securitypolicyviolation events from its first script on.
COUNT_VIOLATIONS = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.cspViolations.push(e.violatedDirective + " " + e.blockedURI);
});
"""


def watched(page: Any) -> list[str]:
    """The console's CSP refusals, as the page logs them."""
    refusals: list[str] = []
    page.on(
        "console",
        lambda message: (
            refusals.append(message.text)
            if "Content Security Policy" in message.text or "Refused to" in message.text
            else None
        ),
    )
    page.add_init_script(COUNT_VIOLATIONS)
    return refusals


def policy_of(response: Any) -> str:
    policy: str = response.headers.get("content-security-policy", "")
    return policy


def test_the_chat_streams_a_reply_without_a_policy_violation(
    page: Any, site: str, user: Any
) -> None:
    session = AgentSession.objects.create(owner=user, title="Under a policy")
    refusals = watched(page)

    opened = page.goto(f"{site}/sessions/{session.id}/")
    page.wait_for_selector("#conn[data-state='live']")
    chat_send(page, "hello, what can you do?")
    page.wait_for_selector(".msg.assistant.streaming")
    wait_settled(page, session)

    policy = policy_of(opened)
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "run the tests" in page.locator(".msg.assistant").first.inner_text()
    assert page.locator("#conn").inner_text() == "live"  # the websocket is allowed
    assert page.evaluate("window.cspViolations") == []
    assert refusals == []


def test_the_job_page_draws_its_progress_without_an_inline_style(
    page: Any, site: str, user: Any
) -> None:
    job = Job.objects.create(
        owner=user,
        tool="sleepy",
        args={"seconds": 1},
        status=Job.Status.DONE,
        result={"summary": "slept"},
        timeout_s=60,
    )
    refusals = watched(page)

    opened = page.goto(f"{site}/jobs/{job.id}/")
    bar = page.locator("#job-bar")

    assert "style-src 'self'" in policy_of(opened)
    assert bar.evaluate("(el) => el.style.width") == "100%"
    assert page.evaluate("window.cspViolations") == []
    assert refusals == []
