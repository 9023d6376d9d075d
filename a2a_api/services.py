"""A2A tasks over responses: open one, continue it after input, read, list, cancel.

A task's every step is a response (``responses.services``); its state is that
of its current step as the log has it (``responses.projection``), with one
addition the Responses API has no word for: a step that ended asking the user
(an approval, a question) leaves the task ``input-required`` for as long as one
of those requests is pending. This module knows no A2A wire type: the edge
(``a2a_api.handler``) maps what it returns onto the protocol's messages.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from a2a_api.models import AgentTask
from agentsite.core.errors import Conflict, Invalid, NotFound
from agentsite.core.ids import is_id
from agentsite.core.queries import get_or_none
from jobs.models import Job
from responses.models import AgentResponse
from responses.payloads import ResponseCreate
from responses.projection import ResponseProjection
from responses.services import DEFAULT_MODEL, response_create, response_project
from sessions.approvals import approval_cancel
from sessions.models import Approval, Event
from sessions.services import session_for

# The states a task ends in; input-required is where it waits, not an end.
SUBMITTED, WORKING, INPUT_REQUIRED = "submitted", "working", "input-required"
COMPLETED, FAILED, CANCELED = "completed", "failed", "canceled"
TERMINAL = frozenset({COMPLETED, FAILED, CANCELED})
PAGE_SIZE_MAX = 100
_STATUS_STATE = {
    "queued": SUBMITTED,
    "in_progress": WORKING,
    "completed": COMPLETED,
    "failed": FAILED,
    "incomplete": FAILED,
    "cancelled": CANCELED,
}


@dataclass(frozen=True)
class Decision:
    """A decision on one of the agent's requests, as a message's data part carries it."""

    request_id: str
    approve: bool
    reason: str = ""


@dataclass
class TaskView:
    """A task as the log has it now: its steps' projections, oldest first."""

    task: AgentTask
    steps: list[ResponseProjection]
    inputs: list[AgentResponse]
    state: str
    pending: list[dict[str, Any]] = field(default_factory=list)
    # The reports its jobs wrote (write_report), oldest first.
    reports: list[dict[str, str]] = field(default_factory=list)
    # When the log last moved it: its current step's last event (or the step's creation).
    status_at: datetime | None = None

    @property
    def current(self) -> ResponseProjection:
        return self.steps[-1]


# --- opening and continuing ------------------------------------------------------------------


def task_send(
    *,
    owner: Any,
    text: str,
    decisions: list[Decision],
    task_id: str = "",
    context_id: str = "",
    message_id: str = "",
) -> AgentTask:
    """A message to a new task (in the session ``context_id``, else a new session) or to
    the task ``task_id`` that waits for the user's input.

    A task that waits takes decisions on its pending requests; a plain text answers
    its one pending question. One that works or has ended takes no message (Conflict).
    """
    if task_id:
        return _task_continue(
            owner=owner,
            task_id=task_id,
            context_id=context_id,
            text=text,
            decisions=decisions,
            message_id=message_id,
        )
    if decisions:
        raise Invalid(
            "no_task",
            "A decision answers a request of a task waiting for input: send it with that"
            " task's taskId.",
        )
    if not text.strip():
        raise Invalid("empty_message", "The message has no text.")
    session = None
    if context_id:
        try:
            session = session_for(owner=owner, session_id=context_id)
        except NotFound as exc:
            raise Invalid("context_not_found", f"No context with id {context_id!r}.") from exc
    request = ResponseCreate(model=DEFAULT_MODEL, input=text, background=True)
    with transaction.atomic():
        response = response_create(owner=owner, request=request, session=session)
        return AgentTask.objects.create(
            owner=owner,
            session_id=response.session_id,
            response_ids=[response.id],
            message_ids=[message_id],
        )


