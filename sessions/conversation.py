"""What the model is shown: the session's history and the run's batch, within budget.

History is rebuilt from the log, run by run: the batch a run consumed (as the
user's turn), then what it produced (text, tool calls, tool results). Job
events are ``job_event`` blocks that a model reads as short text
(``sessions.llm.blocks``) — never the job's whole output — and a job the model
has already reacted to (its event was in a batch of a completed run) shrinks to
one line. When the whole exceeds ``AGENTSITE_CONTEXT_BUDGET_TOKENS``, the
oldest runs are left out first.

A client tool's call (``sessions.client_tools``) is answered in a later batch:
the answer is the call's ``tool_result`` when that batch follows the call's turn,
and text when another turn came between (which saw the call unanswered).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

from django.conf import settings
from django.db.models import Q

from agentsite.compat.django import CompiledQuery
from sessions.client_tools import tools_offered
from sessions.llm.base import approx_tokens
from sessions.llm.blocks import job_event_block, wire_messages
from sessions.models import AgentSession, Event, Run
from sessions.payloads import (
    ApprovalPayload,
    AssistantMessagePayload,
    JobEventPayload,
    ToolCallPayload,
    ToolResultPayload,
    UserMessagePayload,
)

DEFAULT_SYSTEM = (
    "You are the assistant of agentsite. Slow tools run as background jobs: a start_* tool "
    "returns a job_id at once, and the outcome arrives later as an [event] block in the "
    "conversation. Never wait for a job; keep helping the user meanwhile, and when job "
    "events arrive, report them briefly. Use get_job_result for details."
)
HISTORY_KINDS = (
    Event.Kind.USER_MESSAGE,
    Event.Kind.JOB_EVENT,
    Event.Kind.APPROVAL_DECIDED,
    Event.Kind.ASSISTANT_MESSAGE,
    Event.Kind.TOOL_CALL,
    Event.Kind.TOOL_RESULT,
)
# How a question's outcome starts in the conversation (the offline model looks for it).
ANSWER_EVENT = "answer to question"
RESULT_CHARS_NOW = 8000
RESULT_CHARS_PAST = 800


@dataclass
class Conversation:
    system: str
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]] = field(default_factory=list)
    omitted_runs: int = 0
    # The offered tools the client carries out: a call of one ends the turn.
    client_tools: frozenset[str] = frozenset()

    def result_text(self, output: Any, limit: int = RESULT_CHARS_NOW) -> str:
        return clip(output, limit)

    def tokens(self) -> int:
        """What the model will read, estimated: job events count as their text."""
        messages = wire_messages(self.messages)
        return approx_tokens(self.system) + approx_tokens(self.tools) + approx_tokens(messages)


def clip(output: Any, limit: int) -> str:
    text = output if isinstance(output, str) else json.dumps(output, default=str)
    if len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more characters; ask for less or page]"


def batch_blocks(
    events: list[Event], *, compact_jobs: bool, result_chars: int = RESULT_CHARS_NOW
) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for event in events:
        if event.kind == Event.Kind.USER_MESSAGE:
            message = cast(UserMessagePayload, event.payload)
            for result in message.get("tool_results", []):
                answer = {
                    "type": "tool_result",
                    "tool_use_id": result["tool_call_id"],
                    "content": clip(result["output"], result_chars),
                    "is_error": bool(result.get("is_error")),
                }
                blocks.append(answer)
            text = str(message.get("text", "")).strip()
            if text:
                blocks.append({"type": "text", "text": text})
        elif event.kind == Event.Kind.JOB_EVENT:
            job_event = cast(JobEventPayload, event.payload)
            blocks.append(job_event_block(job_event, compact=compact_jobs))
        elif event.kind == Event.Kind.APPROVAL_DECIDED:  # only a question's enters the inbox
            blocks.append(answer_block(cast(ApprovalPayload, event.payload), result_chars))
    return blocks


def answer_block(request: ApprovalPayload, limit: int) -> dict[str, Any]:
    """A question's outcome as the model reads it: the answer, the refusal or the expiry."""
    head = f"[event] {ANSWER_EVENT} {request['id']} ({request['question'][:200]!r}):"
    if request["status"] == "answered":
        line = f"{head} the user answered {clip(json.dumps(request['answer']), limit)}"
    elif request["status"] == "rejected":
        reason = f": {request['reason']}" if request["reason"] else "."
        line = f"{head} the user declined to answer{reason}"
    else:
        line = f"{head} no answer ({request['status']})."
    return {"type": "text", "text": line}


