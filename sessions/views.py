"""Browser pages. Thin: load what the page shows, render it."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from sessions.models import AgentSession


@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    sessions = AgentSession.objects.filter(owner=request.user, deleted_at__isnull=True)
    return render(request, "sessions/list.html", {"sessions": sessions})
