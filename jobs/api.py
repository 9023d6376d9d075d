"""The job REST API (``/api/jobs``) and the webhook secret (``/api/webhook-secret``).

Handlers parse, call one service, format. Service errors (``JobRequestError``
is an ``ApiError``) carry their own status and code into the API's error format.
"""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest, HttpResponse
from ninja import Field, Header, Query, Router, Schema
from ninja.responses import Status

from agentsite.api import ApiError, errors, request_user
from jobs import lifecycle, services, webhooks
from jobs.models import Job

router = Router(tags=["jobs"])


class JobStart(Schema):
    tool: str = Field(..., max_length=100)
    args: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    timeout_s: float | None = None
    callback_url: str = Field("", max_length=2000)


class JobHandle(Schema):
    job_id: str
    status: str


class Progress(Schema):
    fraction: float | None
    message: str


class JobError(Schema):
    code: str
    message: str


class JobStatus(Schema):
    job_id: str
    tool: str
    status: str
    progress: Progress
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    deadline: str | None
    depends_on: list[str]
    error: JobError | None


class JobResult(Schema):
    job_id: str
    status: str
    output: Any


class ResultPage(Schema):
    items: list[Any]
    next_cursor: int
    complete: bool


class JobPage(Schema):
    items: list[JobStatus]
    count: int
    limit: int
    offset: int


class WebhookSecretDoc(Schema):
    secret: str


ERRORS = errors(400, 404, 409, 413, 422)


@router.post(
    "/jobs",
    response={202: JobHandle, **ERRORS},
    summary="Start an async tool as a job",
    description="Requires an Idempotency-Key header: a repeat of the same request with the "
    "same key returns the same job; the key with a different request is refused (422).",
)
def job_start(
    request: HttpRequest,
    response: HttpResponse,
    body: JobStart,
    idempotency_key: str = Header("", alias="Idempotency-Key"),
) -> Status[dict[str, str]]:
    job, _ = services.job_create(
        owner=request_user(request),
        idempotency_key=idempotency_key,
        **body.dict(),
    )
    response["Location"] = f"/api/jobs/{job.id}"
    return Status(202, {"job_id": job.id, "status": "queued"})


@router.get("/jobs", response={200: JobPage, **ERRORS}, summary="Your jobs, newest first")
def job_list(
    request: HttpRequest,
    status: Literal["queued", "running", "done", "failed", "cancelled", "timed_out"] | None = None,
    tool: str | None = None,
    session_id: str | None = None,
    limit: int = Query(50, ge=1, le=200),
    offset: int = Query(0, ge=0),
) -> dict[str, Any]:
    jobs = services.job_list(
        owner=request_user(request), status=status, tool=tool, session_id=session_id
    )
    page = list(jobs[offset : offset + limit])
    return {
        "items": [services.job_status_doc(job) for job in page],
        "count": jobs.count(),
        "limit": limit,
        "offset": offset,
    }


@router.get("/jobs/{job_id}", response={200: JobStatus, **ERRORS}, summary="A job's status")
def job_status(request: HttpRequest, job_id: str) -> dict[str, Any]:
    job = services.job_get(owner=request_user(request), job_id=job_id)
    return services.job_status_doc(job)


@router.get(
    "/jobs/{job_id}/result",
    response={200: JobResult | ResultPage, **ERRORS},
    summary="A finished job's output, or pages of partial results with ?cursor=",
)
def job_result(
    request: HttpRequest,
    job_id: str,
    cursor: int | None = Query(None, ge=0),
    limit: int = Query(100, ge=1, le=500),
) -> dict[str, Any]:
    job = services.job_get(owner=request_user(request), job_id=job_id)
    if cursor is not None:
        return services.job_result_page(job=job, cursor=cursor, limit=limit)
    return services.job_result_doc(job=job)


@router.delete(
    "/jobs/{job_id}",
    response={202: JobHandle, **ERRORS},
    summary="Cancel a job",
    description="202 with the state reached: `cancelling` while a running job stops, or its "
    "final state. 409 `already_finished` once the job is final.",
)
def job_cancel(request: HttpRequest, job_id: str) -> Status[dict[str, str]]:
    job = services.job_get(owner=request_user(request), job_id=job_id)
    if job.is_terminal:
        raise ApiError(
            409,
            "already_finished",
            f"The job already ended {job.status}.",
            {"status": job.status},
        )
    try:
        state = lifecycle.job_request_cancel(job_id=job.id)
    except Job.DoesNotExist as exc:
        raise ApiError(404, "not_found", "No such job.") from exc
    return Status(202, {"job_id": job.id, "status": state})


@router.get(
    "/webhook-secret",
    response={200: WebhookSecretDoc, **ERRORS},
    tags=["webhooks"],
    summary="Your secret for verifying job callbacks (Standard Webhooks)",
)
def webhook_secret(request: HttpRequest) -> dict[str, str]:
    return {"secret": webhooks.webhook_secret_for(request_user(request))}


@router.post(
    "/webhook-secret/rotate",
    response={200: WebhookSecretDoc, **ERRORS},
    tags=["webhooks"],
    summary="Replace your webhook secret",
)
def webhook_secret_rotate(request: HttpRequest) -> dict[str, str]:
    return {"secret": webhooks.webhook_secret_rotate(request_user(request))}
