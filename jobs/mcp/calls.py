"""The synchronous service calls behind the MCP handlers.

Each function takes the authenticated owner and goes through ``jobs.services`` /
``jobs.lifecycle``; the async handlers call them through ``database_sync_to_async``.
Failures are raised as ``McpCallError`` carrying the JSON-RPC error the spec names.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Max, QuerySet
from mcp_types import INVALID_PARAMS

from agentsite.core.errors import DomainError, QuotaExceeded
from jobs import inline, lifecycle, services
from jobs.mcp import mapping
from jobs.models import Job
from jobs.registry import Tool, get_tool
from jobs.tools.workspace_paths import tool_error_message

TASKS_PAGE_SIZE = 50


class McpCallError(Exception):
    """A JSON-RPC error to answer with."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class ToolInputRejected(Exception):
    """The arguments did not validate: a tool execution error, reported in the result."""

    def __init__(self, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


def tool_named(name: str) -> Tool:
    tool = get_tool(name)
    if tool is None:
        raise McpCallError(INVALID_PARAMS, f"Unknown tool: {name}")
    return tool


def blocking_call(*, owner: AbstractBaseUser, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Run a blocking tool inline; its exceptions become an ``isError`` result."""
    try:
        output = inline.blocking_tool_call(owner=owner, tool=tool, args=args)
    except DomainError as exc:
        raise _from_request_error(exc) from exc
    except Exception as exc:  # the tool's own failure is a result the model can read
        return mapping.tool_result(tool_error_message(exc), is_error=True)
    return mapping.tool_result(output)


def job_start(
    *, owner: AbstractBaseUser, tool: str, args: dict[str, Any], idempotency_key: str
) -> Job:
    """Create the job behind a task; returns once the row is committed."""
    try:
        job, _ = services.job_create(
            owner=owner, tool=tool, args=args, idempotency_key=idempotency_key
        )
    except DomainError as exc:
        raise _from_request_error(exc) from exc
    return job


def task_job(*, owner: AbstractBaseUser, task_id: str) -> Job:
    """The owner's job behind ``task_id``; anyone else's is reported as not found."""
    try:
        job = services.job_get(owner=owner, job_id=task_id)
    except DomainError as exc:
        raise McpCallError(INVALID_PARAMS, "Failed to retrieve task: Task not found") from exc
    job.last_event_at = job.events.aggregate(at=Max("created_at"))["at"]  # type: ignore[attr-defined]
    return job


def owner_jobs(owner: AbstractBaseUser) -> QuerySet[Job]:
    """The owner's jobs, each with the time of its latest event (progress included)."""
    return Job.objects.filter(owner_id=owner.pk).annotate(last_event_at=Max("events__created_at"))


def task_doc(*, owner: AbstractBaseUser, task_id: str) -> dict[str, Any]:
    return mapping.task_doc(task_job(owner=owner, task_id=task_id))


def legacy_task_doc(*, owner: AbstractBaseUser, task_id: str) -> dict[str, Any]:
    return mapping.legacy_task_doc(task_job(owner=owner, task_id=task_id))


def task_cancel(*, owner: AbstractBaseUser, task_id: str) -> Job:
    """Ask the job to stop (cooperative); returns the job as it is afterwards."""
    job = task_job(owner=owner, task_id=task_id)
    if not job.is_terminal:
        lifecycle.job_request_cancel(job_id=job.id)
        job = task_job(owner=owner, task_id=task_id)
    return job


def legacy_task_cancel(*, owner: AbstractBaseUser, task_id: str) -> dict[str, Any]:
    job = task_job(owner=owner, task_id=task_id)
    if job.is_terminal:
        raise McpCallError(
            INVALID_PARAMS, f"Cannot cancel task: already in terminal status '{job.status}'"
        )
    job = task_cancel(owner=owner, task_id=task_id)
    doc = mapping.legacy_task_doc(job)
    if doc["status"] == "working":
        doc["statusMessage"] = "cancellation requested"
    return doc


def legacy_task_list(*, owner: AbstractBaseUser, cursor: str | None) -> dict[str, Any]:
    """One page of the owner's tasks, newest first; the cursor is an opaque offset."""
    offset = _offset(cursor)
    jobs = list(
        owner_jobs(owner).order_by("-created_at", "-id")[offset : offset + TASKS_PAGE_SIZE + 1]
    )
    page: dict[str, Any] = {
        "tasks": [mapping.legacy_task_doc(job) for job in jobs[:TASKS_PAGE_SIZE]]
    }
    if len(jobs) > TASKS_PAGE_SIZE:
        page["nextCursor"] = f"o{offset + TASKS_PAGE_SIZE}"
    return page


def owned_task_ids(*, owner: AbstractBaseUser, task_ids: list[str]) -> list[str]:
    found = set(Job.objects.filter(owner_id=owner.pk, id__in=task_ids).values_list("id", flat=True))
    return [task_id for task_id in task_ids if task_id in found]


def jobs_by_id(*, owner: AbstractBaseUser, task_ids: list[str]) -> dict[str, Job]:
    return {job.id: job for job in owner_jobs(owner).filter(id__in=task_ids)}


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if cursor.startswith("o") and cursor[1:].isdigit():
        return int(cursor[1:])
    raise McpCallError(INVALID_PARAMS, "Invalid cursor")


def _from_request_error(exc: DomainError) -> Exception:
    if isinstance(exc, QuotaExceeded):
        data = mapping.quota_exceeded_data(retry_after_s=exc.retry_after_s, details=exc.details)
        return McpCallError(mapping.QUOTA_EXCEEDED, exc.message, data)
    if exc.code == "invalid_arguments":
        return ToolInputRejected(exc.message, exc.details)
    if exc.code == "unknown_tool":
        return McpCallError(INVALID_PARAMS, exc.message or "Unknown tool")
    return McpCallError(INVALID_PARAMS, exc.message, {"code": exc.code, "details": exc.details})
