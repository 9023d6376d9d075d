"""Error pages that speak each client's language: JSON under /api/ and /v1/, HTML elsewhere.

The APIs' own handlers (``agentsite.api``, ``responses.api``) answer every error
raised inside an operation; this catches what fails around them (middleware, a
``Host`` header Django does not serve, URL resolution, a method the path does not
take, a view outside the operations), so an API client never gets one of Django's
HTML pages, nor a traceback even with ``DEBUG`` on: an unexpected exception is
logged and answered with a generic sentence.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.views import defaults

log = logging.getLogger(__name__)

SERVER_FAILED = "The server failed to answer this request."


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith(("/api/", "/v1/"))


def _json_error(code: str, message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def _openai_error(message: str, kind: str, code: str, status: int) -> JsonResponse:
    error = {"message": message, "type": kind, "param": None, "code": code}
    return JsonResponse({"error": error}, status=status)


def _server_failed(request: HttpRequest) -> JsonResponse:
    if request.path.startswith("/v1/"):  # the OpenAI error shape
        return _openai_error(SERVER_FAILED, "server_error", "server_error", 500)
    return _json_error("internal_error", SERVER_FAILED, 500)


class ApiErrorsAsJson:
    """An exception a view under /api/ or /v1/ did not handle: logged, and a JSON 500
    with a generic sentence, whatever ``DEBUG`` says."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> Any:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> Any:
        if not _is_api(request):
            return None
        log.error("unexpected error in %s %s", request.method, request.path, exc_info=exception)
        return _server_failed(request)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A request Django refused before any view (a ``Host`` not in ``ALLOWED_HOSTS``,
    another ``SuspiciousOperation``): JSON in each API's format, Django's page elsewhere."""
    if not _is_api(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, DisallowedHost):
        code, message = "disallowed_host", "The Host header names no host this server answers for."
    else:
        code, message = "bad_request", "The server cannot answer this request."
    if request.path.startswith("/v1/"):
        return _openai_error(message, "invalid_request_error", code, 400)
    return _json_error(code, message, 400)


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
        return _server_failed(request)
    return defaults.server_error(request)
