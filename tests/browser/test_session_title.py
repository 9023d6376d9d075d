"""A session takes its title from its first message, and is renamed in the page."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from sessions.models import AgentSession
from tests.browser.chat_page import chat_open, chat_send, wait_settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIRST = "Hello there, what can you do for me today?"
AUTO_TITLE = "Hello there, what can you do"


def listed_titles(page: Any, site: str) -> list[str]:
    page.goto(f"{site}/")
    return [t.strip() for t in page.locator(".sessions .title").all_inner_texts()]


def test_the_first_message_titles_the_session_and_a_rename_sticks(
    page: Any, site: str, user: Any
) -> None:
    session = AgentSession.objects.create(owner=user)
    chat_open(page, site, session)
    heading = page.locator("#title-text")
    assert heading.inner_text() == "Untitled session"

    chat_send(page, FIRST)
    expect(heading).to_have_text(AUTO_TITLE, timeout=60_000)
    wait_settled(page, session)
    assert listed_titles(page, site) == [AUTO_TITLE]

    chat_open(page, site, session)
    assert heading.inner_text() == AUTO_TITLE
    assert page.locator("#rename-form").is_hidden()
    # With the keyboard: Rename, then Escape leaves the title as it was.
    page.locator("#rename").focus()
    page.keyboard.press("Enter")
    title_input = page.locator("#title-input")
    assert title_input.is_visible() and title_input.input_value() == AUTO_TITLE
    assert page.locator("#rename").is_hidden() and heading.is_hidden()
    page.keyboard.press("Escape")
    assert heading.is_visible() and heading.inner_text() == AUTO_TITLE
    assert title_input.is_hidden()

    # A blank title is refused with the server's reason, and nothing changes.
    page.locator("#rename").click()
    title_input.fill("   ")
    page.keyboard.press("Enter")
    page.locator("#rename-error").filter(has_text="empty").wait_for()
    assert AgentSession.objects.get(pk=session.pk).title == AUTO_TITLE

    title_input.fill("Checkout bugs")
    page.keyboard.press("Enter")
    expect(heading).to_have_text("Checkout bugs", timeout=60_000)
    assert page.locator("#title-input").is_hidden()
    assert page.title().startswith("Checkout bugs")

    chat_send(page, "run the tests")
    wait_settled(page, session)
    page.reload()
    page.wait_for_selector("#conn[data-state=live]")
    assert heading.inner_text() == "Checkout bugs"
    assert listed_titles(page, site) == ["Checkout bugs"]
