"""The sessions REST API (``/api/sessions``, ``/api/runs``).

Posting a message follows the background-response contract: ``202`` with the
run that will consume the message and a continuation token; polling the run
with the token returns the text produced since, and a new token, until the run
is finished and the token is ``null``.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from agentsite.api import ApiError, errors, request_user
from sessions.models import AgentSession, Event, Run
from sessions.runs import run_request_cancel
from sessions.services import (
    SessionNotFound,
    message_post,
    session_create,
    session_delete,
    session_get,
    session_list,
)
from sessions.tokens import BadToken, ForeignToken, run_token, run_token_seq, session_token
from sessions.tokens import session_token_seq as token_seq

router = Router(tags=["sessions"])

MODEL_NAMES = ("offline", "scripted", "anthropic")


class SessionIn(Schema):
    title: str = Field(default="", max_length=200)
    model: str = Field(default="", max_length=100)
    system_prompt: str = Field(default="", max_length=20_000)


class MessageIn(Schema):
    text: str = Field(min_length=1, max_length=100_000)


class EventsQuery(Schema):
    after: str = ""
    limit: int = Field(default=100, ge=1, le=1000)


def session_doc(session: AgentSession) -> dict[str, Any]:
    return {
        "session_id": session.id,
        "title": session.title,
        "model": session.model,
        "system_prompt": session.system_prompt,
        "state": session.state,
        "last_seq": session.last_seq,
        "created_at": session.created_at.isoformat(),
        "updated_at": session.updated_at.isoformat(),
    }


def _session(request: HttpRequest, session_id: str) -> AgentSession:
    try:
        return session_get(owner=request_user(request), session_id=session_id)
    except SessionNotFound as exc:
        raise ApiError(404, "not_found", "No such session.") from exc


def _run(request: HttpRequest, run_id: str) -> Run:
    run = Run.objects.filter(pk=run_id, owner_id=request_user(request).pk).first()
    if run is None:
        raise ApiError(404, "not_found", "No such run.")
    return run


def token_api_error(exc: BadToken | ForeignToken) -> ApiError:
    """A continuation-token error as the API reports it: someone else's is not found."""
    if isinstance(exc, ForeignToken):
        return ApiError(404, "not_found", "No such continuation token for this resource.")
    return ApiError(400, "bad_token", str(exc) or "The continuation token is not valid.")


@router.post("/sessions", response={201: dict, **errors(400, 413, 422)}, summary="Create a session")
def create_session(request: HttpRequest, body: SessionIn) -> Status[dict[str, Any]]:
    model = body.model.strip()
    if model and model not in MODEL_NAMES and not model.startswith("claude"):
        raise ApiError(
            422,
            "invalid_model",
            "Unknown model: use offline, scripted or a claude-* model name.",
            {"model": model},
        )
    session = session_create(
        owner=request_user(request),
        title=body.title,
        model=model,
        system_prompt=body.system_prompt,
    )
    return Status(201, session_doc(session))


@router.get("/sessions", response={200: dict, **errors()}, summary="List your sessions")
def list_sessions(request: HttpRequest) -> dict[str, Any]:
    return {"sessions": [session_doc(s) for s in session_list(owner=request_user(request))]}


@router.get("/sessions/{session_id}", response={200: dict, **errors(404)}, summary="Read a session")
def read_session(request: HttpRequest, session_id: str) -> dict[str, Any]:
    return session_doc(_session(request, session_id))


@router.delete(
    "/sessions/{session_id}",
    response={200: dict, **errors(404)},
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
    response={202: dict, **errors(400, 404, 413, 422)},
    summary="Send a message",
)
def post_message(request: HttpRequest, session_id: str, body: MessageIn) -> Status[dict[str, Any]]:
    session = _session(request, session_id)
    if not body.text.strip():
        raise ApiError(422, "invalid_request", "The message text is empty.")
    event, run = message_post(session=session, text=body.text)
    token = run_token(run_id=run.id, owner_id=session.owner_id, seq=event.seq)
    return Status(202, {"run_id": run.id, "continuation_token": token})


@router.get(
    "/sessions/{session_id}/events",
    response={200: dict, **errors(400, 404, 422)},
    summary="Read the log after a token",
)
def list_events(request: HttpRequest, session_id: str, query: Query[EventsQuery]) -> dict[str, Any]:
    session = _session(request, session_id)
    try:
        after = token_seq(query.after, session_id=session.id, owner_id=session.owner_id)
    except (BadToken, ForeignToken) as exc:
        raise token_api_error(exc) from exc
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
    response={200: dict, **errors(400, 404)},
    summary="Poll a run with its continuation token",
)
def poll_run(request: HttpRequest, run_id: str, continuation_token: str = "") -> dict[str, Any]:
    run = _run(request, run_id)
    try:
        after = run_token_seq(continuation_token, run_id=run.id, owner_id=run.owner_id)
    except (BadToken, ForeignToken) as exc:
        raise token_api_error(exc) from exc
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


@router.post("/runs/{run_id}/cancel", response={202: dict, **errors(404)}, summary="Stop a run")
def cancel_run(request: HttpRequest, run_id: str) -> Status[dict[str, Any]]:
    run = _run(request, run_id)
    return Status(202, {"run_id": run.id, "status": run_request_cancel(run_id=run.id)})
