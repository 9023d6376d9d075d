"""Session services: who owns what, create, change, post a message, the chat's actions, delete.

``session_for`` and ``run_for`` are the one ownership rule of each entity: every
edge (REST, server-sent events, the websocket, the chat pages) looks a session
or a run up through them, so a deleted session or someone else's run is not
found the same way everywhere.
"""

from __future__ import annotations

import logging
from typing import Any, TypedDict

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.utils import timezone

from accounts.quotas import (
    BUSY_RETRY_AFTER_S,
    Quota,
    quota_exceeded,
    quota_limits,
    quota_lock,
    rate_give_back,
    rate_take,
)
from agentsite.compat.django import CompiledQuery
from agentsite.core.errors import Conflict, Invalid, NotFound
from agentsite.core.ids import is_id
from jobs.lifecycle import job_request_cancel
from jobs.models import Job
from jobs.services import job_get
from jobs.webhooks import callback_url_check
from sessions.approvals import approvals_cancel_for_session
from sessions.client_tools import client_tools_check, tool_results_check
from sessions.inbox import inbox_append_locked
from sessions.llm.names import model_is_allowed, models_allowed
from sessions.models import AgentSession, Event, Run
from sessions.payloads import ClientTool, ClientToolResult, UserMessagePayload
from sessions.runs import run_request_cancel, session_lock
from sessions.titles import session_title_auto, title_check

log = logging.getLogger(__name__)

Owner = AbstractBaseUser | AnonymousUser


class SessionNotFound(NotFound):
    """No such session for this owner (someone else's and deleted ones are not found either)."""

    def __init__(self) -> None:
        super().__init__("No such session.")


class RunNotFound(NotFound):
    """No such run for this owner."""

    def __init__(self) -> None:
        super().__init__("No such run.")


class Cancelled(TypedDict):
    """What deleting a session stopped."""

    runs: int
    jobs: int


# --- ownership -------------------------------------------------------------------------


def session_for(*, owner: Owner, session_id: str) -> AgentSession:
    """The owner's live session; SessionNotFound for anyone else's, a deleted or a bad id."""
    if not is_id("ses", session_id) or owner.pk is None:
        raise SessionNotFound()
    session = _OWNED_SESSION.one_or_none(session_id=session_id, owner_id=owner.pk)
    if session is None:
        raise SessionNotFound()
    return session


def run_for(*, owner: Owner, run_id: str) -> Run:
    """The owner's run; RunNotFound for anyone else's or a bad id."""
    if not is_id("run", run_id) or owner.pk is None:
        raise RunNotFound()
    run = _OWNED_RUN.one_or_none(run_id=run_id, owner_id=owner.pk)
    if run is None:
        raise RunNotFound()
    return run


# Every request on a session or a run asks one of these, and every message the
# last: compiled once.
_OWNED_SESSION: CompiledQuery[AgentSession] = CompiledQuery(
    lambda session_id, owner_id: AgentSession.objects.filter(
        pk=session_id, owner_id=owner_id, deleted_at__isnull=True
    ),
    session_id=str,
    owner_id=int,
)
_OWNED_RUN: CompiledQuery[Run] = CompiledQuery(
    lambda run_id, owner_id: Run.objects.filter(pk=run_id, owner_id=owner_id),
    run_id=str,
    owner_id=int,
)
_OWNER_LIVE_RUNS: CompiledQuery[tuple[str, str]] = CompiledQuery(
    lambda owner_id: Run.objects.filter(
        owner_id=owner_id, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]
    ).values_list("session_id", "status"),
    owner_id=int,
)


# --- sessions ----------------------------------------------------------------------------


def session_create(
    *,
    owner: Any,
    title: str = "",
    model: str = "",
    system_prompt: str = "",
    callback_url: str = "",
) -> AgentSession:
    """A new session; Invalid for a model this deployment does not offer
    (``model_not_allowed``) or an address webhooks may not reach (``callback_url_refused``)."""
    model = model.strip()
    model_check(model)
    if callback_url:
        callback_url_check(callback_url)
    return AgentSession.objects.create(
        owner=owner,
        title=title.strip()[:200],
        model=model,
        system_prompt=system_prompt,
        callback_url=callback_url,
    )


def model_check(model: str) -> None:
    """Refuse a model outside ``AGENTSITE_ALLOWED_MODELS`` (the operator's key pays for them)."""
    if not model_is_allowed(model):
        allowed = models_allowed()
        raise Invalid(
            "model_not_allowed",
            f"The model {model!r} is not offered here: use one of {', '.join(allowed)}"
            " (or none, for the default).",
            {"model": model, "allowed": allowed},
        )


def session_update(
    *, session: AgentSession, title: str | None = None, callback_url: str | None = None
) -> AgentSession:
    """Change what its owner may change: the title (``sessions.titles.title_check``), the
    address its events go to (``jobs.webhooks.callback_url_check``; "" for the owner's).

    ``None`` leaves a field as it is. A set title is never replaced by the automatic
    one, which only fills an empty title.
    """
    fields: dict[str, str] = {}
    if title is not None:
        fields["title"] = title_check(title)
    if callback_url is not None:
        fields["callback_url"] = callback_url_check(callback_url) if callback_url else ""
    if not fields:
        raise Invalid("invalid_request", "Send a title, a callback_url or both.")
    live = AgentSession.objects.filter(pk=session.pk, deleted_at__isnull=True)
    if live.update(**fields) != 1:
        raise SessionNotFound()  # deleted meanwhile
    for name, value in fields.items():
        setattr(session, name, value)
    return session