def output_messages(events: list[Event], *, result_chars: int) -> list[dict[str, Any]]:
    """A run's own events as assistant/user messages; unanswered tool calls get closed."""
    messages: list[dict[str, Any]] = []
    open_calls: list[str] = []

    def close_open() -> None:
        if open_calls:
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": call_id,
                            "content": "No result: the turn ended first.",
                            "is_error": True,
                        }
                        for call_id in open_calls
                    ],
                }
            )
            open_calls.clear()

    for event in events:
        if event.kind == Event.Kind.ASSISTANT_MESSAGE:
            said = cast(AssistantMessagePayload, event.payload)
            if said.get("text"):
                close_open()
                text_block = {"type": "text", "text": said["text"]}
                messages.append({"role": "assistant", "content": [text_block]})
        elif event.kind == Event.Kind.TOOL_CALL:
            call = cast(ToolCallPayload, event.payload)
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": call["id"],
                "name": call["name"],
                "input": call["input"],
            }
            messages.append({"role": "assistant", "content": [block]})
            if not call.get("client"):  # a client's call is answered by a later batch
                open_calls.append(call["id"])
        elif event.kind == Event.Kind.TOOL_RESULT:
            result = cast(ToolResultPayload, event.payload)
            if result.get("tool_call_id") not in open_calls:
                continue
            open_calls.remove(result["tool_call_id"])
            block = {
                "type": "tool_result",
                "tool_use_id": result["tool_call_id"],
                "content": clip(result.get("output"), result_chars),
                "is_error": bool(result.get("is_error")),
            }
            messages.append({"role": "user", "content": [block]})
    close_open()
    return merge_roles(messages)


def merge_roles(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join consecutive messages of one role; tool results go before text in a user turn."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        if not message["content"]:
            continue
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1]["content"] = [*merged[-1]["content"], *message["content"]]
        else:
            merged.append({"role": message["role"], "content": list(message["content"])})
    for message in merged:
        if message["role"] == "user":
            content = message["content"]
            message["content"] = [b for b in content if b.get("type") == "tool_result"] + [
                b for b in content if b.get("type") != "tool_result"
            ]
    return merged


def _past_runs(session_id: str, run_id: str) -> Any:
    """The session's runs that started, but ``run_id``, oldest first."""
    started = Run.objects.filter(session_id=session_id, started_at__isnull=False)
    return started.exclude(pk=run_id).order_by("started_at", "id")


# Every turn reads its history with these two: compiled once.
_PAST_RUNS: CompiledQuery[tuple[str, str]] = CompiledQuery(
    lambda session_id, run_id: _past_runs(session_id, run_id).values_list("id", "status"),
    session_id=str,
    run_id=str,
)
# What the past runs took in and what they produced (their ids as a subquery: the
# SQL is then the same however many runs the session had).
_PAST_EVENTS: CompiledQuery[Event] = CompiledQuery(
    lambda session_id, run_id: (
        Event.objects.filter(
            session_id=session_id, kind__in=(*HISTORY_KINDS, Event.Kind.RUN_STARTED)
        )
        .filter(
            Q(consumed_by_id__in=_past_runs(session_id, run_id).order_by().values("id"))
            | Q(run_id__in=_past_runs(session_id, run_id).order_by().values("id"))
        )
        .order_by("seq")
    ),
    session_id=str,
    run_id=str,
)


