"""Browser pages. Thin: load what the page shows, render it.

The chat page itself is a shell: its history and live updates come over the
session websocket (static/js/chat.js), so reloading shows the same log the
stream replays.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Count, F
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import slugify
from django.views.decorators.http import require_POST
from markdown_it import MarkdownIt

from jobs.models import Job, JobChunk
from sessions.models import AgentSession, Event
from sessions.services import SessionNotFound, session_create, session_for

# "js-default": raw HTML in the source is escaped and javascript:/data: links
# are refused, so model and tool output can never inject markup.
_markdown = MarkdownIt("js-default")
FINISHED_JOB_EVENTS = ["job_completed", "job_failed", "job_cancelled", "job_timed_out"]
PARTIALS_SHOWN = 200


def markdown_html(text: str) -> SafeString:
    return mark_safe(_markdown.render(text))  # the renderer escapes any HTML in the source


@dataclass
class SessionRow:
    session: AgentSession
    running_jobs: int
    finished_jobs: int
    new_replies: int


def session_rows(owner: Any) -> list[SessionRow]:
    """The owner's sessions with their running jobs and what finished since the last visit."""
    sessions = list(AgentSession.objects.filter(owner=owner, deleted_at__isnull=True)[:200])
    ids = [s.id for s in sessions]
    running = dict(
        Job.objects.filter(session_id__in=ids, status__in=[Job.Status.QUEUED, Job.Status.RUNNING])
        .values_list("session_id")
        .annotate(n=Count("id"))
    )
    unseen = Event.objects.filter(session_id__in=ids, seq__gt=F("session__seen_seq"))
    finished = dict(
        unseen.filter(kind=Event.Kind.JOB_EVENT, payload__event__in=FINISHED_JOB_EVENTS)
        .values_list("session_id")
        .annotate(n=Count("id"))
    )
    replies = dict(
        unseen.filter(kind=Event.Kind.ASSISTANT_MESSAGE)
        .values_list("session_id")
        .annotate(n=Count("id"))
    )
    return [
        SessionRow(s, running.get(s.id, 0), finished.get(s.id, 0), replies.get(s.id, 0))
        for s in sessions
    ]


def owned_session_or_404(request: HttpRequest, session_id: str) -> AgentSession:
    try:
        return session_for(owner=request.user, session_id=session_id)
    except SessionNotFound as exc:
        raise Http404(exc.message) from exc


def owned_job_or_404(request: HttpRequest, job_id: str) -> Job:
    job = Job.objects.filter(pk=job_id, owner_id=request.user.pk).first()
    if job is None:
        raise Http404("No such job.")
    return job


def partial_label(item: Any) -> str:
    """One readable line for a partial result (a test outcome, a crawled page, a section)."""
    if isinstance(item, dict):
        name = next(
            (item[k] for k in ("nodeid", "test", "name", "url", "heading", "title") if item.get(k)),
            None,
        )
        outcome = next((item[k] for k in ("outcome", "status", "result") if k in item), None)
        if name is not None:
            return f"{name} — {outcome}" if outcome is not None else str(name)
    text = json.dumps(item, default=str)
    return text if len(text) <= 200 else text[:199] + "…"


def job_report(job: Job) -> dict[str, str] | None:
    """The markdown report a finished job produced (write_report), if any."""
    result = job.result if job.status == Job.Status.DONE else None
    if isinstance(result, dict) and isinstance(result.get("markdown"), str):
        return {"title": str(result.get("title") or job.id), "markdown": result["markdown"]}
    return None


@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    return render(request, "sessions/list.html", {"rows": session_rows(request.user)})


@login_required
@require_POST
def session_new(request: HttpRequest) -> HttpResponse:
    session = session_create(owner=request.user, title=request.POST.get("title", ""))
    return redirect("sessions:chat", session_id=session.id)


@login_required
def session_chat(request: HttpRequest, session_id: str) -> HttpResponse:
    session = owned_session_or_404(request, session_id)
    return render(request, "sessions/chat.html", {"session": session})


@login_required
def job_detail(request: HttpRequest, job_id: str) -> HttpResponse:
    job = owned_job_or_404(request, job_id)
    report = job_report(job)
    context = {
        "job": job,
        "partials": [
            partial_label(item)
            for item in JobChunk.objects.filter(job=job)
            .order_by("index")
            .values_list("item", flat=True)[:PARTIALS_SHOWN]
        ],
        "report": report,
        "report_html": markdown_html(report["markdown"]) if report else "",
    }
    return render(request, "sessions/job.html", context)


@login_required
def job_report_fragment(request: HttpRequest, job_id: str) -> HttpResponse:
    """The report as an HTML fragment, for reading it inline in the chat."""
    report = job_report(owned_job_or_404(request, job_id))
    if report is None:
        raise Http404("This job has no report.")
    return HttpResponse(markdown_html(report["markdown"]))


@login_required
def job_report_download(request: HttpRequest, job_id: str) -> HttpResponse:
    job = owned_job_or_404(request, job_id)
    report = job_report(job)
    if report is None:
        raise Http404("This job has no report.")
    response = HttpResponse(report["markdown"], content_type="text/markdown; charset=utf-8")
    filename = f"{slugify(report['title'])[:80] or 'report'}-{job.id}.md"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
