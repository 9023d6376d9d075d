"""``/v1/responses``: the OpenAI Responses API over agentsite's sessions (the HTTP edge).

Plain async views; what a request waits for (a stream, a response's end, a
cancel) is awaited on the event loop as its body is sent. Errors are OpenAI's
``{"error": {"message", "type", "param", "code"}}`` (which the OpenAI SDKs turn
into their exception classes), not agentsite's.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import (
    HttpRequest,
    HttpResponseBase,
    JsonResponse,
    StreamingHttpResponse,
)
from django.urls import path, re_path
from django.views.decorators.csrf import csrf_exempt
from pydantic import ValidationError
from redis.exceptions import RedisError

from accounts.credentials import Credential, CredentialRevoked
from accounts.models import ApiToken
from agentsite.core.errors import Conflict, DomainError, NotFound, QuotaExceeded
from agentsite.web.auth import api_token_for
from agentsite.web.http import NestedTooDeep, contains_nul, json_body
from agentsite.web.wire import response_wire_of, written_when_drained
from responses.live import response_cancel, response_events, response_wait
from responses.models import AgentResponse
from responses.payloads import ResponseCreate
from responses.projection import StreamEvent
from responses.services import (
    response_create,
    response_delete,
    response_document,
    response_get,
    response_input_items,
)

log = logging.getLogger(__name__)

# Each call takes a database connection and gives it back (CONN_MAX_AGE is 0), so a
# stream or a waiting request holds none between its reads.
db = functools.partial(database_sync_to_async, thread_sensitive=False)

# An async view (django-stubs types path()'s views as returning a response).
View = Callable[..., Any]


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.retry_after_s = retry_after_s


def error_response(
    status: int,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    retry_after_s: int | None = None,
) -> JsonResponse:
    kind = {401: "authentication_error", 404: "invalid_request_error", 429: "requests"}.get(
        status, "invalid_request_error" if status < 500 else "server_error"
    )
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    response = JsonResponse(body, status=status)
    if retry_after_s is not None:
        response["Retry-After"] = str(retry_after_s)
    return response


def domain_error(exc: DomainError) -> ApiError:
    details = exc.details if isinstance(exc.details, dict) else {}
    param = details.get("param")
    if isinstance(exc, NotFound):
        return ApiError(404, exc.message, param=param, code=None)
    if isinstance(exc, QuotaExceeded):
        return ApiError(429, exc.message, code=exc.code, retry_after_s=exc.retry_after_s)
    if isinstance(exc, Conflict):  # a request decided already, or expired
        return ApiError(409, exc.message, param=param, code=exc.code)
    return ApiError(400, exc.message, param=param, code=exc.code)


def validation_error(exc: ValidationError) -> ApiError:
    first = exc.errors()[0]
    # The body's field: deeper parts of the location name the union's branches (input.str).
    param = str(first["loc"][0]) if first["loc"] else None
    return ApiError(400, f"{param}: {first['msg']}", param=param, code="invalid_value")


def openai_endpoint(methods: tuple[str, ...]) -> Callable[[View], View]:
    """Authenticate with the Bearer token, refuse other methods, say every error OpenAI's way."""

    def decorate(view: View) -> View:
        @csrf_exempt
        @functools.wraps(view)
        async def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if request.method not in methods:
                response = error_response(
                    405,
                    f"{request.method} is not allowed on {request.path}.",
                    code="method_not_allowed",
                )
                response["Allow"] = ", ".join(methods)
                return response
            try:
                user = await authenticate(request)
                answer: HttpResponseBase = await view(request, user, *args, **kwargs)
                return answer
            except ApiError as exc:
                return error_response(exc.status, exc.message, param=exc.param, code=exc.code)
            except DomainError as exc:
                err = domain_error(exc)
                return error_response(
                    err.status,
                    err.message,
                    param=err.param,
                    code=err.code,
                    retry_after_s=err.retry_after_s,
                )
            except ValidationError as exc:
                err = validation_error(exc)
                return error_response(err.status, err.message, param=err.param, code=err.code)
            except (RedisError, OperationalError, InterfaceError):
                log.warning("a store is unavailable", exc_info=True)
                response = error_response(503, "The service is unavailable; retry shortly.")
                response["Retry-After"] = "5"
                return response
            except Exception:
                log.exception("the responses API failed on %s %s", request.method, request.path)
                return error_response(500, "The server failed to answer.", code="server_error")

        return wrapped

    return decorate


