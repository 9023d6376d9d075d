"""A response, derived from its session's event log: status, output items, stream events.

The log is the one source of truth; this module keeps no copy of it. Fed the
session's events in seq order (from the response's input on), a
``ResponseProjection`` decides which of them belong to the response and turns
those into Responses-API stream events, numbered from 0. Because the
decisions only depend on facts that are fixed before the events they concern
(a run's batch is claimed before the run writes anything; a job's run is
recorded when the job is created), projecting the same log twice yields the
same events with the same ``sequence_number``s: a stream resumed after N
simply drops the first N + 1.

Which runs belong to a response (docs/api/responses.md says the same):

- its triggers are its input message and the final event (done, failed,
  cancelled, timed out) of each of its jobs;
- a run belongs to it when the run's batch holds one of its triggers, whatever
  else the batch holds (a browser message, another response's trigger): one
  model turn answers its whole batch, so its whole output is in each response
  whose trigger it took;
- a job belongs to it when one of its runs started the job.

It ends at the first point of the log where none of its runs is live, none of
its triggers waits in the inbox and each of its jobs has ended and been
reported on; its status is then that of its last run. Once a cancel was asked
for (at ``cancel_seq``), it ends as soon as its runs and jobs have ended,
reported or not, ``cancelled``. Nothing after its end belongs to it.

The model's text becomes ``message`` items, agentsite's tool calls ``mcp_call``
items, and its calls of the client's function tools (``tool_call`` events marked
``client``) ``function_call`` items: the turn ends on such a call, and with it,
as nothing else waits, the response.

A request of one of its runs for the user's answer (``approval_requested``)
becomes an ``mcp_approval_request`` item; a call held for approval does not hold
the response open, whose job is then no longer its own: it belongs to the
response that carries the decision (``Header.decides``). Such a response's
triggers are its decisions' consequences: the job's final event, or the answer
to a question in the inbox; its input message, when it has one, is the first
``user_message`` from ``input_seq`` on (its decisions are logged just before it,
in the same transaction).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

SERVER_LABEL = "agentsite"
FINAL_JOB_STATUSES = frozenset({"done", "failed", "cancelled", "timed_out"})
TERMINAL = frozenset({"completed", "failed", "cancelled", "incomplete"})
# The log events whose projection may read ``Facts`` (a run's batch, a job's run, usage).
FACT_KINDS = frozenset({"run_started", "job_event", "run_finished", "run_requeued"})

StreamEvent = dict[str, Any]
LogEvent = dict[str, Any]  # {"seq", "kind", "payload", "run_id"}


class Facts(Protocol):
    """What the projection must know beyond the log (read from the database)."""

    def batch_seqs(self, run_id: str) -> set[int]:
        """The seqs of the events a run consumed as its batch."""

    def job_run(self, job_id: str) -> str | None:
        """The run that started a job."""

    def usage(self, run_ids: Iterable[str]) -> dict[str, int]:
        """Input and output tokens of these runs, added up."""

    def cancel_seq(self, response_id: str) -> int | None:
        """Where in the log a cancel of the response was asked for, if it was."""


@dataclass(frozen=True)
class Header:
    """The request-side fields of a response (stored with it, not derived)."""

    id: str
    created_at: int
    model: str
    instructions: str | None
    metadata: dict[str, Any]
    background: bool
    previous_response_id: str | None
    input_seq: int
    cancel_seq: int | None
    tools: list[dict[str, Any]] = field(default_factory=list)
    # Whether the input posted a user message; the requests its input decided.
    posts_message: bool = True
    decides: tuple[str, ...] = ()


@dataclass
class _Message:
    index: int
    id: str
    text: str = ""


@dataclass
class ResponseProjection:
    header: Header
    facts: Facts
    members: set[str] = field(default_factory=set)
    open_runs: set[str] = field(default_factory=set)
    triggers: set[int] = field(default_factory=set)
    jobs: dict[str, int | None] = field(default_factory=dict)  # job → its item, once known
    live_jobs: set[str] = field(default_factory=set)
    job_ends: dict[str, dict[str, Any]] = field(default_factory=dict)
    not_members: set[str] = field(default_factory=set)
    # Jobs behind a request of one of its runs: not its own unless it decides them.
    gated: set[str] = field(default_factory=set)
    requests: dict[str, str] = field(default_factory=dict)  # tool call id → request id
    message_due: bool = False  # its input message is yet to be read
    output: list[dict[str, Any]] = field(default_factory=list)
    messages: dict[str, _Message] = field(default_factory=dict)  # run → its open message
    calls: dict[tuple[str, str], int] = field(default_factory=dict)  # (run, call id) → item
    status: str = "queued"
    error: dict[str, str] | None = None
    last_run_status: str = "completed"
    position: int = 0
    cancel_seq: int | None = None
    number: int = 0
    pending: list[StreamEvent] = field(default_factory=list)
    final: dict[str, Any] | None = None
    # The seq of the log event at which it ended.
    end_seq: int | None = None

    def __post_init__(self) -> None:
        self.message_due = self.header.posts_message
        self.position = self.header.input_seq - 1
        self.cancel_seq = self.header.cancel_seq
        self._emit("response.created", response=self.response())

    # --- reading ------------------------------------------------------------------------

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL

    def take(self) -> list[StreamEvent]:
        """The stream events produced since the last call."""
        events, self.pending = self.pending, []
        return events

    def response(self) -> dict[str, Any]:
        """The Response object as it stands."""
        if self.final is not None:
            return self.final
        h = self.header
        return {
            "id": h.id,
            "object": "response",
            "created_at": h.created_at,
            "status": self.status,
            "background": h.background,
            "error": self.error,
            "incomplete_details": None,
            "instructions": h.instructions,
            "max_output_tokens": None,
            "metadata": h.metadata,
            "model": h.model,
            "output": [dict(item) for item in self.output],
            "parallel_tool_calls": True,
            "previous_response_id": h.previous_response_id,
            "store": True,
            "temperature": None,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [dict(tool) for tool in h.tools],
            "top_p": None,
            "truncation": "disabled",
            # Known once every run has ended (a stored event must not change on replay).
            "usage": self._usage() if self.ended and self.members else None,
            "user": None,
        }

    def output_text(self) -> str:
        return "".join(
            part["text"]
            for item in self.output
            if item["type"] == "message"
            for part in item["content"]
        )

    # --- feeding -----------------------------------------------------------------------

    def caught_up(self, position: int) -> None:
        """The log has been read up to ``position``: a cancel recorded there can take effect."""
        self.position = max(self.position, position)
        self._learn_cancel()
        self._check_cancel_point()

    def reads_facts(self, event: LogEvent) -> bool:
        """Whether feeding ``event`` may ask the database (``Facts``).

        Text, tool calls and results inside an open run never do: those, the bulk
        of a stream, can be fed where the event arrives, without a thread hop.
        """
        return event["kind"] in FACT_KINDS or not self.open_runs

    def feed(self, event: LogEvent) -> None:
        if self.ended:
            return
        seq = int(event["seq"])
        self._learn_cancel()
        if self.cancel_seq is not None and seq > self.cancel_seq:
            # The state after the cancel's position, which a reader that knew of the
            # cancel from the start checked right after that position's event.
            self.caught_up(self.cancel_seq)
            if self.ended:
                return
        self.position = seq
        kind, payload, run_id = event["kind"], event["payload"] or {}, event.get("run_id")
        if kind == "user_message" and self.message_due:
            self.message_due = False
            self.triggers.add(seq)
        elif kind == "approval_decided":
            self._approval_decided(payload, seq)
        elif kind == "approval_requested":
            self._approval_requested(payload, seq)
        elif kind == "run_started":
            self._run_started(str(payload.get("run_id") or run_id), seq)
        elif kind == "job_event":
            self._job_event(payload, seq)
        elif run_id not in self.members:
            pass
        elif kind == "assistant_delta":
            self._delta(run_id, str(payload.get("text", "")), seq)
        elif kind == "assistant_message":
            self._message(run_id, str(payload.get("text", "")), seq)
        elif kind == "tool_call" and payload.get("client"):
            self._function_call(run_id, payload, seq)
        elif kind == "tool_call":
            self._tool_call(run_id, payload, seq)
        elif kind == "tool_result":
            self._tool_result(run_id, payload)
        elif kind == "run_finished":
            self._run_finished(run_id, payload)
        elif kind == "run_requeued":
            self._run_requeued(run_id)
        # After every event from the cancel on, so that the end falls on the same
        # event however the log is read (at once, or live event by event).
        self._learn_cancel()
        self._check_cancel_point()
        self._check_end()

    # --- the log's events --------------------------------------------------------------

    def _run_started(self, run_id: str, seq: int) -> None:
        if run_id not in self.members:
            if run_id in self.not_members:
                return
            taken = self.triggers & self.facts.batch_seqs(run_id)
            if not taken:
                self.not_members.add(run_id)
                return
            self.triggers -= taken
            self.members.add(run_id)
        self.open_runs.add(run_id)
        if self.status == "queued":
            self.status = "in_progress"
            self._emit("response.in_progress", response=self.response())

    def _job_event(self, payload: dict[str, Any], seq: int) -> None:
        job_id = str(payload.get("job_id", ""))
        if job_id in self.gated:
            return
        if job_id not in self.jobs:
            if self.facts.job_run(job_id) not in self.members:
                return
            self.jobs[job_id] = None
            self.live_jobs.add(job_id)
        index = self.jobs[job_id]
        if payload.get("status") in FINAL_JOB_STATUSES:
            self.live_jobs.discard(job_id)
            self.triggers.add(seq)
            self.job_ends[job_id] = payload
            if index is not None:
                self._job_item_done(index, payload)
        elif index is not None and job_id in self.live_jobs:
            self._emit(
                "response.mcp_call.in_progress",
                item_id=self.output[index]["id"],
                output_index=index,
            )

    def _delta(self, run_id: str, text: str, seq: int) -> None:
        if not text:
            return
        message = self.messages.get(run_id)
        if message is None:
            message = self._message_open(run_id, seq)
        message.text += text
        self._emit(
            "response.output_text.delta",
            item_id=message.id,
            output_index=message.index,
            content_index=0,
            delta=text,
            logprobs=[],
        )

    def _message(self, run_id: str, text: str, seq: int) -> None:
        if run_id not in self.messages and text:
            self._delta(run_id, text, seq)
        self._message_close(run_id, "completed")

    def _message_open(self, run_id: str, seq: int) -> _Message:
        message = _Message(index=len(self.output), id=f"msg_{self.header.id[5:]}_{seq}")
        self.messages[run_id] = message
        item = {
            "id": message.id,
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        self.output.append(item)
        self._emit("response.output_item.added", output_index=message.index, item=dict(item))
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        self._emit(
            "response.content_part.added",
            item_id=message.id,
            output_index=message.index,
            content_index=0,
            part=part,
        )
        return message

    def _message_close(self, run_id: str, status: str) -> None:
        message = self.messages.pop(run_id, None)
        if message is None:
            return
        part = {"type": "output_text", "text": message.text, "annotations": [], "logprobs": []}
        common = {"item_id": message.id, "output_index": message.index, "content_index": 0}
        self._emit("response.output_text.done", **common, text=message.text, logprobs=[])
        self._emit("response.content_part.done", **common, part=part)
        item = self.output[message.index]
        item.update(status=status, content=[part])
        self._emit("response.output_item.done", output_index=message.index, item=dict(item))

    def _tool_call(self, run_id: str, payload: dict[str, Any], seq: int) -> None:
        self._message_close(run_id, "completed")
        index = len(self.output)
        item = {
            "id": f"mcp_{self.header.id[5:]}_{seq}",
            "type": "mcp_call",
            "server_label": SERVER_LABEL,
            "name": str(payload.get("name", "")),
            "arguments": _json(payload.get("input") or {}),
            "output": None,
            "error": None,
            "status": "in_progress",
        }
        self.output.append(item)
        self.calls[(run_id, str(payload.get("id", "")))] = index
        self._emit("response.output_item.added", output_index=index, item=dict(item))
        self._emit("response.mcp_call.in_progress", item_id=item["id"], output_index=index)

    def _function_call(self, run_id: str, payload: dict[str, Any], seq: int) -> None:
        """A call of one of the client's function tools: complete as the model made it (the
        turn ends on it, and the client's output comes with a later response)."""
        self._message_close(run_id, "completed")
        index = len(self.output)
        arguments = _json(payload.get("input") or {})
        item = {
            "id": f"fc_{self.header.id[5:]}_{seq}",
            "type": "function_call",
            "call_id": str(payload.get("id", "")),
            "name": str(payload.get("name", "")),
            "arguments": "",
            "status": "in_progress",
        }
        self.output.append(item)
        common = {"item_id": item["id"], "output_index": index}
        self._emit("response.output_item.added", output_index=index, item=dict(item))
        self._emit("response.function_call_arguments.delta", **common, delta=arguments)
        self._emit("response.function_call_arguments.done", **common, arguments=arguments)
        item.update(arguments=arguments, status="completed")
        self._emit("response.output_item.done", output_index=index, item=dict(item))

    def _tool_result(self, run_id: str, payload: dict[str, Any]) -> None:
        index = self.calls.pop((run_id, str(payload.get("tool_call_id", ""))), None)
        if index is None:
            return
        output = payload.get("output")
        if payload.get("is_error"):
            error = output.get("error") if isinstance(output, dict) else None
            self._call_done(index, error=_error_text(error or output))
            return
        request_id = self.requests.pop(str(payload.get("tool_call_id", "")), None)
        if request_id is not None:
            self.output[index]["approval_request_id"] = request_id
        started = isinstance(output, dict) and output.get("status") == "queued"
        job_id = output.get("job_id") if isinstance(output, dict) else None
        if started and isinstance(job_id, str):
            # A started job: the call lasts as long as the job.
            self.jobs[job_id] = index
            if job_id in self.job_ends:
                self._job_item_done(index, self.job_ends[job_id])
            else:
                self.live_jobs.add(job_id)
            return
        self._call_done(index, output=_output_text(output))

    def _approval_requested(self, payload: dict[str, Any], seq: int) -> None:
        """A request of one of its runs: an ``mcp_approval_request`` item, complete at once.

        A question (``ask_user``) is one too, named ``ask_user``, with the question and
        the JSON schema of its answer as arguments. The call's job waits behind the
        request and no longer holds the response open.
        """
        run_id = payload.get("run_id")
        if run_id not in self.members:
            return
        job_id = payload.get("job_id")
        if job_id:
            self.gated.add(str(job_id))
            self.live_jobs.discard(str(job_id))
        self.requests[str(payload.get("tool_call_id", ""))] = str(payload["id"])
        self._message_close(str(run_id), "completed")
        if payload.get("kind") == "question":
            name = "ask_user"
            arguments = {
                "question": payload.get("question", ""),
                "answer_schema": payload.get("answer_schema") or {},
            }
        else:
            name, arguments = str(payload.get("tool", "")), payload.get("arguments") or {}
        index = len(self.output)
        item = {
            "id": str(payload["id"]),
            "type": "mcp_approval_request",
            "server_label": SERVER_LABEL,
            "name": name,
            "arguments": _json(arguments),
        }
        self.output.append(item)
        self._emit("response.output_item.added", output_index=index, item=dict(item))
        self._emit("response.output_item.done", output_index=index, item=dict(item))

    def _approval_decided(self, payload: dict[str, Any], seq: int) -> None:
        """One of its input's decisions: what follows from it is what it waits for.

        An approved call's job is its own, as an ``mcp_call`` item that lasts as long as
        the job; a refused call's job ends cancelled, which the agent is told of; a
        question's answer waits in the inbox for the agent.
        """
        if payload.get("id") not in self.header.decides:
            return
        if self.status == "queued":
            self.status = "in_progress"
            self._emit("response.in_progress", response=self.response())
        job_id = payload.get("job_id")
        if payload.get("kind") == "question" or not job_id:
            self.triggers.add(seq)
            return
        job_id = str(job_id)
        index = None
        if payload.get("status") in ("approved", "edited"):
            index = len(self.output)
            arguments = payload.get("edited_arguments") or payload.get("arguments") or {}
            item = {
                "id": f"mcp_{self.header.id[5:]}_{seq}",
                "type": "mcp_call",
                "server_label": SERVER_LABEL,
                "name": str(payload.get("tool", "")),
                "arguments": _json(arguments),
                "output": None,
                "error": None,
                "status": "in_progress",
                "approval_request_id": str(payload["id"]),
            }
            self.output.append(item)
            self._emit("response.output_item.added", output_index=index, item=dict(item))
            self._emit("response.mcp_call.in_progress", item_id=item["id"], output_index=index)
        self.jobs[job_id] = index
        self.live_jobs.add(job_id)

    def _job_item_done(self, index: int, payload: dict[str, Any]) -> None:
        if payload.get("status") == "done":
            self._call_done(index, output=str(payload.get("summary") or ""))
        else:
            error = payload.get("error") or {"code": payload.get("status"), "message": ""}
            self._call_done(index, error=_error_text(error))

    def _call_done(
        self, index: int, *, output: str | None = None, error: str | None = None, status: str = ""
    ) -> None:
        item = self.output[index]
        if item["status"] != "in_progress":
            return
        item["status"] = status or ("failed" if error is not None else "completed")
        item["output"] = output
        if error is not None:
            item["error"] = {
                "type": "mcp_tool_execution_error",
                "content": [{"type": "text", "text": error}],
            }
        done = "response.mcp_call.failed" if error is not None else "response.mcp_call.completed"
        self._emit(done, item_id=item["id"], output_index=index)
        self._emit("response.output_item.done", output_index=index, item=dict(item))

    def _run_requeued(self, run_id: str) -> None:
        """A stopping worker handed the turn back: what its attempt wrote is superseded
        (the items stay, closed, and the next attempt writes its own)."""
        self._message_close(run_id, "incomplete")
        self._calls_close(run_id, "No result: the turn was handed to another worker.")

    def _calls_close(self, run_id: str, reason: str) -> None:
        for (call_run, _), index in list(self.calls.items()):
            if call_run == run_id:
                self._call_done(index, error=reason)
        self.calls = {key: i for key, i in self.calls.items() if key[0] != run_id}

    def _run_finished(self, run_id: str, payload: dict[str, Any]) -> None:
        status = str(payload.get("status", "completed"))
        self._message_close(run_id, "completed" if status == "completed" else "incomplete")
        self._calls_close(run_id, "No result: the turn ended first.")
        self.open_runs.discard(run_id)
        self.last_run_status = status
        error = payload.get("error")
        if status == "failed" and isinstance(error, dict):
            self.error = {
                "code": "server_error",
                "message": f"{error.get('code')}: {error.get('message')}",
            }

    # --- the end -------------------------------------------------------------------------

    def _check_end(self) -> None:
        if self.ended or not self.members or self.open_runs or self.triggers or self.live_jobs:
            return
        status = self.last_run_status if self.last_run_status in TERMINAL else "completed"
        self._end(status)

    def _learn_cancel(self) -> None:
        """Ask whether a cancel was recorded, when it could end the response now.

        A live reader learns of a cancel after it started. A cancel records the
        log's last seq, which is at least every event read so far: so if it is
        not recorded yet, it falls on this event or later, never before.
        """
        if self.cancel_seq is None and not self.ended and not self.open_runs:
            if not self.live_jobs:
                self.cancel_seq = self.facts.cancel_seq(self.header.id)

    def _check_cancel_point(self) -> None:
        cancel_seq = self.cancel_seq
        if self.ended or cancel_seq is None or self.position < cancel_seq:
            return
        if not self.open_runs and not self.live_jobs:
            self._end("cancelled")

    def _end(self, status: str) -> None:
        for run_id in list(self.messages):
            self._message_close(run_id, "incomplete")
        for index, item in enumerate(self.output):
            if item["type"] == "mcp_call" and item["status"] == "in_progress":
                self._call_done(index, error="Cancelled with the response.", status="incomplete")
        self.status = status
        self.end_seq = self.position
        if status != "failed":
            self.error = None
        elif self.error is None:
            self.error = {"code": "server_error", "message": "The turn failed."}
        self.final = self.response()
        self._emit(f"response.{status}", response=self.final)

    def _usage(self) -> dict[str, Any]:
        usage = self.facts.usage(sorted(self.members))
        tokens_in, tokens_out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
        return {
            "input_tokens": tokens_in,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": tokens_out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens_in + tokens_out,
        }

    def _emit(self, type_: str, **fields: Any) -> None:
        self.pending.append({"type": type_, "sequence_number": self.number, **fields})
        self.number += 1


def _output_text(output: Any) -> str:
    return output if isinstance(output, str) else _json(output)


def _json(value: Any) -> str:
    """JSON text with its keys sorted: a live event's payload keeps the order it was written
    in, PostgreSQL's jsonb gives it back in its own, and a replay must match what was sent."""
    return json.dumps(value, sort_keys=True, default=str)


def _error_text(error: Any) -> str:
    if isinstance(error, dict) and "message" in error:
        code = error.get("code")
        return f"{code}: {error['message']}" if code else str(error["message"])
    return _output_text(error)