def _task_continue(
    *,
    owner: Any,
    task_id: str,
    context_id: str,
    text: str,
    decisions: list[Decision],
    message_id: str,
) -> AgentTask:
    task = task_for(owner=owner, task_id=task_id)
    if context_id and context_id != task.session_id:
        raise Invalid("context_mismatch", f"The task {task_id!r} is in another context.")
    view = task_view(task)
    if view.state != INPUT_REQUIRED:
        raise Conflict(
            "task_not_waiting",
            f"The task is {view.state}: only a task waiting for input takes another message.",
            details={"state": view.state},
        )
    pending = {p["id"]: p for p in view.pending}
    if not decisions:
        questions = [p for p in view.pending if p["kind"] == Approval.Kind.QUESTION]
        if len(view.pending) == 1 and questions and text.strip():
            decisions, text = [Decision(questions[0]["id"], True, text)], ""
        else:
            raise Invalid(
                "decision_required",
                "The task waits for a decision on each of its requests: send a data part"
                ' {"approval_request_id": …, "approve": true|false, "reason": …} for each.',
                details={"pending": sorted(pending)},
            )
    for decision in decisions:
        if decision.request_id not in pending:
            raise Invalid(
                "unknown_approval_request",
                f"No pending request with id {decision.request_id!r} in this task.",
                details={"pending": sorted(pending)},
            )
    items: list[dict[str, Any]] = [
        {
            "type": "mcp_approval_response",
            "approval_request_id": d.request_id,
            "approve": d.approve,
            "reason": d.reason or None,
        }
        for d in decisions
    ]
    if text.strip():
        items.append({"type": "message", "role": "user", "content": text})
    request = ResponseCreate(
        model=DEFAULT_MODEL,
        input=items,
        background=True,
        previous_response_id=task.current_response_id,
    )
    with transaction.atomic():
        locked = AgentTask.objects.select_for_update().get(pk=task.pk)
        if locked.response_ids != task.response_ids:
            raise Conflict("task_moved", "Another message continued the task first.")
        response = response_create(owner=owner, request=request)
        locked.response_ids = [*locked.response_ids, response.id]
        locked.message_ids = [*locked.message_ids, message_id]
        locked.save(update_fields=["response_ids", "message_ids", "updated_at"])
        return locked


def decision_of(data: dict[str, Any]) -> Decision | None:
    """A decision a message's data part carries, if it is one; Invalid if it is half one."""
    if "approval_request_id" not in data:
        return None
    request_id, approve, reason = (
        data.get("approval_request_id"),
        data.get("approve"),
        data.get("reason", ""),
    )
    if not isinstance(request_id, str) or not isinstance(approve, bool):
        raise Invalid(
            "invalid_decision",
            'A decision is {"approval_request_id": "apr_…", "approve": true|false, "reason": "…"}.',
        )
    if not isinstance(reason, str):
        reason = json.dumps(reason)
    return Decision(request_id, approve, reason)


# --- reading ---------------------------------------------------------------------------------


def task_for(*, owner: Any, task_id: str) -> AgentTask:
    """The owner's task; anyone else's, an unknown one, and one whose session was
    deleted, are not found."""
    found = None
    if is_id("task", task_id):
        found = get_or_none(
            AgentTask.objects.filter(
                pk=task_id, owner_id=owner.pk, session__deleted_at__isnull=True
            )
        )
    if found is None:
        raise NotFound(f"No task with id {task_id!r}.", details={"param": "id"})
    return found


def task_view(task: AgentTask) -> TaskView:
    """The task's steps projected from the log, and its state."""
    responses = {r.pk: r for r in AgentResponse.objects.filter(pk__in=task.response_ids)}
    inputs = [responses[rid] for rid in task.response_ids]
    steps = [response_project(r) for r in inputs]
    for step in steps:
        step.take()
    state, pending = task_state(task, steps[-1])
    return TaskView(
        task=task,
        steps=steps,
        inputs=inputs,
        state=state,
        pending=pending,
        reports=task_reports(steps),
        status_at=_moved_at(inputs[-1], steps[-1]),
    )


def _moved_at(response: AgentResponse, step: ResponseProjection) -> datetime:
    seq = step.position if step.end_seq is None else step.end_seq
    moved = Event.objects.filter(
        session_id=response.session_id, seq=seq, seq__gte=response.input_seq
    ).values_list("created_at", flat=True)
    return moved.first() or response.created_at


