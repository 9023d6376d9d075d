"""How a job looks as an MCP task, and how a tool's output looks as a tool result.

Two vocabularies are served: the Tasks extension of the 2026-07-28 protocol
(``ttlMs``/``pollIntervalMs``, terminal payload inline) and the core tasks of
2025-11-25 (``ttl``/``pollInterval``, payload through ``tasks/result``).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from jobs.documents import job_summary
from jobs.models import Job

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"
POLL_INTERVAL_MS = 1000
# Job rows are kept, so a task outlives this; it is the horizon clients may rely on.
TASK_TTL_MS = 7 * 24 * 3600 * 1000
MISSING_CAPABILITY = -32021
# A server error (JSON-RPC reserves -32000..-32099 for them): the caller is over one of
# its quotas; data carries {"code": "quota_exceeded", "retry_after_s", "details"}.
QUOTA_EXCEEDED = -32029


def quota_exceeded_data(*, retry_after_s: int, details: Any = None) -> dict[str, Any]:
    return {"code": "quota_exceeded", "retry_after_s": retry_after_s, "details": details}


_STATUS = {
    Job.Status.QUEUED: "working",
    Job.Status.RUNNING: "working",
    Job.Status.DONE: "completed",
    Job.Status.FAILED: "failed",
    Job.Status.TIMED_OUT: "failed",
    Job.Status.CANCELLED: "cancelled",
}


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def task_status(job: Job) -> str:
    return _STATUS[Job.Status(job.status)]


def task_status_message(job: Job) -> str:
    """What the task is doing now, or why it ended the way it did."""
    if job.status == Job.Status.RUNNING:
        return job.progress_message or "running"
    if job.status == Job.Status.QUEUED:
        return job.progress_message or "queued"
    if job.status == Job.Status.DONE:
        return job_summary(job)
    if job.status == Job.Status.TIMED_OUT:
        return f"timed out: {job.error_message}" if job.error_message else "timed out"
    if job.status == Job.Status.FAILED:
        reason = job.error_message or job.error_code or "the tool failed"
        return f"{job.error_code}: {reason}" if job.error_code and job.error_message else reason
    return job.error_message or "cancelled"


def last_updated(job: Job) -> datetime:
    """The latest recorded change; progress counts (it is a job event, not a timestamp column)."""
    moments = [job.created_at, job.started_at, job.finished_at, getattr(job, "last_event_at", None)]
    return max(m for m in moments if m is not None)


def tool_result(output: Any, *, is_error: bool = False) -> dict[str, Any]:
    """A ``CallToolResult`` wire dict: the JSON as text, and structured when it is an object."""
    text = output if isinstance(output, str) else json.dumps(output, indent=2, default=str)
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if isinstance(output, dict):
        result["structuredContent"] = output
    return result


def job_tool_result(job: Job) -> dict[str, Any]:
    """What the ``tools/call`` would have returned had it waited for the job."""
    if job.status == Job.Status.DONE:
        return tool_result(job.result)
    return tool_result(task_status_message(job), is_error=True)


def job_error(job: Job) -> dict[str, Any]:
    """The JSON-RPC error a failed task carries (2026-07-28 requires one)."""
    return {
        "code": -32603,
        "message": task_status_message(job),
        "data": {"job_id": job.id, "status": job.status, "error_code": job.error_code},
    }


def task_doc(job: Job) -> dict[str, Any]:
    """A 2026-07-28 ``DetailedTask``: terminal results and errors inline."""
    doc: dict[str, Any] = {
        "taskId": job.id,
        "status": task_status(job),
        "statusMessage": task_status_message(job),
        "createdAt": iso(job.created_at),
        "lastUpdatedAt": iso(last_updated(job)),
        "ttlMs": TASK_TTL_MS,
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    if doc["status"] == "completed":
        doc["result"] = {"resultType": "complete", **job_tool_result(job)}
    elif doc["status"] == "failed":
        doc["error"] = job_error(job)
    return doc


def create_task_result(job: Job) -> dict[str, Any]:
    """The 2026-07-28 ``CreateTaskResult`` answered to ``tools/call``."""
    doc = task_doc(job)
    doc.pop("result", None)
    doc.pop("error", None)
    return {"resultType": "task", **doc}


def legacy_task_doc(job: Job) -> dict[str, Any]:
    """A 2025-11-25 ``Task``."""
    return {
        "taskId": job.id,
        "status": task_status(job),
        "statusMessage": task_status_message(job),
        "createdAt": iso(job.created_at),
        "lastUpdatedAt": iso(last_updated(job)),
        "ttl": TASK_TTL_MS,
        "pollInterval": POLL_INTERVAL_MS,
    }


def related_task_meta(job: Job) -> dict[str, Any]:
    return {RELATED_TASK_META_KEY: {"taskId": job.id}}


def missing_capability_data() -> dict[str, Any]:
    return {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


def observed_state(job: Job) -> tuple[str, str, float | None]:
    """What a watcher compares to decide that a task changed."""
    return (job.status, job.progress_message, job.progress_fraction)
