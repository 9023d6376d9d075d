"""The agent loop: one run takes its batch, talks to the model, runs tools.

A run (see ``sessions.runs`` for its lifecycle) is executed by a turn runtime
(``sessions.runtime``), which multiplexes many turns on one event loop:

1. ``run_start`` claims every pending event of the session as the batch;
2. the conversation is built from the log (``sessions.conversation``);
3. the model streams; text becomes coalesced ``assistant_delta`` events and
   one ``assistant_message`` per model response; tool calls become
   ``tool_call`` events, their outcomes ``tool_result`` events;
4. the tools one response asks for run together (``asyncio.gather``): a
   blocking tool in the runtime's bounded tool pool, under its deadline;
   ``start_<tool>`` and the job tools (a few queries each) on the database
   pool; each wrapped so that its exception becomes its own error result;
5. the model is called again with the results until it stops asking for tools,
   or until it calls a tool the client carries out (``sessions.client_tools``):
   the turn then ends with that call waiting for the client's answer.

The runtime watches every turn it runs at once (one heartbeat statement and
one interrupt query for all of them); it sets a turn's ``stop`` on an
interrupt, and the work is cancelled, the text so far kept and the run ended
``cancelled``. A stopping worker instead hands the turn back: the attempt is
abandoned and the run queued again for another worker.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from sessions.conversation import Conversation
from sessions.events import EventDraft, event_append, event_append_many
from sessions.llm import Finish, ModelError, TextDelta, ToolUse, get_model_client
from sessions.models import AgentSession, Event
from sessions.payloads import (
    AssistantMessagePayload,
    EventPayload,
    ToolCallPayload,
    ToolResultPayload,
)
from sessions.runs import run_cancel, run_complete, run_fail, run_hand_back

if TYPE_CHECKING:
    from sessions.runtime import TurnRuntime

log = logging.getLogger(__name__)

Database = Callable[..., Awaitable[Any]]  # TurnRuntime.db: a function run on its pool

FLUSH_EVERY_S = 0.05
FLUSH_MAX_S = 0.25
FLUSH_AT_CHARS = 400
# Deltas written in one transaction at most; more due at once wait for the next.
WRITE_MAX = 64
# Float error must not push a write due on a tick to the tick after it.
TICK_SLACK = 1e-6
MAX_MODEL_CALLS = 8
HANDED_BACK = "handed_back"


class TextStreams:
    """The text streams of one turn runtime: the pace their deltas are written at, and
    the writes themselves.

    Every delta is a row written, published and sent to each listener, about
    0.75 ms of CPU across the processes with fifty answers at once (1.5 ms when
    each was written alone): a worker streaming forty answers at once at one
    write every ``FLUSH_EVERY_S`` would spend more than half a core on them. So
    the runtime's streams share a budget of ``writes_per_s``
    (``AGENTSITE_DELTA_WRITES_PER_S``): with few streams each writes every
    ``FLUSH_EVERY_S``; with more, each writes less often, never less often than
    every ``FLUSH_MAX_S``. The first delta of an answer is never held back.

    A stream's next write is due on a tick of the runtime's clock (every
    ``FLUSH_EVERY_S``, at a phase of the runtime's own), so the streams due about
    the same time come due together, and the deltas due together are written
    together (``event_append_many``): one trip to a database thread, one commit
    and one round trip to Redis for all of them. A write that comes due while one
    is in flight joins the next, which starts as that one ends.
    """

    def __init__(self, writes_per_s: float, *, db: Database) -> None:
        self.writes_per_s = writes_per_s
        self.db = db
        self.open = 0
        self.due: list[tuple[EventDraft, asyncio.Future[Event]]] = []
        self.writing: asyncio.Task[None] | None = None
        # Where this runtime's ticks fall: the turn workers of one host share a clock,
        # and their writes should not all come due at the same instant (on SQLite they
        # would queue on its one write lock).
        self.phase = random.uniform(0, FLUSH_EVERY_S)

    def interval(self) -> float:
        return min(FLUSH_MAX_S, max(FLUSH_EVERY_S, self.open / self.writes_per_s))

    def next_write_at(self, last_write: float) -> float:
        """When a stream that last wrote at ``last_write`` (the loop's clock) writes next:
        an interval later, on the tick at or after it."""
        due = last_write + self.interval() - self.phase
        return math.ceil(due / FLUSH_EVERY_S - TICK_SLACK) * FLUSH_EVERY_S + self.phase

    def write(self, *, session_id: str, run_id: str, text: str) -> asyncio.Future[Event]:
        """Write ``text`` as a delta with the others due now; the future is its event."""
        return self.write_event(
            EventDraft(session_id, Event.Kind.ASSISTANT_DELTA, {"text": text}, run_id)
        )

    def write_event(self, draft: EventDraft) -> asyncio.Future[Event]:
        """Write ``draft`` with the others due now; the future is its event."""
        written: asyncio.Future[Event] = asyncio.get_running_loop().create_future()
        self.due.append((draft, written))
        if self.writing is None:
            # Its first step runs once the loop has run every timer due now.
            self.writing = asyncio.create_task(self._write_due())
        return written

    async def _write_due(self) -> None:
        try:
            while self.due:
                batch, self.due = self.due[:WRITE_MAX], self.due[WRITE_MAX:]
                try:
                    results: list[Event | Exception] = await self.db(
                        event_append_many, drafts=[draft for draft, _ in batch]
                    )
                except Exception as exc:
                    results = [exc] * len(batch)
                except BaseException:  # cancelled: the runtime is going away
                    for _, written in batch:
                        written.cancel()
                    raise
                for (_, written), result in zip(batch, results, strict=True):
                    if written.done():
                        continue
                    if isinstance(result, Exception):
                        written.set_exception(result)
                    else:
                        written.set_result(result)
        finally:
            self.writing = None
            for _, written in self.due:  # only if cancelled: nothing will write them
                written.cancel()
            self.due = []


class DeltaWriter:
    """Coalesces streamed text into ``assistant_delta`` events.

    At most one delta write is in flight per turn, and the model's stream
    never waits for it: text that arrives meanwhile joins the next write,
    which starts an interval after the previous one started, on a tick (at
    once when ``FLUSH_AT_CHARS`` wait; ``TextStreams.next_write_at``). So a
    long answer is tens of rows, not thousands, and a slow database or many
    answers at once make the deltas fewer and larger rather than more: the cost
    of a turn does not grow with the load. A timer is set only while text
    waits: a turn waiting for its model costs the loop nothing.
    """

    def __init__(
        self,
        *,
        runtime: TurnRuntime,
        session_id: str,
        run_id: str,
        streams: TextStreams | None = None,
    ) -> None:
        self.runtime = runtime
        self.streams = (
            streams if streams is not None else TextStreams(1 / FLUSH_EVERY_S, db=runtime.db)
        )
        self.streaming = False
        self.session_id = session_id
        self.run_id = run_id
        self.buffer = ""
        self.segment = ""
        self.last_write: float | None = None  # the loop's clock
        self.writing: asyncio.Future[Event] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.failed: BaseException | None = None
        self.closed = False

    async def add(self, text: str) -> None:
        self._raise_failed()
        self.buffer += text
        self.segment += text
        if not self.streaming:
            self.streaming = True
            self.streams.open += 1
        self._schedule()

    def _stream_end(self) -> None:
        if self.streaming:
            self.streaming = False
            self.streams.open -= 1

    def _schedule(self) -> None:
        if self.closed or self.writing is not None or self.timer is not None or not self.buffer:
            return
        loop = asyncio.get_running_loop()
        at = None if self.last_write is None else self.streams.next_write_at(self.last_write)
        if at is None or at <= loop.time() or len(self.buffer) >= FLUSH_AT_CHARS:
            self._start_write()
        else:
            self.timer = loop.call_at(at, self._on_timer)

    def _on_timer(self) -> None:
        self.timer = None
        if self.writing is None and self.buffer and self.failed is None:
            self._start_write()

    def _start_write(self) -> None:
        text, self.buffer = self.buffer, ""
        self.last_write = asyncio.get_running_loop().time()
        self.writing = self.streams.write(session_id=self.session_id, run_id=self.run_id, text=text)
        self.writing.add_done_callback(self._written)

    def _written(self, written: asyncio.Future[Event]) -> None:
        self.writing = None
        if written.cancelled():
            self.failed = asyncio.CancelledError("the delta was not written")
        elif written.exception() is not None:
            self.failed = written.exception()  # raised to the turn by its next add or flush
        if self.failed is None:
            self._schedule()

    def _raise_failed(self) -> None:
        if self.failed is not None:
            raise self.failed

    async def _settle(self) -> None:
        """Wait until no write is in flight, without cancelling one if we are cancelled.

        A write that ends may start the next at once (text waited past the interval),
        so one wait is not enough.
        """
        while self.writing is not None:
            await asyncio.wait({self.writing})

    def _stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    async def flush(self) -> None:
        """Write every delta so far, in order, before the caller writes anything else."""
        while True:
            await self._settle()
            self._stop_timer()  # nothing can start between the settle and here
            self._raise_failed()
            if not self.buffer:
                return
            self._start_write()

    async def flush_then(self, kind: str, payload: EventPayload) -> Event:
        """``flush()`` then ``append(kind, payload)``, the last delta and the event in
        the same write (one transaction, with whatever else is due)."""
        await self._settle()
        self._stop_timer()  # nothing can start between the settle and here
        self._raise_failed()
        if self.buffer:
            self._start_write()  # due now, as the event below: the same write
        written = self.streams.write_event(EventDraft(self.session_id, kind, payload, self.run_id))
        await asyncio.wait({written})
        await self._settle()
        error = written.exception()  # read, so that a failed write is never left unseen
        self._raise_failed()
        if error is not None:
            raise error
        return written.result()

    async def close(self) -> None:
        """Stop the timer and let a write in flight finish; nothing is written after."""
        self.closed = True
        self._stream_end()
        self._stop_timer()
        await self._settle()

    def take_segment(self) -> str:
        self._stream_end()
        text, self.segment = self.segment, ""
        return text

    async def append(self, kind: str, payload: EventPayload) -> Event:
        event: Event = await self.runtime.db(
            event_append, session_id=self.session_id, kind=kind, payload=payload, run_id=self.run_id
        )
        return event


class Turn:
    def __init__(
        self,
        *,
        runtime: TurnRuntime,
        session: AgentSession,
        run_id: str,
        conversation: Conversation,
    ) -> None:
        self.runtime = runtime
        self.session = session
        self.run_id = run_id
        self.conversation = conversation
        self.model = get_model_client(session.model, session_id=session.id)
        self.writer = DeltaWriter(
            runtime=runtime, session_id=session.id, run_id=run_id, streams=runtime.text_streams
        )
        self.usage: dict[str, int] = {"input_tokens": 0, "output_tokens": 0, "model_calls": 0}
        self.first_token_at: datetime | None = None  # written with the run's end
        self.open_calls: dict[str, ToolUse] = {}
        self.stop = asyncio.Event()
        self.hand_back_reason: str | None = None

    def interrupt(self) -> None:
        """Stop the turn: the run ends cancelled (or as it already ended elsewhere)."""
        self.stop.set()

    def hand_back(self, reason: str) -> None:
        """Abandon the attempt and queue the run again for another worker."""
        self.hand_back_reason = reason
        self.stop.set()

    async def execute(self) -> str:
        work = asyncio.create_task(self.steps())
        stopped = asyncio.create_task(self.stop.wait())
        db = self.runtime.db
        try:
            await asyncio.wait({work, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
                if self.hand_back_reason is not None and await db(
                    run_hand_back, run_id=self.run_id, reason=self.hand_back_reason
                ):
                    return HANDED_BACK
                await self.wrap_up(interrupted=True)
                await db(
                    run_cancel,
                    run_id=self.run_id,
                    usage=self.usage,
                    first_token_at=self.first_token_at,
                )
                return "cancelled"
            error = work.exception()
            if error is None:
                await db(
                    run_complete,
                    run_id=self.run_id,
                    usage=self.usage,
                    first_token_at=self.first_token_at,
                )
                return "completed"
            await self.wrap_up(interrupted=False)
            code = error.code if isinstance(error, ModelError) else "internal_error"
            await db(
                run_fail,
                run_id=self.run_id,
                code=code,
                message=str(error) or repr(error),
                usage=self.usage,
                first_token_at=self.first_token_at,
            )
            return "failed"
        finally:
            for task in (work, stopped):
                task.cancel()
            await asyncio.gather(work, stopped, return_exceptions=True)
            await self.writer.close()

    async def steps(self) -> None:
        conv = self.conversation
        for _ in range(MAX_MODEL_CALLS):
            calls = await self.model_call()
            if not calls:
                return
            ours = [call for call in calls if call.name not in conv.client_tools]
            results = await self.tools_run(ours)
            if len(ours) < len(calls):
                return  # the client carries out the rest; its answer starts the next turn
            conv.messages.append({"role": "user", "content": results})

    async def model_call(self) -> list[ToolUse]:
        conv = self.conversation
        calls: list[ToolUse] = []
        self.usage["model_calls"] += 1
        async for item in self.model.stream(
            system=conv.system, messages=conv.messages, tools=conv.tools
        ):
            if self.first_token_at is None:
                self.first_token_at = timezone.now()
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
            called: ToolCallPayload = {"id": call.id, "name": call.name, "input": call.input}
            if call.name in self.conversation.client_tools:
                called["client"] = True  # complete as it stands: the client runs it
            else:
                self.open_calls[call.id] = call
            await self.writer.append(Event.Kind.TOOL_CALL, called)
        if content:
            conv.messages.append({"role": "assistant", "content": content})
        return calls

    async def segment_close(self, *, interrupted: bool = False) -> str:
        """Flush the deltas and write the segment's ``assistant_message`` (with the last
        delta, in one write)."""
        text = self.writer.segment
        if not text:
            await self.writer.flush()
            return self.writer.take_segment()
        message: AssistantMessagePayload = {"text": text}
        if interrupted:
            message["interrupted"] = True
        await self.writer.flush_then(Event.Kind.ASSISTANT_MESSAGE, message)
        return self.writer.take_segment()

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
            output, is_error = await self.runtime.tool_call(
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
        result: ToolResultPayload = {
            "tool_call_id": call.id,
            "name": call.name,
            "output": output,
            "is_error": is_error,
        }
        await self.writer.append(Event.Kind.TOOL_RESULT, result)
        return output, is_error

    async def wrap_up(self, *, interrupted: bool) -> None:
        """Keep the text so far and close tool calls that never got a result."""
        await self.segment_close(interrupted=interrupted)
        reason = "the turn was interrupted" if interrupted else "the turn failed"
        for call in list(self.open_calls.values()):
            unrun: ToolResultPayload = {
                "tool_call_id": call.id,
                "name": call.name,
                "output": {
                    "error": {"code": "not_run", "message": f"No result recorded: {reason}."}
                },
                "is_error": True,
            }
            await self.writer.append(Event.Kind.TOOL_RESULT, unrun)
        self.open_calls.clear()
