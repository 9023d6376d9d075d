"""Error pages that speak each client's language: JSON under /api/, HTML elsewhere.

The API's own handlers (``agentsite.api``) answer every error raised inside an
operation; this catches what fails around it (middleware, URL resolution), so
an API client never gets Django's HTML "Server Error (500)".
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"error": {"code": "internal_error", "message": "The server failed to answer."}},
            status=500,
        )
    return defaults.server_error(request)
