"""The REST API: one NinjaAPI, Bearer-token or browser-session auth, one error format.

Every error body is ``{"error": {"code", "message", "details"?}}``: a machine
readable code, a sentence for people, and optional structured details.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError as DatabaseInterfaceError
from django.db import OperationalError as DatabaseOperationalError
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import HttpBearer, SessionAuth
from pydantic import model_validator
from redis.exceptions import RedisError

from agentsite import metrics
from agentsite.models import ApiToken


class ApiError(Exception):
    """An error with an HTTP status, a stable code and a human sentence."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


class ErrorDetail(Schema):
    code: str
    message: str
    details: Any = None


class ErrorBody(Schema):
    """Every error answer: ``{"error": {"code", "message", "details"?}}``."""

    error: ErrorDetail


# Every operation can answer these: no or a bad token (401), a failure nobody
# expected (500), Redis or the database away for a moment (503).
ALWAYS = (401, 500, 503)
# A browser's cookie-authenticated POST, PUT, PATCH or DELETE must carry a CSRF
# token (403 without it); Django reads a POST's form body for that token, and
# refuses one above AGENTSITE_MAX_BODY_BYTES (413).
UNSAFE_METHOD_ERRORS = {
    "post": (403, 413),
    "put": (403, 413),
    "patch": (403, 413),
    "delete": (403,),
}


def errors(*codes: int) -> dict[int, type[ErrorBody]]:
    """The documented error answers of an operation: ``codes`` plus ``ALWAYS``.

    The answers its method brings (``UNSAFE_METHOD_ERRORS``) are added to the
    document by ``AgentsiteApi``, which knows the method.
    """
    return {code: ErrorBody for code in sorted({*codes, *ALWAYS})}


# Python's whitespace (what ``str.strip`` removes) as a regular-expression class
# that reads the same in Python and in JSON Schema's ECMA-262 dialect, whose
# ``\s`` differs from Python's. Patterns in the document use these, so that the
# document refuses exactly the blank values the API refuses.
SPACE = r"[\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
NOT_BLANK = SPACE.replace("[", "[^", 1)


def contains_nul(value: Any) -> bool:
    """True when a NUL character is in ``value``, a string or any string inside it."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(contains_nul(k) or contains_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(contains_nul(item) for item in value)
    return False


class Body(Schema):
    """A JSON request body. Text with a NUL character in it is refused (422).

    PostgreSQL stores no NUL in text or JSON, so such a body would fail deep in
    the write; SQLite would take it. Refusing it here answers the same on both.
    """

    @model_validator(mode="before")
    @classmethod
    def has_no_nul_characters(cls, data: Any) -> Any:
        if contains_nul(data):
            raise ValueError("text may not contain NUL (U+0000) characters")
        return data


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return {"error": error}


LAST_USED_RESOLUTION = timedelta(seconds=60)
# What a client is told to wait after a 503 while Redis or the database is away.
RETRY_AFTER_S = 5

log = logging.getLogger(__name__)


class BearerTokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> AbstractBaseUser | None:
        return user_for_token(token)


class BrowserSessionAuth(SessionAuth):
    """The browser's login cookie, CSRF-checked on unsafe methods.

    Ninja's ``SessionAuth`` checks CSRF before it looks at the user, so a
    script's POST with a missing or wrong token was told "CSRF check Failed"
    (403) instead of 401. Without a logged-in user there is nothing to protect.
    """

    def __call__(self, request: HttpRequest) -> Any:
        if not request.user.is_authenticated:
            return None
        return super().__call__(request)


def user_for_token(raw: str) -> AbstractBaseUser | None:
    """The active user a raw API token belongs to, or None."""
    api_token = ApiToken.objects.for_raw_token(raw)
    if api_token is None or not api_token.user.is_active:
        return None
    now = timezone.now()
    # A write per request would serialise every API call on SQLite's write lock;
    # "last used" to the minute is what an operator needs.
    if api_token.last_used_at is None or now - api_token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=api_token.pk).update(last_used_at=now)
    return api_token.user


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
    unavailable = operation["responses"].get(503)
    if unavailable is not None:
        unavailable["headers"] = {
            "Retry-After": {
                "description": "Seconds to wait before trying again.",
                "required": True,
                "schema": {"type": "string", "pattern": "^[0-9]+$"},
            }
        }


api = AgentsiteApi(
    title="agentsite",
    version="1",
    description="Start long tool calls as jobs, run background model turns, resume streams.",
    auth=[BearerTokenAuth(), BrowserSessionAuth()],
    urls_namespace="api",
    docs_url="/docs",
)


def request_user(request: HttpRequest) -> AbstractBaseUser:
    """The authenticated caller (``request.auth`` for Bearer, ``request.user`` otherwise)."""
    user = getattr(request, "auth", None)
    if isinstance(user, AbstractBaseUser):
        return user
    if isinstance(request.user, AnonymousUser):  # pragma: no cover - auth guards this
        raise ApiError(401, "unauthorized", "Authentication required.")
    return request.user  # type: ignore[return-value]


@api.exception_handler(ApiError)
def on_api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    return api.create_response(
        request, error_body(exc.code, exc.message, exc.details), status=exc.status
    )


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
    metrics.database_lost()
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


def _mount_routers() -> None:
    from jobs.api import router as jobs_router
    from sessions.api import router as sessions_router
    from sessions.streams import router as streams_router

    api.add_router("/", jobs_router)
    api.add_router("/", sessions_router)
    api.add_router("/", streams_router)


_mount_routers()
