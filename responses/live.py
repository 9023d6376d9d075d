"""Following a response live: replay its session's log, then tail it, projecting each event.

The session streams' follower (replay from the log, then the channel layer,
gaps read back from the log) brings the events in seq order exactly once; the
projection turns them into Responses events. Waiting blocks no thread: a
stream or a waiting request is a coroutine on daphne's loop, and only each
projection step (a few queries at most) runs in a database thread.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Any, cast

from channels.db import database_sync_to_async
from django.conf import settings

from accounts.credentials import Credential
from responses.models import AgentResponse
from responses.projection import ResponseProjection, StreamEvent
from responses.services import response_cancel_step, response_project
from sessions.models import AgentSession
from sessions.streams import LayerFollower, LogTail, follow, log_read

db = functools.partial(database_sync_to_async, thread_sensitive=False)


def idle_s() -> float:
    """Without traffic, a follower re-reads the log this often (and an SSE stream sends a
    comment): the session streams' heartbeat."""
    return float(getattr(settings, "AGENTSITE_SSE_HEARTBEAT_S", 15.0))


CANCEL_WAIT_S = 30.0
CANCEL_POLL_S = 0.2


class ResponseTail(LogTail):
    """A session's log position whose frames keep the run id and need no token."""

    # The session streams' frame with the event's run id added (the projection needs it;
    # the token it does not): an Any in, Any out override, as Frame has no run id.
    def frame(self, event: Any) -> Any:
        return {
            "seq": int(event["seq"]),
            "kind": event["kind"],
            "payload": event["payload"],
            "run_id": event.get("run_id"),
        }


# The projection's reads run on the stream-read threads, which keep (or, pooled,
# quickly take) their connection, like every other read a stream makes.
@log_read
def _project(response: AgentResponse) -> ResponseProjection:
    return response_project(response)


@log_read
def _feed_reading(projection: ResponseProjection, frame: dict[str, Any]) -> list[StreamEvent]:
    projection.feed(frame)
    return projection.take()


async def _feed(projection: ResponseProjection, frame: dict[str, Any]) -> list[StreamEvent]:
    if projection.reads_facts(frame):
        return await _feed_reading(projection, frame)
    projection.feed(frame)  # text inside an open run: no query, so no thread hop
    return projection.take()


@log_read
def _caught_up(projection: ResponseProjection, position: int) -> list[StreamEvent]:
    projection.caught_up(position)
    return projection.take()


async def response_events(
    response: AgentResponse,
    *,
    after: int = -1,
    credential: Credential | None = None,
    job_progress: bool = False,
) -> AsyncIterator[StreamEvent | None]:
    """The response's stream events numbered above ``after``, until its end.

    Yields None for a stretch without news (a heartbeat), so that a stream can
    keep its connection alive. With a ``credential``, raises CredentialRevoked
    once it no longer holds (its token revoked, its user deactivated). With
    ``job_progress``, also the progress of the response's own jobs as it arrives
    live, as ``{"type": "job.progress", "payload": <the job event>}`` (no number:
    the Responses API has no such event; the A2A edge shows it).
    """
    # What the log holds already, in one read; a response that has ended needs no more.
    projection = await _project(response)
    for event in projection.take():
        if event["sequence_number"] > after:
            yield event
    if projection.ended:
        return
    tail = ResponseTail(
        session_id=response.session_id, owner_id=response.owner_id, after=projection.position
    )
    group = f"{AgentSession.group_prefix()}{response.session_id}"
    async with LayerFollower(group, credential) as live:
        async for frame in follow(tail, live.queue, live.subscription, idle_s(), live.watch):
            if live.overflowed:
                return  # too slow: the client resumes with starting_after
            if frame is None:
                events = await _caught_up(projection, tail.cursor)
            else:
                # ResponseTail's frames are log events (with their run id).
                events = await _feed(projection, cast(dict[str, Any], frame))
            for event in events:
                if event["sequence_number"] > after:
                    yield event
            if job_progress and frame is not None and _progress_of(projection, frame):
                yield {"type": "job.progress", "payload": frame["payload"]}
            if projection.ended:
                return
            if frame is None:
                yield None


def _progress_of(projection: ResponseProjection, frame: Any) -> bool:
    """Whether a log frame is the progress of one of the response's jobs."""
    payload = frame["payload"]
    return (
        frame["kind"] == "job_event"
        and payload.get("event") == "job_progress"
        and payload.get("job_id") in projection.jobs
    )


async def response_wait(
    response: AgentResponse, *, credential: Credential | None = None
) -> dict[str, Any]:
    """The response once it has ended."""
    async for event in response_events(response, credential=credential):
        if event is not None and event["type"] in ENDINGS:
            ended: dict[str, Any] = event["response"]
            return ended
    raise RuntimeError("the response stream stopped before the response ended")


ENDINGS = frozenset(
    {"response.completed", "response.failed", "response.cancelled", "response.incomplete"}
)


async def response_cancel(response: AgentResponse) -> dict[str, Any]:
    """Stop the response's turn and jobs; the response once they have ended (or as it
    stands after ``CANCEL_WAIT_S``). One that ended first keeps its status."""
    step = db(response_cancel_step)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CANCEL_WAIT_S
    while True:
        projection = await step(response_id=response.id)
        if projection.ended or loop.time() > deadline:
            document: dict[str, Any] = await db(projection.response)()
            return document
        await asyncio.sleep(CANCEL_POLL_S)
