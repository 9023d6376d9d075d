"""Browser pages. Thin: load what the page shows, render it.

The chat page itself is a shell: its history and live updates come over the
session websocket (static/js/chat.js), so reloading shows the same log the
stream replays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Count, F
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from jobs.documents import FINAL_JOB_EVENTS
from jobs.models import Job
from sessions.approvals import approval_doc, approval_list
from sessions.models import AgentSession, Approval, Event
from sessions.services import SessionNotFound, session_create, session_for

# The most pending requests the page of them shows at once.
PENDING_SHOWN = 200


@dataclass
class SessionRow:
    session: AgentSession
    running_jobs: int
    finished_jobs: int
    new_replies: int


def session_rows(owner: Any) -> list[SessionRow]:
    """The owner's sessions with their running jobs and what finished since the last visit
    (what waits for the owner is ``AgentSession.pending_approvals``)."""
    sessions = list(AgentSession.objects.filter(owner=owner, deleted_at__isnull=True)[:200])
    ids = [s.id for s in sessions]
    # A job behind an approval's gate is not running yet: the session waits for its owner.
    running = dict(
        Job.objects.filter(session_id__in=ids, status__in=[Job.Status.QUEUED, Job.Status.RUNNING])
        .filter(gate="")
        .values_list("session_id")
        .annotate(n=Count("id"))
    )
    unseen = Event.objects.filter(session_id__in=ids, seq__gt=F("session__seen_seq"))
    finished = dict(
        unseen.filter(kind=Event.Kind.JOB_EVENT, payload__event__in=sorted(FINAL_JOB_EVENTS))
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
def approvals_pending(request: HttpRequest) -> HttpResponse:
    """The user's pending requests across sessions, newest first, as documents the page's
    script draws (static/js/approvals_page.js)."""
    pending = list(
        approval_list(owner=request.user, status=Approval.Status.PENDING).select_related("session")[
            : PENDING_SHOWN + 1
        ]
    )
    rows = [
        {"request": approval_doc(a), "session_title": a.session.title}
        for a in pending[:PENDING_SHOWN]
    ]
    return render(
        request,
        "sessions/approvals.html",
        {"rows": rows, "more": len(pending) > PENDING_SHOWN},
    )
