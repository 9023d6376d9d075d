"""What a task is in A2A's words: the ``Task`` of a ``TaskView``, and the stream updates of
its current step, from that step's Responses stream events.

The Responses projection (``responses.projection``) decides what of the log
belongs to a step and numbers its events; this module only renames them:

- the agent's text becomes an artifact per message (``answer``), streamed as
  ``TaskArtifactUpdateEvent``s that append to it, closed by one that carries the
  whole text (``lastChunk``), so a client that joins late still holds all of it;
  a ``Task`` read mid-answer carries the answer so far, and its stream goes on
  from the next chunk;
- a tool call (a job) becomes a ``working`` status update naming it, and its end
  another with its result; a ``Task`` holds the calls made so far in its history,
  as the same messages, so a client that joins after a call still sees it;
- the step's end becomes the task's final status: ``completed``, ``failed``,
  ``canceled``, or ``input-required`` with one data part per pending request.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from django.utils import timezone
from django.utils.text import slugify
from google.protobuf import json_format, struct_pb2

from a2a_api.services import (
    CANCELED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    SUBMITTED,
    WORKING,
    TaskView,
)
from responses.models import AgentResponse
from responses.projection import ResponseProjection, StreamEvent

STATES = {
    SUBMITTED: TaskState.TASK_STATE_SUBMITTED,
    WORKING: TaskState.TASK_STATE_WORKING,
    INPUT_REQUIRED: TaskState.TASK_STATE_INPUT_REQUIRED,
    COMPLETED: TaskState.TASK_STATE_COMPLETED,
    FAILED: TaskState.TASK_STATE_FAILED,
    CANCELED: TaskState.TASK_STATE_CANCELED,
}
STATE_NAMES = {value: key for key, value in STATES.items()}
ANSWER = "answer"
MARKDOWN = "text/markdown"


def data_part(value: Any) -> Part:
    data = struct_pb2.Value()
    json_format.ParseDict(json.loads(json.dumps(value, default=str)), data)
    return Part(data=data, media_type="application/json")


def agent_message(task: TaskView | None, message_id: str, *parts: Part, **ids: str) -> Message:
    if task is not None:
        ids = {"task_id": task.task.id, "context_id": task.task.session_id}
    return Message(message_id=message_id, role=Role.ROLE_AGENT, parts=list(parts), **ids)


def request_part(pending: dict[str, Any]) -> Part:
    """One request the task waits on, as the data a client decides it with; its expiry in
    ISO 8601, as ``/api/approvals`` and the log write it."""
    doc = {
        "approval_request_id": pending["id"],
        "kind": pending["kind"],
        "expires_at": pending["expires_at"].isoformat(),
    }
    if pending["kind"] == "question":
        doc |= {"question": pending["question"], "answer_schema": pending["answer_schema"]}
    else:
        doc |= {"tool": pending["tool"], "arguments": pending["arguments"]}
    return data_part(doc)


def waiting_text(pending: list[dict[str, Any]]) -> str:
    lines = []
    for p in pending:
        if p["kind"] == "question":
            lines.append(f"The agent asks: {p['question']}")
        else:
            lines.append(f"The agent asks for approval to run {p['tool']}.")
    lines.append(
        'Answer with a data part {"approval_request_id": …, "approve": true|false,'
        ' "reason": …} per request (a question\'s answer may be plain text).'
    )
    return "\n".join(lines)


def status_of(view: TaskView, when: datetime | None = None) -> TaskStatus:
    """The task's status, with the message that says why for a task that waits or failed."""
    status = TaskStatus(state=STATES[view.state])
    status.timestamp.FromDatetime(when or view.status_at or timezone.now())
    step_id = view.task.current_response_id
    if view.state == INPUT_REQUIRED:
        parts = [Part(text=waiting_text(view.pending)), *map(request_part, view.pending)]
        status.message.CopyFrom(agent_message(view, f"{step_id}-input", *parts))
    elif view.state == FAILED and view.current.error:
        text = str(view.current.error.get("message", "The task failed."))
        status.message.CopyFrom(agent_message(view, f"{step_id}-error", Part(text=text)))
    return status