def task_reports(steps: list[ResponseProjection]) -> list[dict[str, str]]:
    """The markdown reports the steps' jobs wrote: each job's id, title, summary, text."""
    job_ids = [job_id for step in steps for job_id in step.jobs]
    if not job_ids:
        return []
    done = Job.objects.filter(pk__in=job_ids, status=Job.Status.DONE).order_by("created_at", "id")
    reports = []
    for job_id, result in done.values_list("id", "result"):
        if isinstance(result, dict) and isinstance(result.get("markdown"), str):
            reports.append(
                {
                    "job_id": job_id,
                    "title": str(result.get("title") or job_id),
                    "summary": str(result.get("summary") or ""),
                    "markdown": result["markdown"],
                }
            )
    return reports


def task_state(task: AgentTask, current: ResponseProjection) -> tuple[str, list[dict[str, Any]]]:
    """The state of a task whose current step is ``current``, and its pending requests."""
    state = _STATUS_STATE[current.status]
    if state != COMPLETED:
        return (CANCELED if task.canceled_at and current.ended else state), []
    if task.canceled_at:
        return CANCELED, []
    asked = [item["id"] for item in current.output if item["type"] == "mcp_approval_request"]
    if not asked:
        return COMPLETED, []
    pending = [
        {
            "id": a.pk,
            "kind": a.kind,
            "tool": a.tool,
            "arguments": a.arguments,
            "question": a.question,
            "answer_schema": a.answer_schema,
            "expires_at": a.expires_at,
        }
        for a in Approval.objects.filter(pk__in=asked, status=Approval.Status.PENDING).order_by(
            "created_at"
        )
    ]
    return (INPUT_REQUIRED if pending else COMPLETED), pending


def task_list(
    *, owner: Any, context_id: str = "", page_size: int = 50, page_token: str = ""
) -> tuple[list[AgentTask], str, int]:
    """A page of the owner's tasks, newest first; the next page's token ("" at the end)
    and how many there are in all."""
    if not 0 <= page_size <= PAGE_SIZE_MAX:
        raise Invalid("invalid_page_size", f"pageSize must be from 1 to {PAGE_SIZE_MAX}.")
    tasks = AgentTask.objects.filter(owner_id=owner.pk, session__deleted_at__isnull=True)
    if context_id:
        tasks = tasks.filter(session_id=context_id)
    total = tasks.count()
    if page_token:
        created_at, task_id = _cursor(page_token)
        tasks = tasks.filter(created_at__lte=created_at).exclude(
            created_at=created_at, id__gte=task_id
        )
    page = list(tasks.order_by("-created_at", "-id")[: (page_size or 50) + 1])
    more = len(page) > (page_size or 50)
    page = page[: page_size or 50]
    return page, (task_cursor(page[-1]) if more else ""), total


def task_cursor(task: AgentTask) -> str:
    """The page token of the page that starts after ``task``."""
    raw = f"{task.created_at.isoformat()}|{task.id}".encode()
    return base64.urlsafe_b64encode(raw).decode()


def _cursor(token: str) -> tuple[Any, str]:
    try:
        created_at, task_id = base64.urlsafe_b64decode(token.encode()).decode().split("|")
        when = datetime.fromisoformat(created_at)
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise Invalid("invalid_page_token", "The pageToken is not one this server gave.") from exc
    return when, task_id


# --- cancelling ------------------------------------------------------------------------------


def task_cancel_waiting(*, task: AgentTask) -> None:
    """Cancel a task that waits for input: its pending requests are cancelled (their
    held calls with them) and the task ends canceled."""
    pending = task_view(task).pending
    with transaction.atomic():
        locked = AgentTask.objects.select_for_update().get(pk=task.pk)
        if locked.canceled_at is None:
            locked.canceled_at = timezone.now()
            locked.save(update_fields=["canceled_at", "updated_at"])
    for request in pending:
        approval_cancel(approval_id=request["id"], reason="The task was cancelled.")
    task.refresh_from_db()