async def authenticate(request: HttpRequest) -> AbstractBaseUser:
    """The token's user; the token is kept on the request (``request_credential``)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    api_token = None
    if scheme.lower() == "bearer" and token.strip():
        api_token = cast(ApiToken | None, await db(api_token_for)(token.strip()))
    if api_token is None:
        raise ApiError(
            401, "Send an agentsite API token as 'Authorization: Bearer …'.", code="invalid_api_key"
        )
    request.api_token_id = api_token.pk  # type: ignore[attr-defined]
    return api_token.user


REVOKED = {
    "message": "The API token this stream was opened with no longer holds.",
    "type": "invalid_request_error",
    "param": None,
    "code": "invalid_api_key",
}


def credential_of(request: HttpRequest, user: AbstractBaseUser) -> Credential:
    return Credential(user_id=user.pk, token_id=request.api_token_id)  # type: ignore[attr-defined]


def body_json(request: HttpRequest) -> dict[str, Any]:
    try:
        body = json_body(request.body or b"null")
    except RequestDataTooBig as exc:
        raise ApiError(
            413, "The request body is larger than AGENTSITE_MAX_BODY_BYTES allows."
        ) from exc
    except NestedTooDeep as exc:
        log.warning("refused %s %s: %s", request.method, request.path, exc.message)
        raise ApiError(400, exc.message, code=exc.code) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, "The body is not JSON.", code="invalid_json") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "The body must be a JSON object.", code="invalid_json")
    # PostgreSQL stores no NUL in text or JSON: refused here, the same on every database.
    for field, value in body.items():
        if contains_nul(field) or contains_nul(value):
            raise ApiError(
                400, "Text may not contain NUL characters.", param=field, code="invalid_value"
            )
    return body


def revoked_event(sequence_number: int) -> dict[str, Any]:
    """The streaming ``error`` event that ends a stream whose token no longer holds."""
    return {
        "type": "error",
        "code": REVOKED["code"],
        "message": REVOKED["message"],
        "param": None,
        "sequence_number": sequence_number,
    }


def sse(
    request: HttpRequest, events: AsyncIterator[StreamEvent | None], *, after: int = -1
) -> StreamingHttpResponse:
    """The stream events as server-sent events, comments as heartbeats.

    ``after``: the sequence number the stream resumes after; an ``error`` event
    that ends the stream takes the number after the last one sent.

    A client that leaves more than ``AGENTSITE_STREAM_SEND_BUFFER_MAX`` bytes
    unread (under daphne, which lets us see the connection) is waited for, and
    dropped once it has not read for ``AGENTSITE_STREAM_STALL_S``: it resumes
    with ``starting_after``, as after any broken connection. Under daphne the events
    are written to the connection, as ``sessions.sse.sse_body`` writes them.
    """
    wire = response_wire_of(getattr(request, "scope", {}))
    unread_max = int(settings.AGENTSITE_STREAM_SEND_BUFFER_MAX)
    stall_s = float(settings.AGENTSITE_STREAM_STALL_S)

    async def body() -> AsyncIterator[str]:
        last = after
        try:
            async for event in events:
                if event is None:
                    yield ": heartbeat\n\n"
                    continue
                data = json.dumps(event, separators=(",", ":"))
                text = f"event: {event['type']}\ndata: {data}\n\n"
                if wire is None:
                    yield text
                elif not await written_when_drained(wire, text.encode(), unread_max, stall_s):
                    return  # dropped as stalled, or the response is over
                last = event["sequence_number"]
        except CredentialRevoked:
            yield f"event: error\ndata: {json.dumps(revoked_event(last + 1))}\n\n"

    response = StreamingHttpResponse(body(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


def json_when_ready(document: Callable[[], Awaitable[dict[str, Any]]]) -> StreamingHttpResponse:
    """A JSON answer that is only known later, sent once it is.

    The view returns at once and the wait happens on the server's event loop as
    the body is sent: no thread is blocked while it waits (awaiting in the view
    would block the thread Django runs its synchronous middleware chain on), and
    a client that hangs up ends the wait.
    """

    async def body() -> AsyncIterator[str]:
        try:
            answer = await document()
        except CredentialRevoked:
            answer = {"error": REVOKED}
        except Exception:
            log.exception("a response the client waited for could not be read")
            error = {"message": "The server failed to answer.", "type": "server_error"}
            answer = {"error": {**error, "param": None, "code": "server_error"}}
        yield json.dumps(answer)

    return StreamingHttpResponse(body(), content_type="application/json")


def flag(request: HttpRequest, name: str) -> bool:
    return request.GET.get(name, "").lower() in ("true", "1")


def starting_after(request: HttpRequest) -> int:
    raw = request.GET.get("starting_after", "")
    if raw == "":
        return -1
    try:
        value = int(raw)
    except ValueError as exc:
        raise ApiError(
            400, "starting_after must be an integer.", param="starting_after", code="invalid_value"
        ) from exc
    return value


# --- the operations ---------------------------------------------------------------------------


@openai_endpoint(("POST",))
async def responses_create(request: HttpRequest, user: AbstractBaseUser) -> HttpResponseBase:
    create = ResponseCreate.model_validate(body_json(request))
    response = await db(response_create)(owner=user, request=create)
    credential = credential_of(request, user)
    if create.stream:
        return sse(request, response_events(response, credential=credential))
    if create.background:
        return JsonResponse(await db(response_document)(response))
    return json_when_ready(lambda: response_wait(response, credential=credential))


async def owned(user: AbstractBaseUser, response_id: str) -> AgentResponse:
    response: AgentResponse = await db(response_get)(owner=user, response_id=response_id)
    return response


@openai_endpoint(("GET", "DELETE"))
async def response_detail(
    request: HttpRequest, user: AbstractBaseUser, response_id: str
) -> HttpResponseBase:
    response = await owned(user, response_id)
    if request.method == "DELETE":
        await db(response_delete)(response=response)
        return JsonResponse({"id": response.id, "object": "response.deleted", "deleted": True})
    if flag(request, "stream"):
        credential = credential_of(request, user)
        after = starting_after(request)
        events = response_events(response, after=after, credential=credential)
        return sse(request, events, after=after)
    return JsonResponse(await db(response_document)(response))


@openai_endpoint(("POST",))
async def response_cancel_view(
    request: HttpRequest, user: AbstractBaseUser, response_id: str
) -> HttpResponseBase:
    response = await owned(user, response_id)
    return json_when_ready(lambda: response_cancel(response))


@openai_endpoint(("GET",))
async def response_input_items_view(
    request: HttpRequest, user: AbstractBaseUser, response_id: str
) -> HttpResponseBase:
    response = await owned(user, response_id)
    order = request.GET.get("order", "desc")
    if order not in ("asc", "desc"):
        raise ApiError(400, "order must be asc or desc.", param="order", code="invalid_value")
    try:
        limit = int(request.GET.get("limit", "20"))
    except ValueError:
        limit = 0
    if not 1 <= limit <= 100:
        raise ApiError(400, "limit must be 1 to 100.", param="limit", code="invalid_value")
    page = response_input_items(
        response=response, order=order, limit=limit, after=request.GET.get("after", "")
    )
    return JsonResponse(page)


@csrf_exempt
async def no_operation(request: HttpRequest, rest: str = "") -> HttpResponseBase:
    return error_response(404, f"No operation at {request.method} {request.path}.")


urlpatterns = [
    path("responses", responses_create),
    path("responses/<str:response_id>", response_detail),
    path("responses/<str:response_id>/cancel", response_cancel_view),
    path("responses/<str:response_id>/input_items", response_input_items_view),
    re_path(r"^(?P<rest>.*)$", no_operation),
]
