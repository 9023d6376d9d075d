"""Approvals and questions in the browser: the agent asks, the user answers on a card.

Real turn and tool workers behind a live daphne; the offline model calls
``start_run_tests`` for "run the tests" and ``ask_user`` for "ask me …". The
suite lets agents run tools at once (``tests/environment.py``); these tests
require approval of run_tests per user, as an operator would in the admin.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from jobs.models import Job
from sessions.approvals import approvals_expire, question_ask
from sessions.models import AgentSession, Approval, Run, ToolApprovalRule
from tests.browser.chat_page import chat_open, chat_send, logged_seqs, page_until
from tests.browser.conftest import login_context
from tests.browser.test_content_security_policy import watched
from tests.conftest import api_client_for, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT_MS = 90_000


@pytest.fixture
def approving(user: Any) -> Any:
    ToolApprovalRule.objects.create(user=user, tool="run_tests", mode="always")
    return user


def pending_card(page: Any, n: int) -> Any:
    """The chat's ``n``-th request card (0 first), once it shows as waiting."""
    card = page.locator(".approval-card").nth(n)
    expect(card).to_have_attribute("data-status", "pending", timeout=WAIT_MS)
    return card


def request_of(session: AgentSession, n: int) -> Approval:
    return Approval.objects.filter(session=session).order_by("created_at", "id")[n]


def agent_says(page: Any, text: str) -> None:
    expect(page.locator(".msg.assistant", has_text=text).last).to_be_visible(timeout=WAIT_MS)


def settled(page: Any, requests: int) -> None:
    """Wait for the agent's note on the ``requests``-th request, as step 1 does. The chat
    scrolls to each new message: one landing during a click moves the card under it, and
    the click lands beside its button."""
    notes = page.locator(".msg.assistant", has_text="waits for your approval")
    expect(notes).to_have_count(requests, timeout=WAIT_MS)


def job_done(job_id: str) -> Job:
    wait_until(lambda: Job.objects.get(pk=job_id).is_terminal, timeout=WAIT_MS / 1000)
    return Job.objects.get(pk=job_id)


def listed_badge(page: Any, site: str, session: AgentSession) -> Any:
    page.goto(f"{site}/")
    row = page.locator(".sessions li", has=page.locator(f"a[href='/sessions/{session.id}/']"))
    return row.locator(".badge.waiting")


def test_a_tool_call_is_approved_edited_and_rejected_on_its_cards(
    page: Any, site: str, approving: Any
) -> None:
    session = AgentSession.objects.create(owner=approving, title="Approvals")
    chat_open(page, site, session)

    # 1. Approve. The card shows the tool, its arguments and when it expires.
    chat_send(page, "run the tests")
    card = pending_card(page, 0)
    first = request_of(session, 0)
    assert card.get_attribute("data-approval") == first.id
    expect(card.locator(".approval-tool")).to_have_text("run_tests")
    expect(card.locator(".approval-args")).to_contain_text('"path": "."')
    expect(card.locator(".approval-expiry time")).to_have_attribute(
        "datetime", first.expires_at.isoformat()
    )
    agent_says(page, "waits for your approval")
    # Every call of run_tests needs approval here: allowing it for the session is
    # refused, and the refusal is shown on the card.
    card.locator(".allow-session").check()
    card.locator("button.approve").click()
    expect(card.locator(".approval-error")).to_contain_text("operator", timeout=WAIT_MS)
    expect(card).to_have_attribute("data-status", "pending")
    card.locator(".allow-session").uncheck()
    card.locator("button.approve").click()
    expect(card.locator(".approval-outcome")).to_have_text("Approved by alice")
    expect(card.locator(".approval-error")).to_be_empty()
    expect(card.locator("button")).to_have_count(0)
    assert job_done(first.job_id).status == "done"
    agent_says(page, "The tests finished:")
    expect(page.locator(f".job-card[data-job='{first.job_id}'] .status")).to_have_text("done")

    # 2. Edit: the job runs with the arguments as edited, checked as the model's are.
    chat_send(page, "run the tests")
    card = pending_card(page, 1)
    second = request_of(session, 1)
    settled(page, 2)
    card.locator("button.edit").click()
    arguments = card.locator("textarea.edit-args")
    arguments.fill("{not json")
    card.locator("button.save-edit").click()
    expect(card.locator(".approval-error")).to_contain_text("not valid JSON")
    arguments.fill('{"path": "tests", "nope": 1}')
    card.locator("button.save-edit").click()
    expect(card.locator(".approval-error")).to_have_text(
        "The arguments do not match the input schema of 'run_tests'.", timeout=WAIT_MS
    )
    assert Approval.objects.get(pk=second.id).status == "pending"
    arguments.fill('{"path": "tests/test_pricing.py", "keyword": "discount"}')
    card.locator("button.save-edit").click()
    expect(card.locator(".approval-outcome")).to_have_text(
        "Approved by alice with edited arguments"
    )
    expect(card.locator(".approval-edited")).to_contain_text('"keyword": "discount"')
    job = job_done(second.job_id)
    assert job.status == "done", (job.status, job.error_message)
    assert job.args["path"] == "tests/test_pricing.py" and job.args["keyword"] == "discount"
    expect(page.locator(f".job-card[data-job='{second.job_id}'] .status")).to_have_text(
        "done", timeout=WAIT_MS
    )

    # 3. Reject with a reason: the job never runs, and the agent is told why.
    chat_send(page, "run the tests")
    card = pending_card(page, 2)
    third = request_of(session, 2)
    settled(page, 3)
    card.locator("input.reason").fill("not on Fridays")
    card.locator("button.reject").click()
    expect(card.locator(".approval-outcome")).to_have_text("Rejected by alice: not on Fridays")
    assert job_done(third.job_id).status == "cancelled"
    agent_says(page, "Not approved by alice: not on Fridays")


