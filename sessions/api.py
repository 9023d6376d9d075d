"""The sessions REST API (``/api/sessions``, ``/api/runs``).

Posting a message follows the background-response contract: ``202`` with the
run that will consume the message and a continuation token; polling the run
with the token returns the text produced since, and a new token, until the run
is finished and the token is ``null``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from django.http import HttpRequest
from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import ConfigDict, Field

from agentsite.core.errors import Invalid
from agentsite.web.auth import request_user
from agentsite.web.http import NOT_BLANK, SPACE, Body, errors
from jobs.models import CALLBACK_URL_MAX_LENGTH
from sessions.llm.names import MODEL_NAME_PATTERN, MODEL_NAMES_TEXT
from sessions.models import AgentSession, Event, Run
from sessions.runs import run_request_cancel
from sessions.services import (
    message_post,
    run_for,
    session_create,
    session_delete,
    session_for,
    session_list,
    session_update,
)
from sessions.titles import TITLE_MAX_CHARS
from sessions.tokens import run_token, run_token_seq, session_token
from sessions.tokens import session_token_seq as token_seq

router = Router(tags=["sessions"])

CALLBACK = (
    "An http(s) URL to POST the session's events to, signed (Standard Webhooks); "
    "empty: your own address (`PUT /api/webhooks`), if any."
)

# The models a session may name, blanks around allowed: the rule create_session
# applies and the pattern the document shows.
MODEL_PATTERN = rf"^{SPACE}*({MODEL_NAME_PATTERN})?{SPACE}*$"


class SessionIn(Body):
    title: str = Field(default="", max_length=200)
    model: str = Field(
        default="",
        max_length=100,
        description=f"{MODEL_NAMES_TEXT}; empty for the default.",
        json_schema_extra={"pattern": MODEL_PATTERN},
    )
    system_prompt: str = Field(default="", max_length=20_000)
    callback_url: str = Field(default="", max_length=CALLBACK_URL_MAX_LENGTH, description=CALLBACK)


def patch_schema(schema: dict[str, Any]) -> None:
    """Each field optional, at least one sent: a field left out is left as it is."""
    schema["minProperties"] = 1
    for field in schema["properties"].values():
        field.pop("default", None)


class SessionPatch(Body):
    model_config = ConfigDict(extra="forbid", json_schema_extra=patch_schema)

    # The defaults stand for "not sent" (model_fields_set), never for a value.
    title: str = Field(
        default="",
        min_length=1,
        max_length=TITLE_MAX_CHARS,
        description="Not only whitespace; no control characters (line breaks, tabs, NUL).",
        json_schema_extra={"pattern": NOT_BLANK},
    )
    callback_url: str = Field(default="", max_length=CALLBACK_URL_MAX_LENGTH, description=CALLBACK)


class MessageIn(Body):
    text: str = Field(
        min_length=1,
        max_length=100_000,
        description="Not only whitespace.",
        json_schema_extra={"pattern": NOT_BLANK},
    )


class EventsQuery(Schema):
    after: str = ""
    limit: int = Field(default=100, ge=1, le=1000)


# The models' choices, spelled out so the document names no enum component.
SessionState = Literal["idle", "running"]
RunState = Literal["queued", "running", "completed", "failed", "cancelled"]
EventKind = Literal[
    "user_message",
    "assistant_delta",
    "assistant_message",
    "tool_call",
    "tool_result",
    "job_event",
    "run_started",
    "run_finished",
    "run_requeued",
    "approval_requested",
    "approval_decided",
    "error",
]


class SessionDoc(Schema):
    session_id: str
    title: str
    model: str
    system_prompt: str
    callback_url: str = Field(description="Where its events go; empty: your own address.")
    state: SessionState
    pending_approvals: int = Field(
        description="Requests for approval and questions waiting for you (/api/approvals)."
    )
    last_seq: int
    created_at: str
    updated_at: str


class SessionList(Schema):
    sessions: list[SessionDoc]


class SessionDeleted(Schema):
    session_id: str
    deleted: bool
    cancelled_runs: int
    cancelled_jobs: int


class MessageAccepted(Schema):
    run_id: str
    continuation_token: str


class EventDoc(Schema):
    seq: int
    kind: EventKind
    payload: dict[str, Any]
    created_at: str
    token: str


class EventPage(Schema):
    events: list[EventDoc]
    next_token: str


class RunPoll(Schema):
    run_id: str
    status: RunState
    text: str
    continuation_token: str | None = Field(description="null once the run is finished.")


class RunCancelled(Schema):
    run_id: str
    status: RunState | Literal["cancelling"]


def link(operation_id: str, parameter: str, pointer: str, description: str) -> dict[str, Any]:
    return {
        "operationId": operation_id,
        "parameters": {parameter: f"$response.body#/{pointer}"},
        "description": description,
    }


def session_link(operation_id: str, description: str) -> dict[str, Any]:
    return link(operation_id, "session_id", "session_id", description)


def run_link(operation_id: str, description: str) -> dict[str, Any]:
    return link(operation_id, "run_id", "run_id", description)


SESSION_LINKS = {
    "responses": {
        201: {
            "links": {
                "ReadSession": session_link("sessions_api_read_session", "Read it."),
                "RenameSession": session_link(
                    "sessions_api_update_session", "Rename it, or set where its events go."
                ),
                "PostMessage": session_link("sessions_api_post_message", "Send a message."),
                "ListEvents": session_link("sessions_api_list_events", "Read its log."),
                "FollowSession": session_link(
                    "sessions_streams_session_stream", "Follow its events."
                ),
                "DeleteSession": session_link("sessions_api_delete_session", "Delete it."),
            }
        }
    }
}
RUN_LINKS = {
    "responses": {
        202: {
            "links": {
                "PollRun": run_link("sessions_api_poll_run", "Poll the run's text."),
                "FollowRun": run_link("sessions_streams_run_stream", "Follow the run's events."),
                "CancelRun": run_link("sessions_api_cancel_run", "Stop the run."),
            }
        }
    }
}


def session_doc(session: AgentSession) -> dict[str, Any]:
    return {
        "session_id": session.id,
        "title": session.title,
        "model": session.model,
        "system_prompt": session.system_prompt,
        "callback_url": session.callback_url,
        "state": session.state,
        "pending_approvals": session.pending_approvals,
        "last_seq": session.last_seq,
        "created_at": session.created_at.isoformat(),
        "updated_at": session.updated_at.isoformat(),
    }


def _session(request: HttpRequest, session_id: str) -> AgentSession:
    return session_for(owner=request_user(request), session_id=session_id)


def _run(request: HttpRequest, run_id: str) -> Run:
    return run_for(owner=request_user(request), run_id=run_id)


@router.post(
    "/sessions",
    response={201: SessionDoc, **errors(400, 422)},
    summary="Create a session",
    openapi_extra=SESSION_LINKS,
)
def create_session(request: HttpRequest, body: SessionIn) -> Status[dict[str, Any]]:
    if not re.fullmatch(MODEL_PATTERN, body.model):
        raise Invalid(
            "invalid_model",
            f"Unknown model: use {MODEL_NAMES_TEXT}.",
            {"model": body.model},
        )
    session = session_create(
        owner=request_user(request),
        title=body.title,
        model=body.model.strip(),
        system_prompt=body.system_prompt,
        callback_url=body.callback_url,
    )
    return Status(201, session_doc(session))


@router.get("/sessions", response={200: SessionList, **errors()}, summary="List your sessions")
def list_sessions(request: HttpRequest) -> dict[str, Any]:
    return {"sessions": [session_doc(s) for s in session_list(owner=request_user(request))]}


@router.get(
    "/sessions/{session_id}", response={200: SessionDoc, **errors(404)}, summary="Read a session"
)
def read_session(request: HttpRequest, session_id: str) -> dict[str, Any]:
    return session_doc(_session(request, session_id))


@router.patch(
    "/sessions/{session_id}",
    response={200: SessionDoc, **errors(400, 404, 422)},
    summary="Rename a session, or set where its events go",
    description="Send `title`, `callback_url` or both; a field left out keeps its value. "
    "A `callback_url` webhooks may not reach is refused (422 `callback_url_refused`).",
)
def update_session(request: HttpRequest, session_id: str, body: SessionPatch) -> dict[str, Any]:
    sent = body.model_fields_set
    session = session_update(
        session=_session(request, session_id),
        title=body.title if "title" in sent else None,
        callback_url=body.callback_url if "callback_url" in sent else None,
    )
    return session_doc(session)


@router.delete(
    "/sessions/{session_id}",
    response={200: SessionDeleted, **errors(404)},
    summary="Delete a session, cancelling its jobs and runs",
)
def delete_session(request: HttpRequest, session_id: str) -> dict[str, Any]:
    cancelled = session_delete(session=_session(request, session_id))
    return {
        "session_id": session_id,
        "deleted": True,
        "cancelled_runs": cancelled["runs"],
        "cancelled_jobs": cancelled["jobs"],
    }


@router.post(
    "/sessions/{session_id}/messages",
    response={202: MessageAccepted, **errors(400, 404, 422, 429)},
    summary="Send a message",
    openapi_extra=RUN_LINKS,
)
def post_message(request: HttpRequest, session_id: str, body: MessageIn) -> Status[dict[str, Any]]:
    session = _session(request, session_id)
    if not re.search(NOT_BLANK, body.text):
        raise Invalid("invalid_request", "The message text is empty.")
    event, run = message_post(session=session, text=body.text)  # not found if deleted meanwhile
    token = run_token(run_id=run.id, owner_id=session.owner_id, seq=event.seq)
    return Status(202, {"run_id": run.id, "continuation_token": token})


@router.get(
    "/sessions/{session_id}/events",
    response={200: EventPage, **errors(400, 404, 422)},
    summary="Read the log after a token",
)
def list_events(request: HttpRequest, session_id: str, query: Query[EventsQuery]) -> dict[str, Any]:
    session = _session(request, session_id)
    after = token_seq(query.after, session_id=session.id, owner_id=session.owner_id)
    events = list(
        Event.objects.filter(session=session, seq__gt=after).order_by("seq")[: query.limit]
    )

    def token(seq: int) -> str:
        return session_token(session_id=session.id, owner_id=session.owner_id, seq=seq)

    return {
        "events": [
            {
                "seq": e.seq,
                "kind": e.kind,
                "payload": e.payload,
                "created_at": e.created_at.isoformat(),
                "token": token(e.seq),
            }
            for e in events
        ],
        "next_token": token(events[-1].seq if events else after),
    }


@router.get(
    "/runs/{run_id}",
    response={200: RunPoll, **errors(400, 404)},
    summary="Poll a run with its continuation token",
)
def poll_run(request: HttpRequest, run_id: str, continuation_token: str = "") -> dict[str, Any]:
    run = _run(request, run_id)
    after = run_token_seq(continuation_token, run_id=run.id, owner_id=run.owner_id)
    # Status first: every delta of a finished run was written before it finished.
    status = Run.objects.filter(pk=run.pk).values_list("status", flat=True).get()
    deltas = Event.objects.filter(
        session_id=run.session_id, run_id=run.id, kind=Event.Kind.ASSISTANT_DELTA
    )
    if after is not None:
        deltas = deltas.filter(seq__gt=after)
    rows = list(deltas.order_by("seq").values_list("seq", "payload"))
    position = rows[-1][0] if rows else (after if after is not None else run.start_seq)
    finished = status in Run.TERMINAL
    return {
        "run_id": run.id,
        "status": status,
        "text": "".join(str(p.get("text", "")) for _, p in rows),
        "continuation_token": None
        if finished
        else run_token(run_id=run.id, owner_id=run.owner_id, seq=position),
    }


@router.post(
    "/runs/{run_id}/cancel", response={202: RunCancelled, **errors(404)}, summary="Stop a run"
)
def cancel_run(request: HttpRequest, run_id: str) -> Status[dict[str, Any]]:
    run = _run(request, run_id)
    return Status(202, {"run_id": run.id, "status": run_request_cancel(run_id=run.id)})
