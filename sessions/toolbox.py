"""How one tool call of a model is carried out (what it is offered: ``sessions.tool_catalog``).

Blocking tools run inline; ``start_<tool>`` starts a job and returns at once;
``get_job_status``, ``stop_job`` and ``get_job_result`` work on those jobs. A call
its user must approve first (``sessions.approvals``) returns at once too, with
its job waiting behind the approval; ``ask_user`` asks a question the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from agentsite.core.errors import DomainError, Invalid
from jobs import documents, inline, services
from jobs.lifecycle import job_request_cancel
from jobs.models import Job
from jobs.registry import Tool, get_tool
from jobs.tools.workspace_paths import tool_error_message
from sessions import approvals
from sessions.models import AgentSession
from sessions.services import session_for
from sessions.tool_catalog import (  # tool_definitions: re-exported for the loop's callers
    ASK_USER,
    DEPENDS_ON,
    RESULT_PAGE_SIZE,
    START_PREFIX,
    tool_definitions,
)

__all__ = ["job_idempotency_key", "tool_definitions", "tool_execute"]

log = logging.getLogger(__name__)


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
    if name == ASK_USER:
        return approvals.question_ask(
            session=_session(owner, session_id),
            run_id=run_id,
            call_id=call_id,
            question=str(args.get("question", "")),
            answer_schema=_schema_arg(args.get("answer_schema")),
        )
    spec = _async_tool(name)
    called = spec or _blocking_tool(name)
    if called is not None:
        session = _session(owner, session_id)
        if approvals.approval_needed(session=session, tool=called):
            return approvals.approval_request_call(
                session=session,
                run_id=run_id,
                call_id=call_id,
                tool=called,
                args={k: v for k, v in args.items() if k != DEPENDS_ON},
                depends_on=args.get(DEPENDS_ON) or () if spec is not None else (),
            )
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


def _blocking_tool(name: str) -> Tool | None:
    spec = get_tool(name)
    return spec if spec is not None and spec.kind == "blocking" else None


def _session(owner: Any, session_id: str) -> AgentSession:
    return session_for(owner=owner, session_id=session_id)


def _schema_arg(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise Invalid("invalid_arguments", "answer_schema must be a JSON object.")
    return value


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
