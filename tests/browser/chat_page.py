"""Driving the chat page, and reading the log it should show."""

from __future__ import annotations

from typing import Any

from jobs.models import Job
from sessions.models import AgentSession, Event, Run
from tests.conftest import wait_until


def chat_open(page: Any, site: str, session: AgentSession) -> None:
    page.goto(f"{site}/sessions/{session.id}/")
    page.wait_for_selector("#conn[data-state=live]")


def chat_send(page: Any, text: str) -> None:
    page.fill("#message", text)
    page.press("#message", "Enter")


def rendered_seqs(page: Any) -> list[int]:
    return list(page.evaluate("window.agentsiteChat.state.seqs"))


def logged_seqs(session: AgentSession) -> list[int]:
    return list(Event.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))


def session_settled(session: AgentSession) -> bool:
    """No run queued or running, nothing pending, no job unfinished."""
    return not (
        Run.objects.filter(
            session=session, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]
        ).exists()
        or Event.objects.filter(session=session, pending=True).exists()
        or Job.objects.filter(session=session).exclude(status__in=Job.TERMINAL).exists()
    )


def wait_settled(page: Any, session: AgentSession, timeout: float = 90) -> None:
    """Wait until the session is quiet and the page shows its whole log."""
    wait_until(lambda: session_settled(session), timeout=timeout, interval=0.2)
    last = logged_seqs(session)[-1]
    page_until(page, f"(window.agentsiteChat.state.seqs.slice(-1)[0] || 0) >= {last}", timeout)


def page_until(page: Any, expression: str, timeout: float = 30) -> Any:
    """Wait until a JavaScript expression is truthy in the page.

    Polled from here with ``page.evaluate`` rather than Playwright's
    ``wait_for_function``: that one re-evaluates the expression with ``eval`` inside
    the page, which the pages' Content-Security-Policy (no 'unsafe-eval') refuses
    whenever the first check is false.
    """
    return wait_until(lambda: page.evaluate(expression), timeout=timeout, interval=0.05)


def assistant_texts(session: AgentSession) -> list[str]:
    return [
        e.payload["text"]
        for e in Event.objects.filter(session=session, kind=Event.Kind.ASSISTANT_MESSAGE).order_by(
            "seq"
        )
    ]
