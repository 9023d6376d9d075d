"""Error pages that speak each client's language: JSON under /api/, HTML elsewhere.

The API's own handlers (``agentsite.api``) answer every error raised inside an
operation; this catches what fails around it (middleware, URL resolution, a
method the path does not take), so an API client never gets one of Django's
HTML pages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.views import defaults


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _json_error(code: str, message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return _json_error("not_found", f"No API operation at {request.path}.", 404)
    return defaults.page_not_found(request, exception)


class ApiMethodNotAllowedAsJson:
    """A method an API path does not take: ``405 method_not_allowed`` in the API's error
    format (django-ninja answers a plain-text page), with the ``Allow`` header kept."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> Any:
        response = self.get_response(request)
        if (
            response.status_code == 405
            and _is_api(request)
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            allowed = response.get("Allow", "")
            json = _json_error(
                "method_not_allowed",
                f"{request.method} is not an operation of {request.path}; it takes {allowed}.",
                405,
            )
            json["Allow"] = allowed
            return json
        return response


def server_error(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return _json_error("internal_error", "The server failed to answer.", 500)
    return defaults.server_error(request)