def _user_message(view: TaskView, n: int, response: AgentResponse) -> Message:
    parts: list[Part] = []
    for item in response.input_items:
        if item["type"] == "message":
            text = "".join(part["text"] for part in item["content"])
            parts.append(Part(text=text))
        elif item["type"] == "mcp_approval_response":
            parts.append(
                data_part(
                    {
                        "approval_request_id": item["approval_request_id"],
                        "approve": item["approve"],
                        "reason": item.get("reason") or "",
                    }
                )
            )
    message_id = view.task.message_ids[n] if n < len(view.task.message_ids) else ""
    return Message(
        message_id=message_id or f"{response.id}-input",
        role=Role.ROLE_USER,
        parts=parts,
        task_id=view.task.id,
        context_id=view.task.session_id,
    )


def _answers(step: ResponseProjection) -> list[tuple[str, str, bool]]:
    """Each answer of the step with text: its id, its text, and whether it is whole.

    An answer still being written holds no text in its item until it closes: the
    projection keeps what has come of it beside the item. A task read now shows that
    much, and its stream goes on from the next delta (``StepUpdates``), so nothing
    written before the read is lost to a client that joins mid-answer.
    """
    so_far = {message.id: message.text for message in step.messages.values()}
    answers = []
    for item in step.output:
        if item["type"] != "message":
            continue
        whole = item["id"] not in so_far
        text = _text(item) if whole else so_far[item["id"]]
        if text:
            answers.append((item["id"], text, whole))
    return answers


def _text(item: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for part in item.get("content", []))


def task_of(view: TaskView) -> Task:
    """The ``Task``: its status, one artifact per answer (an open one as far as it has
    come), the history of its messages (whole ones)."""
    task = Task(id=view.task.id, context_id=view.task.session_id, status=status_of(view))
    for n, (response, step) in enumerate(zip(view.inputs, view.steps, strict=True)):
        task.history.append(_user_message(view, n, response))
        answers = {item_id: (text, whole) for item_id, text, whole in _answers(step)}
        for item in step.output:
            if item["id"] in answers:
                text, whole = answers[item["id"]]
                task.artifacts.append(
                    Artifact(artifact_id=item["id"], name=ANSWER, parts=[Part(text=text)])
                )
                if whole:
                    task.history.append(agent_message(view, item["id"], Part(text=text)))
            elif item["type"] == "mcp_call":
                task.history.extend(agent_message(view, *m) for m in _call_messages(item))
    task.artifacts.extend(report_artifact(report) for report in view.reports)
    return task


def _call_messages(item: dict[str, Any]) -> list[tuple[Any, ...]]:
    """A tool call as the agent's messages: its start (the tool and its arguments) and,
    once it has ended, its result; each a message id and its parts. A stream's status
    updates and a task's history carry the same ones, so a client that reads the task
    mid-step still holds the calls made before it joined."""
    call = {"tool": item["name"], "arguments": json.loads(item["arguments"] or "{}")}
    messages: list[tuple[Any, ...]] = [
        (item["id"], Part(text=f"Calling {item['name']}."), data_part(call))
    ]
    if item["status"] != "in_progress":
        ok = item["status"] == "completed"
        text = f"{item['name']} {'finished' if ok else 'failed'}."
        result = {"tool": item["name"], "output": item.get("output"), "error": item.get("error")}
        messages.append((f"{item['id']}-done", Part(text=text), data_part(result)))
    return messages


def report_artifact(report: dict[str, str]) -> Artifact:
    """A report a job wrote: its markdown as text, and as a file to save."""
    markdown = report["markdown"]
    filename = f"{slugify(report['title'])[:80] or 'report'}-{report['job_id']}.md"
    return Artifact(
        artifact_id=report["job_id"],
        name=report["title"],
        description=report["summary"],
        parts=[
            Part(text=markdown, media_type=MARKDOWN),
            Part(raw=markdown.encode(), filename=filename, media_type=MARKDOWN),
        ],
    )


