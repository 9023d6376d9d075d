"""The job REST API (``/api/jobs``) and the user's webhooks: where the user's events go
(``/api/webhooks``) and the secret they are signed with (``/api/webhook-secret``).

Handlers parse, call one service, format. Service refusals (``DomainError``) reach
the API's error format through the one status table in ``agentsite.api``.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from django.http import HttpRequest, HttpResponse
from ninja import Field, Router, Schema
from ninja.params.functions import Query
from ninja.responses import Status
from pydantic import ConfigDict

from agentsite.core.errors import Conflict, NotFound
from agentsite.core.ids import id_pattern
from agentsite.core.queries import count_up_to
from agentsite.web.auth import request_user
from agentsite.web.http import NOT_BLANK, Body, errors
from jobs import documents, lifecycle, services, webhooks
from jobs.models import CALLBACK_URL_MAX_LENGTH, IDEMPOTENCY_KEY_MAX_LENGTH, MAX_DEPENDENCIES, Job
from jobs.registry import all_tools
from jobs.retention import job_not_found_message

router = Router(tags=["jobs"])


# Offsets and cursors past this are refused (422) rather than sent to the database,
# where they overflow its integers.
MAX_POSITION = 2**31 - 1

# The job list counts at most this many jobs past the end of its page: a user with
# months of jobs gets a lower bound (``count_exact: false``) for what an exact count
# would read end to end, and each page costs about what it costs on an empty list.
COUNT_AHEAD = 1000


def job_start_variants(schema: dict[str, Any]) -> None:
    """Document the body as one variant per async tool: its arguments and its timeout.

    Built from the registry when the document is asked for, so that it lists
    the tools this deployment has (``AGENTSITE_EXTRA_TOOLS`` included), with
    the same input models and limits ``services.job_create`` validates with.
    """
    tools = [tool for tool in all_tools() if tool.kind == "async"]
    schema["properties"]["tool"]["enum"] = [tool.name for tool in tools]
    schema["oneOf"] = [
        {
            "title": f"Start {tool.name}",
            "properties": {
                "tool": {"const": tool.name},
                "args": tool.input_schema(),
                "timeout_s": {
                    "anyOf": [
                        {"type": "number", "exclusiveMinimum": 0, "maximum": tool.max_timeout_s},
                        {"type": "null"},
                    ],
                    "description": f"Seconds; default {tool.default_timeout_s:g}.",
                },
            },
        }
        for tool in tools
    ]


class JobStart(Body):
    """The body of ``POST /api/jobs``.

    Ninja checks the shape; ``services.job_create`` checks the rest (the tool,
    its arguments, the timeout, the ids, the callback) and answers with its own
    error codes. The document states both, so a body it allows is refused only
    for what a schema cannot know (an id that does not exist, a path missing
    from the workspace, a host that does not resolve).
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra=job_start_variants)

    tool: str = Field(..., max_length=100, description="An async tool (see the variants).")
    args: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments.")
    session_id: str | None = Field(
        None,
        description="One of your sessions: the job's events land in it.",
        json_schema_extra={
            "anyOf": [{"type": "string", "pattern": id_pattern("ses")}, {"type": "null"}]
        },
    )
    depends_on: list[str] = Field(
        default_factory=list,
        description="Your jobs that must be done before this one starts.",
        # Checked by services.job_create, which answers bad_dependency.
        json_schema_extra={
            "maxItems": MAX_DEPENDENCIES,
            "items": {"type": "string", "pattern": id_pattern("job")},
        },
    )
    timeout_s: float | None = Field(None, description="Lower the tool's default deadline.")
    callback_url: str = Field(
        "", max_length=2000, description="An http(s) URL to POST the final state to."
    )


# Job.Status's values, spelled out so the document names no enum component.
JobState = Literal["queued", "running", "done", "failed", "cancelled", "timed_out"]


class JobHandle(Schema):
    job_id: str
    status: JobState


class CancelHandle(Schema):
    job_id: str
    status: JobState | Literal["cancelling"]


class Progress(Schema):
    fraction: float | None
    message: str


class JobError(Schema):
    code: str
    message: str


