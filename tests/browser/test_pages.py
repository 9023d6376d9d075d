"""The server side of the pages: what each shows, and that they are private."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import F
from django.test import Client
from django.utils import timezone

from jobs.models import Job
from sessions.events import event_append
from sessions.models import AgentSession, Approval

REPORT = {"summary": "s", "title": "Shop <health>", "markdown": "# Shop\n\n<script>x()</script>"}


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def finished_job(user: Any, session: AgentSession | None = None) -> Job:
    return Job.objects.create(
        owner=user,
        session=session,
        tool="write_report",
        args={},
        status=Job.Status.DONE,
        result=REPORT,
        timeout_s=60,
    )


def test_the_list_shows_what_finished_since_the_last_visit(user: Any) -> None:
    session = AgentSession.objects.create(owner=user, title="Nightly")
    event_append(session_id=session.id, kind="user_message", payload={"text": "hi"})
    AgentSession.objects.filter(pk=session.pk).update(seen_seq=1)
    event_append(
        session_id=session.id,
        kind="job_event",
        payload={"event": "job_completed", "job_id": "job_x", "status": "done"},
    )
    event_append(session_id=session.id, kind="assistant_message", payload={"text": "done"})
    Job.objects.create(owner=user, session=session, tool="run_tests", args={}, timeout_s=60)

    html = logged_in(user).get("/").content.decode()
    assert "Nightly" in html
    assert "1 finished" in html and "1 new reply" in html and "1 running job" in html


def pending_request(user: Any, session: AgentSession, **fields: Any) -> Approval:
    """A request as an agent's call leaves it (``sessions.approvals`` makes real ones)."""
    AgentSession.objects.filter(pk=session.pk).update(pending_approvals=F("pending_approvals") + 1)
    return Approval.objects.create(
        owner=user,
        session=session,
        kind=fields.pop("kind", "approval"),
        tool_call_id=f"toolu_{Approval.objects.count()}",
        expires_at=timezone.now() + timedelta(hours=1),
        **fields,
    )


def test_the_list_shows_which_sessions_wait_for_you(user: Any) -> None:
    waiting = AgentSession.objects.create(owner=user, title="Waiting")
    AgentSession.objects.create(owner=user, title="Quiet")
    gated = Job.objects.create(
        owner=user, session=waiting, tool="run_tests", args={}, timeout_s=60, gate="apr_x"
    )
    pending_request(user, waiting, tool="run_tests", job_id=gated.id)
    pending_request(user, waiting, kind="question", question="Which colour?")

    html = logged_in(user).get("/").content.decode()
    assert "running job" not in html  # its job waits behind the request, not for a worker
    assert html.count("waiting for you</a>") == 1
    badge = f'href="/sessions/{waiting.id}/" title="Requests waiting for your answer">2 waiting'
    assert badge in html


def test_the_page_of_pending_requests_shows_yours_newest_first(user: Any, other_user: Any) -> None:
    session = AgentSession.objects.create(owner=user, title="Mine <b>")
    older = pending_request(user, session, tool="run_tests", arguments={"path": "."})
    newer = pending_request(user, session, kind="question", question="Which colour?")
    decided = pending_request(user, session, tool="run_tests")
    Approval.objects.filter(pk=decided.pk).update(status="approved")
    theirs = pending_request(other_user, AgentSession.objects.create(owner=other_user), tool="x")

    page = logged_in(user).get("/approvals/")
    html = page.content.decode()
    data = html.split('id="approvals-data" type="application/json">')[1].split("</script>")[0]
    rows = json.loads(data)
    assert [r["request"]["id"] for r in rows] == [newer.id, older.id]
    assert rows[1]["request"]["arguments"] == {"path": "."}
    assert rows[0]["session_title"] == "Mine <b>" and "Mine <b>" not in data
    assert theirs.id not in html and decided.id not in html
    assert Client().get("/approvals/")["Location"].startswith("/login/")


def test_the_page_says_when_nothing_waits(user: Any) -> None:
    assert "Nothing waits for your answer." in logged_in(user).get("/approvals/").content.decode()


def test_new_session_opens_its_chat(user: Any) -> None:
    response = logged_in(user).post("/sessions/new", {"title": "Fresh"})
    session = AgentSession.objects.get(owner=user, title="Fresh")
    assert response["Location"] == f"/sessions/{session.id}/"
    assert (
        f'data-session="{session.id}"' in logged_in(user).get(response["Location"]).content.decode()
    )


def test_a_report_renders_without_markup_and_downloads_as_markdown(user: Any) -> None:
    job = finished_job(user)
    client = logged_in(user)
    page = client.get(f"/jobs/{job.id}/").content.decode()
    assert "<h1>Shop</h1>" in page and "&lt;script&gt;x()&lt;/script&gt;" in page
    assert "<script>x()" not in page
    fragment = client.get(f"/jobs/{job.id}/report").content.decode()
    assert "<script>" not in fragment
    download = client.get(f"/jobs/{job.id}/report.md")
    assert download["Content-Type"].startswith("text/markdown")
    assert download["Content-Disposition"] == f'attachment; filename="shop-health-{job.id}.md"'
    assert download.content.decode() == REPORT["markdown"]


@pytest.mark.parametrize(
    "path", ["/sessions/{s}/", "/jobs/{j}/", "/jobs/{j}/report", "/jobs/{j}/report.md"]
)
def test_other_peoples_pages_are_not_found(user: Any, other_user: Any, path: str) -> None:
    session = AgentSession.objects.create(owner=user)
    job = finished_job(user, session)
    url = path.format(s=session.id, j=job.id)
    assert logged_in(other_user).get(url).status_code == 404
    assert Client().get(url)["Location"].startswith("/login/")


def test_the_chat_page_renders_every_event_kind() -> None:
    import re

    from django.conf import settings

    from sessions.models import Event

    script = (settings.BASE_DIR / "static" / "js" / "chat.js").read_text()
    handlers = script[script.index("const HANDLERS = {") :].split("};")[0]
    assert set(re.findall(r"^\s+(\w+):", handlers, re.M)) == set(Event.Kind.values)