class StepUpdates:
    """The A2A updates of one step's Responses stream events (one instance per stream)."""

    def __init__(self, view: TaskView) -> None:
        self.task_id = view.task.id
        self.context_id = view.task.session_id
        # Answers the client holds part of already (from the Task it was sent first).
        self.started = {item_id for item_id, _, _ in _answers(view.current)}
        self.started |= {report["job_id"] for report in view.reports}
        self.working = view.state == WORKING

    def updates(self, event: StreamEvent) -> list[TaskStatusUpdateEvent | TaskArtifactUpdateEvent]:
        kind = event["type"]
        if kind == "job.progress":
            return [self._progress(event["payload"])]
        if kind == "response.in_progress" and not self.working:
            self.working = True
            return [self._status(WORKING)]
        if kind == "response.output_text.delta":
            item_id = str(event["item_id"])
            append = item_id in self.started
            self.started.add(item_id)
            return [self._artifact(item_id, str(event["delta"]), append=append, last=False)]
        if kind == "response.output_item.done" and event["item"]["type"] == "message":
            item = event["item"]
            if not _text(item):
                return []
            return [self._artifact(item["id"], _text(item), append=False, last=True)]
        if kind == "response.output_item.added" and event["item"]["type"] == "mcp_call":
            return [self._status(WORKING, *_call_messages(event["item"])[0])]
        if kind == "response.output_item.done" and event["item"]["type"] == "mcp_call":
            return [self._status(WORKING, *_call_messages(event["item"])[-1])]
        return []

    def reports(self, view: TaskView) -> list[TaskArtifactUpdateEvent]:
        """The reports the step's jobs wrote, each whole in one update (once per stream)."""
        updates = []
        for report in view.reports:
            if report["job_id"] in self.started:
                continue
            self.started.add(report["job_id"])
            updates.append(
                TaskArtifactUpdateEvent(
                    task_id=self.task_id,
                    context_id=self.context_id,
                    artifact=report_artifact(report),
                    append=False,
                    last_chunk=True,
                )
            )
        return updates

    def final(self, view: TaskView) -> TaskStatusUpdateEvent:
        """The update that ends the stream: the task's state once its step has ended."""
        return TaskStatusUpdateEvent(
            task_id=self.task_id, context_id=self.context_id, status=status_of(view)
        )

    def _progress(self, payload: dict[str, Any]) -> TaskStatusUpdateEvent:
        """A job's progress: ``working``, with the fraction done and what it is doing."""
        progress = payload.get("progress") or {}
        doc = {
            "job_id": payload["job_id"],
            "tool": payload.get("tool", ""),
            "progress": progress.get("fraction"),
            "message": progress.get("message", ""),
        }
        text = f"{doc['tool']}: {doc['message']}".strip(": ")
        message_id = f"{payload['job_id']}-progress-{progress.get('fraction')}"
        return self._status(WORKING, message_id, Part(text=text), data_part(doc))

    def _status(self, state: str, message_id: str = "", *parts: Part) -> TaskStatusUpdateEvent:
        status = TaskStatus(state=STATES[state])
        status.timestamp.FromDatetime(timezone.now())
        if parts:
            ids = {"task_id": self.task_id, "context_id": self.context_id}
            status.message.CopyFrom(agent_message(None, message_id, *parts, **ids))
        return TaskStatusUpdateEvent(
            task_id=self.task_id, context_id=self.context_id, status=status
        )

    def _artifact(self, item_id: str, text: str, *, append: bool, last: bool) -> Any:
        return TaskArtifactUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            artifact=Artifact(artifact_id=item_id, name=ANSWER, parts=[Part(text=text)]),
            append=append,
            last_chunk=last,
        )
