"""The REST API: one NinjaAPI, its authentication, and the one table of errors.

The apps' routers are mounted on it in ``agentsite/urls.py``. A service refuses
a request with a ``DomainError``; ``STATUS`` below is the only place that says
which HTTP status each kind of refusal is. Every error body is
``{"error": {"code", "message", "details"?}}`` (``agentsite.web.http``).
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError as DatabaseInterfaceError
from django.db import OperationalError as DatabaseOperationalError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.openapi.docs import Swagger
from redis.exceptions import RedisError

from agentsite.core import telemetry
from agentsite.core.errors import (
    BadRequest,
    Conflict,
    DomainError,
    Invalid,
    NotFound,
    QuotaExceeded,
)
from agentsite.web.auth import BearerTokenAuth, BrowserSessionAuth, request_user
from agentsite.web.http import (
    UNSAFE_METHOD_ERRORS,
    BoundedJsonParser,
    NestedTooDeep,
    error_body,
    errors,
)

log = logging.getLogger(__name__)

# What a client is told to wait after a 503 while Redis or the database is away.
RETRY_AFTER_S = 5

# The HTTP status of each kind of refusal (the first class that matches).
STATUS: dict[type[DomainError], int] = {
    NotFound: 404,
    BadRequest: 400,
    Invalid: 422,
    Conflict: 409,
    QuotaExceeded: 429,
    DomainError: 400,
}


class AgentsiteApi(NinjaAPI):
    """The NinjaAPI whose OpenAPI document also tells what each method can answer."""

    def get_openapi_schema(self, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(**kwargs)
        for operations in schema["paths"].values():
            for method, operation in operations.items():
                document_method_errors(method, operation)
                document_retry_after(operation)
        return schema


def document_method_errors(method: str, operation: dict[str, Any]) -> None:
    # Ninja keys responses by int status; JSON turns them into strings.
    responses = {int(status): response for status, response in operation["responses"].items()}
    for status in UNSAFE_METHOD_ERRORS.get(method, ()):
        responses.setdefault(status, error_response(status))
    operation["responses"] = dict(sorted(responses.items()))


def error_response(status: int) -> dict[str, Any]:
    return {
        "description": HTTPStatus(status).phrase,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }


def document_retry_after(operation: dict[str, Any]) -> None:
    # Redis or the database away for a moment (503), the caller over a quota (429).
    for status in (429, 503):
        answer = operation["responses"].get(status)
        if answer is None:
            continue
        answer["headers"] = {
            "Retry-After": {
                "description": "Seconds to wait before trying again.",
                "required": True,
                "schema": {"type": "string", "pattern": "^[0-9]+$"},
            }
        }


class LocalSwagger(Swagger):
    """Swagger UI from ninja's own template and static files, not from a CDN.

    Ninja renders its local page only when it is an installed app; it is not one
    here (see ``NINJA_DIR`` in settings), so this page renders that template itself.
    """

    def render_page(self, request: HttpRequest, api: NinjaAPI, **kwargs: Any) -> HttpResponse:
        self.settings["url"] = self.get_openapi_url(api, kwargs)
        context = {
            "swagger_settings": json.dumps(self.settings, indent=1),
            "api": api,
            "add_csrf": True,  # the browser's cookie session is one of the API's auths
        }
        return render(request, self.template, context)


api = AgentsiteApi(
    title="agentsite",
    version="1",
    description="Start long tool calls as jobs, run background model turns, resume streams.",
    auth=[BearerTokenAuth(), BrowserSessionAuth()],
    urls_namespace="api",
    docs_url="/docs",
    docs=LocalSwagger(),
    parser=BoundedJsonParser(),
)


@api.exception_handler(DomainError)
def on_domain_error(request: HttpRequest, exc: DomainError) -> HttpResponse:
    status = next(code for kind, code in STATUS.items() if isinstance(exc, kind))
    response = api.create_response(
        request, error_body(exc.code, exc.message, exc.details), status=status
    )
    if isinstance(exc, QuotaExceeded):
        response["Retry-After"] = str(exc.retry_after_s)
    return response


@api.exception_handler(NinjaValidationError)
def on_validation_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    details = [
        {
            "loc": list(err.get("loc", [])),
            "message": err.get("msg", ""),
            "type": err.get("type", ""),
        }
        for err in exc.errors
    ]
    body = error_body("invalid_request", "The request did not match the expected schema.", details)
    return api.create_response(request, body, status=422)


@api.exception_handler(AuthenticationError)
def on_auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    body = error_body("unauthorized", "Send a valid API token as 'Authorization: Bearer <token>'.")
    return api.create_response(request, body, status=401)


@api.exception_handler(Http404)
def on_not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return api.create_response(
        request, error_body("not_found", str(exc) or "Not found."), status=404
    )


@api.exception_handler(RequestDataTooBig)
def on_body_too_large(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    body = error_body(
        "too_large",
        "The request body is larger than AGENTSITE_MAX_BODY_BYTES allows.",
        {"max_bytes": settings.DATA_UPLOAD_MAX_MEMORY_SIZE},
    )
    return api.create_response(request, body, status=413)


@api.exception_handler(HttpError)
def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if isinstance(exc.__cause__, NestedTooDeep):  # ninja's parse failure, caused by ours
        too_deep = exc.__cause__
        log.warning("refused %s %s: %s", request.method, request.path, too_deep.message)
        return api.create_response(request, error_body(too_deep.code, too_deep.message), status=400)
    codes = {
        400: "bad_request",
        401: "unauthorized",
        403: "forbidden",
        404: "not_found",
        413: "too_large",
    }
    code = codes.get(exc.status_code, "error")
    return api.create_response(request, error_body(code, str(exc)), status=exc.status_code)


def unavailable(request: HttpRequest, what: str) -> HttpResponse:
    body = error_body(
        "unavailable",
        f"The {what} is unavailable for a moment; nothing was lost. Retry after a few seconds.",
        {"retry_after_s": RETRY_AFTER_S},
    )
    response = api.create_response(request, body, status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


@api.exception_handler(RedisError)
def on_redis_unavailable(request: HttpRequest, exc: RedisError) -> HttpResponse:
    log.warning("Redis unavailable during %s %s: %r", request.method, request.path, exc)
    return unavailable(request, "queue")


@api.exception_handler(DatabaseOperationalError)
@api.exception_handler(DatabaseInterfaceError)
def on_database_unavailable(request: HttpRequest, exc: Exception) -> HttpResponse:
    log.warning("database unavailable during %s %s: %r", request.method, request.path, exc)
    telemetry.database_lost()
    return unavailable(request, "database")


@api.exception_handler(Exception)
def on_unexpected_error(request: HttpRequest, exc: Exception) -> HttpResponse:
    log.error("unexpected error in %s %s", request.method, request.path, exc_info=exc)
    body = error_body("internal_error", "The server failed to answer this request.")
    return api.create_response(request, body, status=500)


class Me(Schema):
    username: str


@api.get(
    "/me", response={200: Me, **errors()}, tags=["auth"], summary="Who the credentials belong to"
)
def me(request: HttpRequest) -> dict[str, Any]:
    user = request_user(request)
    return {"username": user.get_username()}
