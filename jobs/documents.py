"""How a job is told to the outside: event names, status documents, payloads, result pages.

One vocabulary for every reader of a job: the REST API, MCP, the agent's
toolbox, webhooks, session events and the channel layer all build their
bodies here, so a job looks the same wherever it is read. Nothing here writes.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, TypedDict

from agentsite.core.errors import BadRequest, Conflict
from jobs.models import Job, JobChunk
from jobs.registry import get_tool


class JobEventName(StrEnum):
    """What a transition publishes (the ``event`` of a ``JobEvent`` and of its payloads)."""

    QUEUED = "job_queued"
    STARTED = "job_started"
    PROGRESS = "job_progress"
    COMPLETED = "job_completed"
    FAILED = "job_failed"
    CANCELLED = "job_cancelled"
    TIMED_OUT = "job_timed_out"

    @property
    def is_final(self) -> bool:
        return self in FINAL_JOB_EVENTS


# The event each final status publishes.
FINAL_EVENT_OF: dict[str, JobEventName] = {
    Job.Status.DONE: JobEventName.COMPLETED,
    Job.Status.FAILED: JobEventName.FAILED,
    Job.Status.CANCELLED: JobEventName.CANCELLED,
    Job.Status.TIMED_OUT: JobEventName.TIMED_OUT,
}
FINAL_JOB_EVENTS: frozenset[JobEventName] = frozenset(FINAL_EVENT_OF.values())


class ProgressDoc(TypedDict):
    fraction: float | None
    message: str


class ErrorDoc(TypedDict):
    code: str
    message: str


class JobStatusDoc(TypedDict):
    """The body of ``GET /api/jobs/{id}`` (and a webhook's ``data``)."""

    job_id: str
    tool: str
    status: str
    progress: ProgressDoc
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    deadline: str | None
    depends_on: list[str]
    error: ErrorDoc | None


class JobEventPayload(TypedDict):
    """The payload of a ``JobEvent`` row and of the session's ``job_event``."""

    event: str
    job_id: str
    tool: str
    status: str
    progress: ProgressDoc
    summary: str
    error: ErrorDoc | None
    partial_count: int


class JobResultDoc(TypedDict):
    """The 200 body of ``/result`` for a done job."""

    job_id: str
    status: str
    output: Any  # whatever the tool returned: free-form JSON


class ResultPage(TypedDict):
    """Partial results from a cursor on."""

    items: list[Any]  # the tool's partial results: free-form JSON
    next_cursor: int
    complete: bool


class WebhookBody(TypedDict):
    type: str
    timestamp: str
    data: JobStatusDoc


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def job_progress_doc(job: Job) -> ProgressDoc:
    return {"fraction": job.progress_fraction, "message": job.progress_message}


def job_error(job: Job) -> ErrorDoc | None:
    if not job.error_code:
        return None
    return {"code": job.error_code, "message": job.error_message}


def job_status_doc(job: Job) -> JobStatusDoc:
    return {
        "job_id": job.id,
        "tool": job.tool,
        "status": job.status,
        "progress": job_progress_doc(job),
        "created_at": _iso(job.created_at),
        "started_at": _iso(job.started_at),
        "finished_at": _iso(job.finished_at),
        "deadline": _iso(job.deadline),
        "depends_on": list(job.dependency_ids),
        "error": job_error(job),
    }


def job_summary(job: Job) -> str:
    """One line about a job, for completion events and compact history."""
    if job.status == Job.Status.DONE:
        tool = get_tool(job.tool)
        summary = tool.summary(job.result) if tool is not None else ""
        return summary or "done"
    if job.is_terminal:
        return f"{job.status}: {job.error_message}" if job.error_message else str(job.status)
    if job.progress_message:
        return job.progress_message
    return str(job.status)


def job_event_payload(job: Job, event: JobEventName) -> JobEventPayload:
    return {
        "event": str(event),
        "job_id": job.id,
        "tool": job.tool,
        "status": job.status,
        "progress": job_progress_doc(job),
        "summary": job_summary(job),
        "error": job_error(job),
        "partial_count": job.partial_count,
    }


def webhook_body(job: Job, event: JobEventName, timestamp: str) -> WebhookBody:
    return {"type": str(event), "timestamp": timestamp, "data": job_status_doc(job)}


RESULT_ERRORS = {
    Job.Status.FAILED: ("job_failed", "The job failed."),
    Job.Status.CANCELLED: ("job_cancelled", "The job was cancelled."),
    Job.Status.TIMED_OUT: ("job_timed_out", "The job ran past its deadline."),
}


def job_result_doc(job: Job) -> JobResultDoc:
    """The output of a done job; ``Conflict`` (with the reason) for any other job."""
    if job.status == Job.Status.DONE:
        return {"job_id": job.id, "status": job.status, "output": job.result}
    if job.status in RESULT_ERRORS:
        code, message = RESULT_ERRORS[Job.Status(job.status)]
        raise Conflict(
            code,
            message,
            {"reason": job.error_code, "message": job.error_message, "status": job.status},
        )
    raise Conflict(
        "not_finished",
        f"The job is {job.status}; its partial results are at ?cursor=0.",
        {"status": job.status},
    )


RESULT_PAGE_MAX = 500


def job_result_page(job: Job, cursor: int, limit: int) -> ResultPage:
    """Partial results from ``cursor`` on; ``complete`` once the job ended and all were read."""
    if cursor < 0 or limit < 1:
        raise BadRequest("invalid_cursor", "cursor must be ≥ 0 and limit ≥ 1.")
    limit = min(limit, RESULT_PAGE_MAX)
    terminal = job.is_terminal
    items = list(
        JobChunk.objects.filter(job=job, index__gte=cursor)
        .order_by("index")
        .values_list("item", flat=True)[:limit]
    )
    next_cursor = cursor + len(items)
    # A job that has ended adds no more partial results: its count is final.
    complete = terminal and next_cursor >= job.partial_count
    return {"items": items, "next_cursor": next_cursor, "complete": complete}