def session_list(*, owner: Owner) -> list[AgentSession]:
    return list(AgentSession.objects.filter(owner_id=owner.pk, deleted_at__isnull=True))


def session_mark_seen(*, session_id: str, seq: int) -> None:
    """The owner has looked at the log up to ``seq`` (for "new since your visit")."""
    AgentSession.objects.filter(pk=session_id, seen_seq__lt=seq).update(seen_seq=seq)


def session_delete(*, session: AgentSession) -> Cancelled:
    """Soft-delete a session, cancel its live runs, its pending requests and its unfinished
    jobs."""
    with transaction.atomic():
        AgentSession.objects.filter(pk=session.pk).update(deleted_at=timezone.now())
    runs = 0
    for run_id in Run.objects.filter(
        session_id=session.id, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]
    ).values_list("id", flat=True):
        run_request_cancel(run_id=run_id)
        runs += 1
    approvals_cancel_for_session(session_id=session.id)
    return {"runs": runs, "jobs": _session_jobs_cancel(session_id=session.id)}


def _session_jobs_cancel(*, session_id: str) -> int:
    live = Job.objects.filter(session_id=session_id).exclude(status__in=Job.TERMINAL)
    count = 0
    for job_id in live.values_list("id", flat=True):
        job_request_cancel(job_id=job_id)
        count += 1
    return count


# --- what the chat asks for ----------------------------------------------------------------


def message_post(
    *,
    session: AgentSession,
    text: str,
    client_tools: list[ClientTool] | None = None,
    tool_results: list[ClientToolResult] | None = None,
) -> tuple[Event, Run]:
    """Append a pending user message; returns it and the run that will consume it.

    ``client_tools`` are tools the sender carries out itself, ``tool_results`` its
    answers to the model's calls of them (``sessions.client_tools``): refused with
    Invalid when a model could not be offered a tool or an answer is to no awaiting
    call, or when the session's model is no longer offered. Raises SessionNotFound
    for a deleted session, which takes no new turns, and QuotaExceeded when the
    owner is at a limit (``accounts.quotas``): a refused message is not written.
    """
    payload: UserMessagePayload = {"text": text}
    if client_tools:
        client_tools_check(client_tools)
        payload["client_tools"] = client_tools
    model_check(session.model)
    owner_id = session.owner_id
    limits = quota_limits(user_id=owner_id)
    turns, rate = limits[Quota.LIVE_TURNS], limits[Quota.MESSAGES_PER_MINUTE]
    mark = None
    try:
        with transaction.atomic():
            locked = session_lock(session.pk)
            if locked.deleted_at is not None:
                raise SessionNotFound()
            if tool_results:
                tool_results_check(session_id=locked.pk, results=tool_results)
                payload["tool_results"] = tool_results
            if turns is not None:
                live_turns_check(locked, turns)
            if rate is not None:
                mark = rate_take(user_id=owner_id, quota=Quota.MESSAGES_PER_MINUTE, limit=rate)
            event, run = inbox_append_locked(
                session=locked, kind=Event.Kind.USER_MESSAGE, payload=dict(payload)
            )
            if run is None:  # cannot be: a live session with a pending event has a run
                raise SessionNotFound()
            if not locked.title:
                session_title_auto(session_id=locked.pk, text=text)
    except BaseException:
        if mark is not None:
            rate_give_back(user_id=owner_id, quota=Quota.MESSAGES_PER_MINUTE, mark=mark)
        raise
    return event, run


def live_turns_check(session: AgentSession, limit: int) -> None:
    """Refuse a message that would queue a new turn while the owner has ``limit`` live.

    A message to a session whose next turn is already queued joins that turn's
    batch (``runs.run_route_locked``), so it starts no turn and is let through.
    """
    quota_lock(user_id=session.owner_id, quota=Quota.LIVE_TURNS)
    live = _OWNER_LIVE_RUNS.all(owner_id=session.owner_id)
    if (session.pk, Run.Status.QUEUED) in live:
        return
    if len(live) >= limit:
        raise quota_exceeded(Quota.LIVE_TURNS, limit, retry_after_s=BUSY_RETRY_AFTER_S)


def session_interrupt(*, session: AgentSession) -> tuple[str, str]:
    """Stop the session's turn: the one being generated, else the one about to start.

    Returns the run and the state it reached; Conflict when nothing is running.
    """
    active = Run.objects.filter(session=session, status__in=[Run.Status.RUNNING, Run.Status.QUEUED])
    run = active.order_by("-status", "created_at").first()
    if run is None:
        raise Conflict("no_active_run", "Nothing is running in this session.")
    return run.id, run_request_cancel(run_id=run.id)


def job_stop(*, owner: Owner, job_id: str) -> str:
    """Ask the owner's job to stop; returns the state reached (NotFound for anyone else's)."""
    job = job_get(owner=owner, job_id=job_id)
    return job_request_cancel(job_id=job.id)