class JobStatus(Schema):
    job_id: str
    tool: str
    status: JobState
    progress: Progress
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    deadline: str | None
    depends_on: list[str]
    error: JobError | None


class JobResult(Schema):
    job_id: str
    status: Literal["done"]
    output: Any


class ResultPage(Schema):
    items: list[Any]
    next_cursor: int
    complete: bool


class JobPage(Schema):
    items: list[JobStatus]
    count: int = Field(
        description="How many jobs match: exact when `count_exact` is true; otherwise a lower "
        f"bound, as jobs are counted only up to {COUNT_AHEAD} past the end of this page "
        f"(`offset + limit + {COUNT_AHEAD}` of them)."
    )
    count_exact: bool = Field(
        description="false when more jobs match than were counted: there are more than `count`."
    )
    limit: int
    offset: int


class JobListDoc(TypedDict):
    items: list[documents.JobStatusDoc]
    count: int
    count_exact: bool
    limit: int
    offset: int


class WebhookSecretDoc(Schema):
    secret: str


OWN_URL = (
    "Where your sessions' events go when a session names no `callback_url` of its own; "
    "empty: nowhere. Jobs' callbacks go to each job's own `callback_url` only."
)


class WebhookSettings(Body):
    """The body of ``PUT /api/webhooks``."""

    callback_url: str = Field(..., max_length=CALLBACK_URL_MAX_LENGTH, description=OWN_URL)


class WebhookSettingsDoc(Schema):
    callback_url: str = Field(description=OWN_URL)


def job_link(operation_id: str, description: str) -> dict[str, Any]:
    return {
        "operationId": operation_id,
        "parameters": {"job_id": "$response.body#/job_id"},
        "description": description,
    }


JOB_START_OPENAPI: dict[str, Any] = {
    # Read from the request by the handler, not by Ninja, so that a missing key
    # is the documented 400 idempotency_key_required rather than a schema error.
    "parameters": [
        {
            "in": "header",
            "name": "Idempotency-Key",
            "required": True,
            "description": "Any string of yours; the same key and body again return the same job.",
            "schema": {
                "type": "string",
                "minLength": 1,
                "maxLength": IDEMPOTENCY_KEY_MAX_LENGTH,
                "pattern": NOT_BLANK,
            },
        }
    ],
    "responses": {
        202: {
            "headers": {
                "Location": {
                    "description": "The job's status: /api/jobs/{job_id}.",
                    "required": True,
                    "schema": {"type": "string"},
                }
            },
            "links": {
                "JobStatus": job_link("jobs_api_job_status", "Poll the job's status."),
                "JobResult": job_link("jobs_api_job_result", "Read its output or partial results."),
                "JobCancel": job_link("jobs_api_job_cancel", "Cancel it."),
            },
        }
    },
}


@router.post(
    "/jobs",
    response={202: JobHandle, **errors(400, 422, 429)},
    summary="Start an async tool as a job",
    description="Requires an Idempotency-Key header: a repeat of the same request with the "
    "same key returns the same job; the key with a different request is refused (422).",
    openapi_extra=JOB_START_OPENAPI,
)
def job_start(
    request: HttpRequest, response: HttpResponse, body: JobStart
) -> Status[dict[str, str]]:
    job, _ = services.job_create(
        owner=request_user(request),
        idempotency_key=request.headers.get("Idempotency-Key", ""),
        **body.dict(),
    )
    response["Location"] = f"/api/jobs/{job.id}"
    return Status(202, {"job_id": job.id, "status": job.status})


@router.get(
    "/jobs",
    response={200: JobPage, **errors(422)},
    summary="Your jobs, newest first",
    description="`count` is exact up to the page's end and "
    f"{COUNT_AHEAD} jobs beyond it; past that it is a lower bound and `count_exact` is false.",
)
def job_list(
    request: HttpRequest,
    status: JobState | None = None,
    tool: str | None = None,
    session_id: str | None = None,
    limit: int = Query(50, ge=1, le=200),
    offset: int = Query(0, ge=0, le=MAX_POSITION),
) -> JobListDoc:
    jobs = services.job_list(
        owner=request_user(request), status=status, tool=tool, session_id=session_id
    )
    page = list(jobs[offset : offset + limit])
    count, exact = count_up_to(jobs, offset + limit + COUNT_AHEAD)
    return {
        "items": [documents.job_status_doc(job) for job in page],
        "count": count,
        "count_exact": exact,
        "limit": limit,
        "offset": offset,
    }