def test_a_reload_shows_the_pending_card_again_and_its_buttons_still_work(
    page: Any, site: str, approving: Any
) -> None:
    session = AgentSession.objects.create(owner=approving, title="Reload")
    chat_open(page, site, session)
    chat_send(page, "run the tests")
    pending_card(page, 0)
    agent_says(page, "waits for your approval")

    chat_open(page, site, session)  # the log replays: the request is still open
    card = pending_card(page, 0)
    assert page.locator(".approval-card").count() == 1
    card.locator("button.approve").click()
    expect(card.locator(".approval-outcome")).to_have_text("Approved by alice")
    request = request_of(session, 0)
    assert job_done(request.job_id).status == "done"
    agent_says(page, "The tests finished:")

    chat_open(page, site, session)  # and replayed once decided, the card is decided
    card = page.locator(".approval-card")
    expect(card.locator(".approval-outcome")).to_have_text("Approved by alice")
    expect(card).to_have_attribute("data-status", "approved")
    expect(card.locator("button")).to_have_count(0)


def test_a_question_is_answered_in_the_chat_and_the_agent_thanks_you(
    page: Any, site: str, user: Any
) -> None:
    session = AgentSession.objects.create(owner=user, title="Question")
    chat_open(page, site, session)
    chat_send(page, "ask me which colour the report should be")
    card = pending_card(page, 0)
    expect(card.locator(".approval-question")).to_have_text("Which colour the report should be?")
    card.locator("input.answer-input").fill("green")
    card.locator("button.answer").click()
    expect(card.locator(".approval-outcome")).to_have_text("Answered by alice: green")
    agent_says(page, 'Thank you: answered "green"')
    assert Approval.objects.get(session=session).answer == "green"


SCHEMAS: list[tuple[dict[str, Any], str]] = [
    ({"type": "integer", "minimum": 1}, "number"),
    ({"type": "boolean"}, "checkbox"),
    ({"enum": ["red", "green", 3]}, "select"),
    ({"type": "object", "properties": {"a": {"type": "integer"}}}, "textarea"),
]


