"""The tools a model sees, and how one tool call is carried out.

Blocking tools are offered under their own names and run inline. Each async
tool is offered as ``start_<tool>``, which starts a job and returns at once;
``get_job_status``, ``stop_job`` and ``get_job_result`` work on those jobs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from agentsite.core.errors import DomainError
from jobs import documents, inline, services
from jobs.lifecycle import job_request_cancel
from jobs.models import Job
from jobs.registry import Tool, all_tools, get_tool
from jobs.tools.workspace_paths import tool_error_message

log = logging.getLogger(__name__)

START_PREFIX = "start_"
RESULT_PAGE_SIZE = 20

START_NOTE = (
    "Starts `{name}` as a background job and returns immediately with "
    '{{"job_id", "status": "queued"}}. The result arrives later as a job_completed event '
    "in the conversation. Do not wait for it and do not poll in a loop: carry on with the "
    "conversation; use get_job_status, stop_job or get_job_result when asked."
)

JOB_ID_SCHEMA = {"type": "string", "description": "The job id, e.g. job_8f2c…"}

# Every ``start_<tool>`` takes this beside the tool's own arguments: the job
# waits until these jobs are done (and fails if one of them does not succeed).
DEPENDS_ON = "depends_on"
DEPENDS_ON_SCHEMA = {
    "type": "array",
    "items": JOB_ID_SCHEMA,
    "description": (
        "Jobs started earlier in this session that this job waits for: it starts once they "
        "are all done, and fails if one of them fails."
    ),
}

SHARED_TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_job_status",
        "description": "The current status and progress of a job started in this session.",
        "input_schema": {
            "type": "object",
            "properties": {"job_id": JOB_ID_SCHEMA},
            "required": ["job_id"],
        },
    },
    {
        "name": "stop_job",
        "description": (
            "Ask a job to stop. Returns the state actually reached: 'cancelling' while it "
            "winds down, or its final status if it had already finished."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"job_id": JOB_ID_SCHEMA},
            "required": ["job_id"],
        },
    },
    {
        "name": "get_job_result",
        "description": (
            "The result of a finished job; with a cursor (or while the job still runs), "
            "a page of its partial results from that cursor on."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "job_id": JOB_ID_SCHEMA,
                "cursor": {"type": "integer", "minimum": 0},
            },
            "required": ["job_id"],
        },
    },
]


def tool_definitions() -> list[dict[str, Any]]:
    """Every tool the model is offered, in the Messages API shape."""
    defs: list[dict[str, Any]] = []
    for spec in all_tools():
        if spec.kind == "async":
            defs.append(
                {
                    "name": f"{START_PREFIX}{spec.name}",
                    "description": f"{spec.description}\n\n{START_NOTE.format(name=spec.name)}",
                    "input_schema": start_schema(spec),
                }
            )
        else:
            defs.append(
                {
                    "name": spec.name,
                    "description": spec.description,
                    "input_schema": spec.input_schema(),
                }
            )
    return [*defs, *SHARED_TOOLS]


def start_schema(spec: Tool) -> dict[str, Any]:
    """The tool's input schema with ``depends_on`` beside its own arguments."""
    schema = spec.input_schema()
    schema.setdefault("properties", {})[DEPENDS_ON] = DEPENDS_ON_SCHEMA
    return schema


def job_idempotency_key(*, run_id: str, call_id: str) -> str:
    """A retried run re-sends the same tool call ids, so it never starts a job twice."""
    return f"agent:{run_id}:{call_id}"


def tool_execute(
    *, owner: Any, session_id: str, run_id: str, name: str, args: dict[str, Any], call_id: str
) -> tuple[Any, bool]:
    """Carry out one tool call; returns ``(output, is_error)`` and never raises."""

    try:
        return _dispatch(
            owner=owner, session_id=session_id, run_id=run_id, name=name, args=args, call_id=call_id
        ), False
    except DomainError as exc:
        error: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.details is not None:
            error["details"] = exc.details
        return {"error": error}, True
    except ValidationError as exc:
        return {"error": {"code": "invalid_arguments", "message": str(exc)}}, True
    except Exception as exc:
        log.info("tool %s failed", name, exc_info=True)
        return {"error": {"code": "tool_error", "message": tool_error_message(exc)}}, True


def _dispatch(
    *, owner: Any, session_id: str, run_id: str, name: str, args: dict[str, Any], call_id: str
) -> Any:
    if name == "get_job_status":
        return documents.job_status_doc(services.job_get(owner=owner, job_id=_job_id(args)))
    if name == "stop_job":
        job = services.job_get(owner=owner, job_id=_job_id(args))
        return {"job_id": job.id, "state": job_request_cancel(job_id=job.id)}
    if name == "get_job_result":
        return _job_result(owner=owner, args=args)
    spec = _async_tool(name)
    if spec is not None:
        tool_args = {k: v for k, v in args.items() if k != DEPENDS_ON}
        job, _ = services.job_create(
            owner=owner,
            tool=spec.name,
            args=tool_args,
            depends_on=args.get(DEPENDS_ON) or (),
            idempotency_key=job_idempotency_key(run_id=run_id, call_id=call_id),
            session_id=session_id,
            run_id=run_id,
        )
        return {"job_id": job.id, "status": "queued"}
    return inline.blocking_tool_call(owner=owner, tool=name, args=args, session_id=session_id)


def _async_tool(name: str) -> Tool | None:
    if not name.startswith(START_PREFIX):
        return None
    spec = get_tool(name.removeprefix(START_PREFIX))
    return spec if spec is not None and spec.kind == "async" else None


def _job_id(args: dict[str, Any]) -> str:
    return str(args.get("job_id", ""))


def _job_result(*, owner: Any, args: dict[str, Any]) -> Mapping[str, Any]:
    job = services.job_get(owner=owner, job_id=_job_id(args))
    cursor = args.get("cursor")
    if cursor is None and job.status == Job.Status.DONE:
        return documents.job_result_doc(job)
    if cursor is None and job.is_terminal:
        return documents.job_result_doc(job)  # raises the honest 409 (failed, cancelled…)
    page = documents.job_result_page(job, int(cursor or 0), RESULT_PAGE_SIZE)
    return {"job_id": job.id, "status": job.status, **page}