@router.get("/jobs/{job_id}", response={200: JobStatus, **errors(404)}, summary="A job's status")
def job_status(request: HttpRequest, job_id: str) -> documents.JobStatusDoc:
    job = services.job_get(owner=request_user(request), job_id=job_id)
    return documents.job_status_doc(job)


@router.get(
    "/jobs/{job_id}/result",
    response={200: JobResult | ResultPage, **errors(404, 409, 422)},
    summary="A finished job's output, or pages of partial results with ?cursor=",
    description="Without `cursor`: the output of a done job, 409 (`not_finished`, `job_failed`, "
    "`job_cancelled`, `job_timed_out`) otherwise. With `cursor`: partial results from there "
    "on, also while the job runs.",
)
def job_result(
    request: HttpRequest,
    job_id: str,
    cursor: int | None = Query(None, ge=0, le=MAX_POSITION),
    limit: int = Query(100, ge=1, le=500),
) -> documents.JobResultDoc | documents.ResultPage:
    job = services.job_get(owner=request_user(request), job_id=job_id)
    if cursor is not None:
        return documents.job_result_page(job, cursor, limit)
    return documents.job_result_doc(job)


@router.delete(
    "/jobs/{job_id}",
    response={202: CancelHandle, **errors(404, 409)},
    summary="Cancel a job",
    description="202 with the state reached: `cancelling` while a running job stops, or its "
    "final state. 409 `already_finished` once the job is final.",
)
def job_cancel(request: HttpRequest, job_id: str) -> Status[dict[str, str]]:
    job = services.job_get(owner=request_user(request), job_id=job_id)
    if job.is_terminal:
        raise Conflict(
            "already_finished",
            f"The job already ended {job.status}.",
            {"status": job.status},
        )
    try:
        state = lifecycle.job_request_cancel(job_id=job.id)
    except Job.DoesNotExist as exc:
        raise NotFound(job_not_found_message()) from exc
    return Status(202, {"job_id": job.id, "status": state})


@router.get(
    "/webhook-secret",
    response={200: WebhookSecretDoc, **errors()},
    tags=["webhooks"],
    summary="Your secret for verifying job callbacks (Standard Webhooks)",
)
def webhook_secret(request: HttpRequest) -> dict[str, str]:
    return {"secret": webhooks.webhook_secret_for(request_user(request))}


@router.post(
    "/webhook-secret/rotate",
    response={200: WebhookSecretDoc, **errors()},
    tags=["webhooks"],
    summary="Replace your webhook secret",
)
def webhook_secret_rotate(request: HttpRequest) -> dict[str, str]:
    return {"secret": webhooks.webhook_secret_rotate(request_user(request))}


SIGNED_WITH = (
    " Every delivery is signed with your secret (Standard Webhooks): read it at "
    "`GET /api/webhook-secret`."
)


@router.get(
    "/webhooks",
    response={200: WebhookSettingsDoc, **errors()},
    tags=["webhooks"],
    summary="Where your sessions' events go",
    description=OWN_URL + SIGNED_WITH,
)
def webhook_settings(request: HttpRequest) -> dict[str, str]:
    return {"callback_url": webhooks.webhook_url_of(user_id=request_user(request).pk)}


@router.put(
    "/webhooks",
    response={200: WebhookSettingsDoc, **errors(400, 422)},
    tags=["webhooks"],
    summary="Set where your sessions' events go",
    description="An address webhooks may not reach is refused (422 `callback_url_refused`); "
    "empty clears it." + SIGNED_WITH,
)
def webhook_settings_set(request: HttpRequest, body: WebhookSettings) -> dict[str, str]:
    url = webhooks.webhook_url_set(user=request_user(request), callback_url=body.callback_url)
    return {"callback_url": url}