def test_a_questions_form_follows_the_schema_of_its_answer(page: Any, site: str, user: Any) -> None:
    session = AgentSession.objects.create(owner=user, title="Forms")
    chat_open(page, site, session)
    chat_send(page, "hello")
    run = wait_until(
        lambda: Run.objects.filter(session=session, status=Run.Status.COMPLETED).first(),
        timeout=WAIT_MS / 1000,
    )
    for i, (schema, _) in enumerate(SCHEMAS):
        question_ask(
            session=session,
            run_id=run.id,
            call_id=f"call_{i}",
            question=f"Q{i}?",
            answer_schema=schema,
        )
    cards = [pending_card(page, i) for i in range(len(SCHEMAS))]
    for card, (_, control) in zip(cards, SCHEMAS, strict=True):
        tag = "select" if control == "select" else "textarea" if control == "textarea" else "input"
        field = card.locator(f"{tag}.answer-input")
        assert field.count() == 1
        if tag == "input":
            assert field.get_attribute("type") == control
        expect(card.locator("button.decline")).to_be_visible()

    number, boolean, choice, anything = cards
    number.locator("button.answer").click()
    expect(number.locator(".approval-error")).to_have_text("Enter a number.")
    number.locator(".answer-input").fill("0")
    number.locator("button.answer").click()  # the server's schema check: below minimum
    expect(number.locator(".approval-error")).to_contain_text("schema", timeout=WAIT_MS)
    number.locator(".answer-input").fill("4")
    number.locator("button.answer").click()
    expect(number.locator(".approval-outcome")).to_have_text("Answered by alice: 4")
    boolean.locator(".answer-input").check()
    boolean.locator("button.answer").click()
    expect(boolean.locator(".approval-outcome")).to_have_text("Answered by alice: true")
    choice.locator("select").select_option(label="3")
    choice.locator("button.answer").click()
    expect(choice.locator(".approval-outcome")).to_have_text("Answered by alice: 3")
    anything.locator("button.decline").click()
    expect(anything.locator(".approval-outcome")).to_have_text("Declined by alice")

    answers = {a.question: a.answer for a in Approval.objects.filter(session=session)}
    assert answers == {"Q0?": 4, "Q1?": True, "Q2?": 3, "Q3?": None}
    agent_says(page, "declined to answer")


def test_the_pending_page_lists_requests_and_decides_them_and_the_chat_follows(
    browser: Any, page: Any, site: str, approving: Any, other_user: Any
) -> None:
    session = AgentSession.objects.create(owner=approving, title="Nightly checks")
    chat_open(page, site, session)
    chat_send(page, "run the tests")
    pending_card(page, 0)
    chat_send(page, "ask me which colour the report should be")
    chat_card = pending_card(page, 1)
    first, question = request_of(session, 0), request_of(session, 1)

    list_page = page.context.new_page()
    expect(listed_badge(list_page, site, session)).to_have_text("2 waiting for you")
    list_page.locator("#nav-approvals").click()
    pending_page = page.context.new_page()
    refusals = watched(pending_page)
    pending_page.goto(f"{site}/approvals/")
    cards = pending_page.locator(".approval-card")
    expect(cards).to_have_count(2)
    list_page.wait_for_url(f"{site}/approvals/")  # the header's link leads here
    # Newest first, each with a link to its session.
    assert cards.evaluate_all("cs => cs.map(c => c.dataset.approval)") == [question.id, first.id]
    expect(cards.nth(0).locator("a.approval-session")).to_have_text("Nightly checks")
    expect(cards.nth(0).locator("a.approval-session")).to_have_attribute(
        "href", f"/sessions/{session.id}/"
    )

    # Answered on the pending page, the question's card in the chat follows.
    cards.nth(0).locator("input.answer-input").fill("blue")
    cards.nth(0).locator("button.answer").click()
    expect(cards.nth(0).locator(".approval-outcome")).to_have_text("Answered by alice: blue")
    expect(chat_card.locator(".approval-outcome")).to_have_text("Answered by alice: blue")
    agent_says(page, 'Thank you: answered "blue"')
    expect(listed_badge(list_page, site, session)).to_have_text("1 waiting for you")

    # Decided elsewhere (through the REST API), the chat's card follows; a click on the
    # stale page is refused with the winning decision, which that card then shows.
    reply = api_client_for(approving).post(
        f"/api/approvals/{first.id}/decision",
        {"decision": "reject", "reason": "decided elsewhere"},
        content_type="application/json",
    )
    assert reply.status_code == 200, reply.content
    expect(page.locator(".approval-card").nth(0).locator(".approval-outcome")).to_have_text(
        "Rejected by alice: decided elsewhere"
    )
    cards.nth(1).locator("button.approve").click()
    expect(cards.nth(1).locator(".approval-error")).to_contain_text("already decided")
    expect(cards.nth(1).locator(".approval-outcome")).to_have_text(
        "Rejected by alice: decided elsewhere"
    )
    expect(listed_badge(list_page, site, session)).to_have_count(0)
    assert refusals == [] and pending_page.evaluate("window.cspViolations") == []

    # Another user is shown none of it, and the session is not found.
    other = login_context(browser, site, other_user).new_page()
    other.goto(f"{site}/approvals/")
    expect(other.locator("#approvals-empty")).to_be_visible()
    assert other.goto(f"{site}/sessions/{session.id}/").status == 404
    other.context.close()


