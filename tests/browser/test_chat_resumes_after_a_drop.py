"""Dropping the websocket mid-stream loses and repeats nothing: the client resumes by token."""

from __future__ import annotations

from typing import Any

import pytest

from sessions.models import AgentSession
from tests.browser.chat_page import (
    assistant_texts,
    chat_open,
    chat_send,
    logged_seqs,
    page_until,
    rendered_seqs,
    wait_settled,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_text_continues_after_the_socket_drops(page: Any, site: str, user: Any) -> None:
    session = AgentSession.objects.create(owner=user, title="Flaky network")
    chat_open(page, site, session)
    chat_send(page, "hello, what can you do?")
    page.wait_for_selector(".msg.assistant.streaming")

    for _ in range(3):
        page.evaluate("window.agentsiteChat.drop()")
        page.wait_for_selector("#conn[data-state=live]")
    wait_settled(page, session)

    (text,) = assistant_texts(session)
    bubble = page.locator(".msg.assistant").first
    assert bubble.get_attribute("data-streamed") == text
    assert rendered_seqs(page) == logged_seqs(session)


def test_text_continues_after_the_browser_goes_offline(page: Any, site: str, user: Any) -> None:
    session = AgentSession.objects.create(owner=user, title="Offline")
    chat_open(page, site, session)
    chat_send(page, "hello, what can you do?")
    page.wait_for_selector(".msg.assistant.streaming")

    # Every state the indicator passes through is recorded: going offline may
    # already close the socket, and a reconnect can be over before a poll for
    # the transient state would see it.
    page.evaluate(
        """() => {
          const conn = document.getElementById("conn");
          window.connStates = [];
          new MutationObserver(() => window.connStates.push(conn.dataset.state))
            .observe(conn, {attributes: true, attributeFilter: ["data-state"]});
        }"""
    )
    page.context.set_offline(True)
    page.evaluate("window.agentsiteChat.drop()")
    page_until(page, "window.connStates.includes('reconnecting')")
    page.context.set_offline(False)
    page.wait_for_selector("#conn[data-state=live]")
    wait_settled(page, session)

    (text,) = assistant_texts(session)
    assert page.locator(".msg.assistant").first.get_attribute("data-streamed") == text
    assert rendered_seqs(page) == logged_seqs(session)
