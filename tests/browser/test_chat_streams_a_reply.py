"""A message sent from the chat page gets a reply that streams in and renders as markdown."""

from __future__ import annotations

from typing import Any

import pytest

from sessions.models import AgentSession
from tests.browser.chat_page import (
    assistant_texts,
    chat_open,
    chat_send,
    logged_seqs,
    rendered_seqs,
    wait_settled,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_sent_message_streams_a_reply(page: Any, site: str, user: Any) -> None:
    session = AgentSession.objects.create(owner=user, title="Streaming")
    chat_open(page, site, session)
    chat_send(page, "hello, what can you do?")

    page.wait_for_selector(".msg.user .bubble:has-text('hello, what can you do?')")
    page.wait_for_selector(".msg.assistant.streaming")  # text arriving, not yet final
    wait_settled(page, session)

    final = page.locator(".msg.assistant").first
    (text,) = assistant_texts(session)
    assert final.get_attribute("data-streamed") == text  # the deltas added up to the message
    assert final.get_attribute("data-final") == text
    assert "run the tests" in final.inner_text()
    assert rendered_seqs(page) == logged_seqs(session)
    assert page.locator("#conn").inner_text() == "live"