def test_a_request_past_its_time_shows_as_expired(page: Any, site: str, approving: Any) -> None:
    session = AgentSession.objects.create(owner=approving, title="Expiry")
    chat_open(page, site, session)
    chat_send(page, "run the tests")
    card = pending_card(page, 0)
    request = request_of(session, 0)

    Approval.objects.filter(pk=request.id).update(expires_at=timezone.now() - timedelta(1))
    card.locator("button.approve").click()
    expect(card.locator(".approval-error")).to_have_text(
        "This request expired before it was decided."
    )
    expect(card.locator(".approval-outcome")).to_have_text("Expired: nobody decided in time.")
    assert approvals_expire() == 0  # the refused decision expired it already
    assert Job.objects.get(pk=request.job_id).status == "cancelled"


def shown_to_the_end(page: Any, session: AgentSession) -> None:
    """No turn of the session queued or running, and the page has every event of its log."""
    live = [Run.Status.QUEUED, Run.Status.RUNNING]
    wait_until(
        lambda: not Run.objects.filter(session=session, status__in=live).exists(),
        timeout=WAIT_MS / 1000,
        interval=0.2,
    )
    last = logged_seqs(session)[-1]
    page_until(
        page, f"(window.agentsiteChat.state.seqs.slice(-1)[0] || 0) >= {last}", WAIT_MS / 1000
    )


def test_the_chat_holds_still_while_the_pointer_is_on_a_pending_card(
    page: Any, site: str, approving: Any
) -> None:
    """Before: every new message scrolled the chat down, the card and its buttons with it,
    while the user was about to click Approve (a click then landed beside the button)."""
    page.set_viewport_size({"width": 900, "height": 420})
    session = AgentSession.objects.create(owner=approving, title="Holds still")
    chat_open(page, site, session)
    chat_send(page, "run the tests")
    card = pending_card(page, 0)
    settled(page, 1)
    shown_to_the_end(page, session)
    page.locator("#message").evaluate("node => node.blur()")
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    approve = card.locator("button.approve")
    box = approve.bounding_box()
    assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= 420, box
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    before = page.evaluate("window.scrollY")
    client = api_client_for(approving)
    posted = client.post(
        f"/api/sessions/{session.id}/messages", {"text": "hello"}, content_type="application/json"
    )
    assert posted.status_code == 202, posted.content
    shown_to_the_end(page, session)
    page.wait_for_timeout(300)  # any scroll the last frames asked for has happened
    assert page.evaluate("window.scrollY") == before
    assert approve.bounding_box() == box

    # Away from the card and back at the bottom, the chat follows new messages down again.
    page.mouse.move(5, 5)
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    before = page.evaluate("window.scrollY")
    posted = client.post(
        f"/api/sessions/{session.id}/messages", {"text": "hello"}, content_type="application/json"
    )
    assert posted.status_code == 202, posted.content
    shown_to_the_end(page, session)
    wait_until(lambda: page.evaluate("window.scrollY") > before, timeout=WAIT_MS / 1000)
    approve.click()
    expect(card.locator(".approval-outcome")).to_have_text("Approved by alice", timeout=WAIT_MS)
