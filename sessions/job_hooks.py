"""What sessions gives jobs through ``jobs.hooks``, registered in ``SessionsConfig.ready()``.

jobs never imports sessions; these functions are how a job reaches its session:
its events land in the session's log (a final one in the inbox, which wakes
the agent), a job may only be started in one of the owner's live sessions, and
a tool that writes prose uses the session's model.
"""

from __future__ import annotations

import asyncio
from typing import Any

from django.conf import settings

from jobs.documents import JobEventName, JobEventPayload
from jobs.hooks import TextModel
from sessions.approvals import approval_job_ended
from sessions.events import event_append
from sessions.inbox import inbox_append
from sessions.llm import TextDelta, get_model_client
from sessions.llm.names import LOCAL_MODELS
from sessions.models import AgentSession, Event
from sessions.services import SessionNotFound, session_for

# Models that write no prose for tools: the offline one composes deterministically
# anyway, and the scripted one belongs to tests of the agent loop.
PROSELESS_MODELS = {"", *LOCAL_MODELS}


def job_event_record(*, session_id: str, payload: JobEventPayload) -> None:
    """A job's event in its session's log; a final one is pending news for the agent.

    Runs inside the job's transaction (``jobs.lifecycle.job_publish``): the event
    and the inbox's run commit with the job's state and are published after.
    """
    body = dict(payload)
    event = JobEventName(payload["event"])
    if event.is_final:
        inbox_append(session_id=session_id, kind=Event.Kind.JOB_EVENT, payload=body)
        if event != JobEventName.COMPLETED:
            # A job that waited for approval and ended first: its request goes with it.
            approval_job_ended(job_id=payload["job_id"])
    else:
        event_append(session_id=session_id, kind=Event.Kind.JOB_EVENT, payload=body, pending=False)


def session_is_live(*, owner: Any, session_id: str) -> bool:
    try:
        session_for(owner=owner, session_id=session_id)
    except SessionNotFound:
        return False
    return True


class SessionTextModel:
    """A session's model client, asked for one whole answer (from a tool's thread)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def write(self, *, system: str, prompt: str) -> str:
        client = get_model_client(self.name)

        async def collect() -> str:
            parts: list[str] = []
            stream = client.stream(
                system=system, messages=[{"role": "user", "content": prompt}], tools=[]
            )
            async for item in stream:
                if isinstance(item, TextDelta):
                    parts.append(item.text)
            return "".join(parts)

        return asyncio.run(collect())


def session_text_model(*, session_id: str) -> TextModel | None:
    name = AgentSession.objects.filter(id=session_id).values_list("model", flat=True).first()
    name = name or settings.AGENTSITE_MODEL
    return None if name in PROSELESS_MODELS else SessionTextModel(name)
