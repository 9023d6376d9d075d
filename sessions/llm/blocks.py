"""A job event in a conversation: a block that carries its payload, and the text a model reads.

The conversation (``sessions.conversation``) shows a job event to the model as
a block of agentsite's own, ``{"type": "job_event", "event": <payload>,
"compact": bool}``, next to the Messages API's ``text``, ``tool_use`` and
``tool_result`` blocks. A client that sends the conversation to a model API
sends ``wire_messages``: each such block becomes the short ``[event]`` text
below, the only form a real model ever sees. The offline model reads the
payload itself.
"""

from __future__ import annotations

from typing import Any, cast

from sessions.payloads import JobEventPayload

JOB_EVENT_BLOCK = "job_event"


def job_event_block(payload: JobEventPayload, *, compact: bool) -> dict[str, Any]:
    """The block a job event becomes (``compact``: shown as one line)."""
    return {"type": JOB_EVENT_BLOCK, "event": payload, "compact": compact}


def job_event_of(block: dict[str, Any]) -> JobEventPayload | None:
    """The payload a job event block carries; None for any other block."""
    if block.get("type") != JOB_EVENT_BLOCK:
        return None
    return cast(JobEventPayload, block["event"])


def job_event_text(payload: JobEventPayload, *, compact: bool) -> str:
    """The short text a job event is shown as (``compact``: the one-line form)."""
    head = (
        f"[event] {payload.get('event', 'job_event')} job_id={payload.get('job_id')} "
        f"tool={payload.get('tool')} status={payload.get('status')}"
    )
    summary = str(payload.get("summary") or "").strip().replace("\n", " ")
    error = payload.get("error") or None
    if compact:
        return f"{head} — {summary}" if summary else head
    lines = [head]
    if summary:
        lines.append(f"summary: {summary}")
    if isinstance(error, dict) and error.get("message"):
        lines.append(f"error: {error.get('code')}: {error.get('message')}")
    lines.append(f"details: get_job_result({payload.get('job_id')})")
    return "\n".join(lines)


def wire_block(block: dict[str, Any]) -> dict[str, Any]:
    payload = job_event_of(block)
    if payload is None:
        return block
    return {"type": "text", "text": job_event_text(payload, compact=bool(block.get("compact")))}


def wire_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as the Messages API takes it: job event blocks as their text."""
    wired: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(b.get("type") == JOB_EVENT_BLOCK for b in content):
            message = {**message, "content": [wire_block(b) for b in content]}
        wired.append(message)
    return wired
