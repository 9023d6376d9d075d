"""The server side of the pages: what each shows, and that they are private."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from jobs.models import Job
from sessions.events import event_append
from sessions.models import AgentSession

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
