"""The agent loop: one run takes its batch, talks to the model, runs tools.

A run (see ``sessions.runs`` for its lifecycle) is executed by a turn worker:

1. ``run_start`` claims every pending event of the session as the batch;
2. the conversation is built from the log (``sessions.conversation``);
3. the model streams; text becomes coalesced ``assistant_delta`` events and
   one ``assistant_message`` per model response; tool calls become
   ``tool_call`` events, their outcomes ``tool_result`` events;
4. the tools one response asks for run together (``asyncio.gather``), each in
   its own thread and each wrapped so that its exception becomes its own error
   result; ``start_<tool>`` creates a job and returns at once;
5. the model is called again with the results until it stops asking for tools.

A watcher beats the run's heartbeat and polls for an interrupt; on one, the
work is cancelled, the text so far is kept and the run ends ``cancelled``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections

from sessions.conversation import Conversation, conversation_build
from sessions.events import event_append
from sessions.llm import Finish, ModelError, TextDelta, ToolUse, get_model_client
from sessions.models import AgentSession, Event
from sessions.runs import (
    HEARTBEAT_EVERY_S,
    run_cancel,
    run_complete,
    run_fail,
    run_first_token,
    run_heartbeat,
    run_should_stop,
    run_start,
)
from sessions.toolbox import tool_execute

log = logging.getLogger(__name__)

FLUSH_EVERY_S = 0.05
FLUSH_AT_CHARS = 400
CANCEL_POLL_S = 0.2
MAX_MODEL_CALLS = 8


def run_execute(*, run_id: str) -> str:
    """Execute one run to its end; returns the status it ended in (or ``skipped``)."""
    claim = run_start(run_id=run_id)
    if claim is None:
        return "skipped"
    try:
        if not claim.batch:
            run_complete(run_id=run_id, usage={})
            return "completed"
        session = AgentSession.objects.select_related("owner").get(pk=claim.run.session_id)
        conversation = conversation_build(session=session, run=claim.run, batch=claim.batch)
        turn = Turn(session=session, run_id=run_id, conversation=conversation)
        return asyncio.run(turn.execute())
    except BaseException as exc:
        # Whatever happened, the run must not stay "running" and wedge the session.
        run_fail(run_id=run_id, code="internal_error", message=f"The turn crashed: {exc!r}")
        if isinstance(exc, Exception):
            log.exception("run %s crashed", run_id)
            return "failed"
        raise
    finally:
        connections.close_all()


def tool_execute_in_thread(**kwargs: Any) -> tuple[Any, bool]:
    """``tool_execute`` in a thread of its own, closing the connections it opened there."""
    try:
        return tool_execute(**kwargs)
    finally:
        connections.close_all()


def _db(fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    return sync_to_async(fn, thread_sensitive=True)


class DeltaWriter:
    """Coalesces streamed text into ``assistant_delta`` events.

    A delta is written at most every ``FLUSH_EVERY_S`` (a ticker flushes what
    waits when the model pauses) or as soon as ``FLUSH_AT_CHARS`` accumulate,
    so a long answer is tens of rows, not thousands.
    """

    def __init__(self, *, session_id: str, run_id: str) -> None:
        self.session_id = session_id
        self.run_id = run_id
        self.buffer = ""
        self.segment = ""
        self.last_flush = time.monotonic()
        self.lock = asyncio.Lock()

    async def add(self, text: str) -> None:
        self.buffer += text
        self.segment += text
        due = time.monotonic() - self.last_flush >= FLUSH_EVERY_S
        if due or len(self.buffer) >= FLUSH_AT_CHARS:
            await self.flush()

    async def flush(self) -> None:
        async with self.lock:
            text, self.buffer = self.buffer, ""
            self.last_flush = time.monotonic()
            if text:
                await self.append(Event.Kind.ASSISTANT_DELTA, {"text": text})

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_EVERY_S)
            if self.buffer and time.monotonic() - self.last_flush >= FLUSH_EVERY_S:
                await self.flush()

    def take_segment(self) -> str:
        text, self.segment = self.segment, ""
        return text

    async def append(self, kind: str, payload: dict[str, Any]) -> Event:
        return await _db(event_append)(
            session_id=self.session_id, kind=kind, payload=payload, run_id=self.run_id
        )


class Turn:
    def __init__(self, *, session: AgentSession, run_id: str, conversation: Conversation) -> None:
        self.session = session
        self.run_id = run_id
        self.conversation = conversation
        self.model = get_model_client(session.model, session_id=session.id)
        self.writer = DeltaWriter(session_id=session.id, run_id=run_id)
        self.usage: dict[str, int] = {"input_tokens": 0, "output_tokens": 0, "model_calls": 0}
        self.first_token = False
        self.open_calls: dict[str, ToolUse] = {}
        self.interrupt = asyncio.Event()

    async def execute(self) -> str:
        work = asyncio.create_task(self.steps())
        watcher = asyncio.create_task(self.watch())
        ticker = asyncio.create_task(self.writer.tick())
        interrupted = asyncio.create_task(self.interrupt.wait())
        try:
            await asyncio.wait({work, interrupted}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
                await self.wrap_up(interrupted=True)
                await _db(run_cancel)(run_id=self.run_id, usage=self.usage)
                return "cancelled"
            error = work.exception()
            if error is None:
                await _db(run_complete)(run_id=self.run_id, usage=self.usage)
                return "completed"
            await self.wrap_up(interrupted=False)
            code = error.code if isinstance(error, ModelError) else "internal_error"
            await _db(run_fail)(
                run_id=self.run_id, code=code, message=str(error) or repr(error), usage=self.usage
            )
            return "failed"
        finally:
            for task in (watcher, ticker, interrupted):
                task.cancel()
            await asyncio.gather(watcher, ticker, interrupted, return_exceptions=True)
            await _db(connections.close_all)()

    async def watch(self) -> None:
        """Heartbeat every few seconds; notice an interrupt within a fraction of one."""
        last_beat = time.monotonic()
        while True:
            await asyncio.sleep(CANCEL_POLL_S)
            if time.monotonic() - last_beat >= HEARTBEAT_EVERY_S:
                last_beat = time.monotonic()
                cancelled = await _db(run_heartbeat)(run_id=self.run_id)
            else:
                cancelled = await _db(run_should_stop)(run_id=self.run_id)
            if cancelled:
                self.interrupt.set()
                return

    async def steps(self) -> None:
        conv = self.conversation
        for _ in range(MAX_MODEL_CALLS):
            calls = await self.model_call()
            if not calls:
                return
            results = await self.tools_run(calls)
            conv.messages.append({"role": "user", "content": results})

    async def model_call(self) -> list[ToolUse]:
        conv = self.conversation
        calls: list[ToolUse] = []
        self.usage["model_calls"] += 1
        async for item in self.model.stream(
            system=conv.system, messages=conv.messages, tools=conv.tools
        ):
            if not self.first_token:
                self.first_token = True
                await _db(run_first_token)(run_id=self.run_id)
            if isinstance(item, TextDelta):
                await self.writer.add(item.text)
            elif isinstance(item, ToolUse):
                calls.append(item)
            elif isinstance(item, Finish):
                for key in ("input_tokens", "output_tokens"):
                    self.usage[key] += int(item.usage.get(key, 0))
        text = await self.segment_close()
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        for call in calls:
            content.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}
            )
            self.open_calls[call.id] = call
            await self.writer.append(
                Event.Kind.TOOL_CALL, {"id": call.id, "name": call.name, "input": call.input}
            )
        if content:
            conv.messages.append({"role": "assistant", "content": content})
        return calls

    async def segment_close(self, **extra: Any) -> str:
        """Flush the deltas and write the segment's ``assistant_message``."""
        await self.writer.flush()
        text = self.writer.take_segment()
        if text:
            await self.writer.append(Event.Kind.ASSISTANT_MESSAGE, {"text": text, **extra})
        return text

    async def tools_run(self, calls: list[ToolUse]) -> list[dict[str, Any]]:
        """Run one response's tool calls together; each failure is its own error result."""
        outcomes = await asyncio.gather(*(self.tool_run(call) for call in calls))
        return [
            {
                "type": "tool_result",
                "tool_use_id": call.id,
                "content": self.conversation.result_text(output),
                "is_error": is_error,
            }
            for call, (output, is_error) in zip(calls, outcomes, strict=True)
        ]

    async def tool_run(self, call: ToolUse) -> tuple[Any, bool]:
        try:
            output, is_error = await asyncio.to_thread(
                tool_execute_in_thread,
                owner=self.session.owner,
                session_id=self.session.id,
                run_id=self.run_id,
                name=call.name,
                args=call.input,
                call_id=call.id,
            )
        except Exception as exc:  # tool_execute already catches; this is the last net
            output, is_error = {"error": {"code": "tool_error", "message": repr(exc)}}, True
        self.open_calls.pop(call.id, None)
        await self.writer.append(
            Event.Kind.TOOL_RESULT,
            {"tool_call_id": call.id, "name": call.name, "output": output, "is_error": is_error},
        )
        return output, is_error

    async def wrap_up(self, *, interrupted: bool) -> None:
        """Keep the text so far and close tool calls that never got a result."""
        await self.segment_close(**({"interrupted": True} if interrupted else {}))
        reason = "the turn was interrupted" if interrupted else "the turn failed"
        for call in list(self.open_calls.values()):
            await self.writer.append(
                Event.Kind.TOOL_RESULT,
                {
                    "tool_call_id": call.id,
                    "name": call.name,
                    "output": {
                        "error": {"code": "not_run", "message": f"No result recorded: {reason}."}
                    },
                    "is_error": True,
                },
            )
        self.open_calls.clear()