def conversation_build(*, session: AgentSession, run: Run, batch: list[Event]) -> Conversation:
    """The conversation for ``run``: past runs, oldest first, then the batch."""
    tools, client_tools = tools_offered(run.client_tools)
    conv = Conversation(
        system=session.system_prompt or DEFAULT_SYSTEM, tools=tools, client_tools=client_tools
    )
    past = _PAST_RUNS.all(session_id=session.pk, run_id=run.pk)
    events = _PAST_EVENTS.all(session_id=session.pk, run_id=run.pk) if past else []
    # A run handed back by a stopping worker started more than once: only what
    # its last attempt produced counts.
    last_start = {e.run_id: e.seq for e in events if e.kind == Event.Kind.RUN_STARTED}
    groups: list[list[dict[str, Any]]] = []
    for run_id, status in past:
        consumed = [e for e in events if e.consumed_by_id == run_id]
        produced = [
            e
            for e in events
            if e.run_id == run_id
            and e.kind != Event.Kind.RUN_STARTED
            and e.seq > last_start.get(run_id, 0)
        ]
        reacted = status == Run.Status.COMPLETED
        group: list[dict[str, Any]] = []
        blocks = batch_blocks(consumed, compact_jobs=reacted, result_chars=RESULT_CHARS_PAST)
        if blocks:
            group.append({"role": "user", "content": blocks})
        group.extend(output_messages(produced, result_chars=RESULT_CHARS_PAST))
        if group:
            groups.append(group)
    current = {
        "role": "user",
        "content": batch_blocks(batch, compact_jobs=False) or [{"type": "text", "text": "(…)"}],
    }
    budget = settings.AGENTSITE_CONTEXT_BUDGET_TOKENS
    while True:
        conv.messages = _assemble(groups, current, omitted=conv.omitted_runs)
        if conv.tokens() <= budget or not groups:
            return conv
        groups.pop(0)
        conv.omitted_runs += 1


def _assemble(
    groups: list[list[dict[str, Any]]], current: dict[str, Any], *, omitted: int
) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if omitted:
        note = f"[{omitted} earlier turn(s) of this conversation are omitted to save space]"
        messages.append({"role": "user", "content": [{"type": "text", "text": note}]})
    for group in groups:
        messages.extend(group)
    messages.append(current)
    merged = merge_roles(messages)
    if merged and merged[0]["role"] != "user":
        merged.insert(0, {"role": "user", "content": [{"type": "text", "text": "(continued)"}]})
    return tool_results_paired(merged)


UNANSWERED = "No result: the client did not answer this call before the conversation went on."


def tool_results_paired(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each tool call answered in the next user message, and no result without its call.

    A client tool's call may be answered late (another turn came between, and saw
    it unanswered) or not at all: the late answer becomes text, the missing one an
    error result, as the Messages API takes no other pairing. Roles alternate
    (``merge_roles``).
    """
    paired: list[dict[str, Any]] = []
    asked: list[str] = []
    for message in messages:
        content = message["content"]
        if message["role"] == "assistant":
            asked = [b["id"] for b in content if b.get("type") == "tool_use"]
            paired.append(message)
            continue
        answers: dict[str, dict[str, Any]] = {}
        late: list[dict[str, Any]] = []
        for block in content:
            if block.get("type") != "tool_result":
                continue
            call_id = block.get("tool_use_id")
            if call_id in asked:
                answers.setdefault(call_id, block)
            else:
                late.append(
                    {"type": "text", "text": f"[result of call {call_id}] {block['content']}"}
                )
        results = [
            answers.get(call_id)
            or {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": UNANSWERED,
                "is_error": True,
            }
            for call_id in asked
        ]
        rest = [b for b in content if b.get("type") != "tool_result"]
        paired.append({**message, "content": [*results, *late, *rest]})
        asked = []
    return paired
