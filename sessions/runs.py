"""The run lifecycle and the router: the only code that changes ``Run.status``.

Every decision that involves a session's inbox — claim the pending events as a
batch, queue the next run, let the session go idle — happens in a transaction
that first locks the session row (``select_for_update`` on PostgreSQL; SQLite
transactions are IMMEDIATE and so already hold the database write lock). Those
transactions therefore serialize per session across processes, which is what
makes the router race-free:

- an inbox append sees either a queued run that has not claimed its batch yet
  (which will take the new event) or no queued run (and queues one);
- a run claims *all* pending events at once, so an event is consumed by
  exactly one run;
- a session has at most one queued run and at most one running run; the queued
  run is handed to RQ only once no run of its session is running.

Transitions: queued → running → completed | failed | cancelled, queued →
cancelled, and running → queued when a stopping worker hands a turn back (its
batch stays its own; a ``run_requeued`` event marks what the abandoned attempt
wrote as superseded). Each is a compare-and-set on the current status.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import django_rq
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from redis import Redis
from rq import Queue
from rq.job import Job as RqJob

from agentsite.compat.django import CompiledQuery
from agentsite.core.clock import database_now, database_now_plus
from agentsite.core.queries import get_or_none, insert
from jobs.alive import silent_among
from jobs.groups import cancel_key
from jobs.lifecycle import CANCEL_KEY_TTL_S
from jobs.live import redis_connection
from sessions.client_tools import client_tools_of
from sessions.events import event_append
from sessions.models import AgentSession, Event, Run
from sessions.payloads import (
    ErrorPayload,
    RunFinishedPayload,
    RunRequeuedPayload,
    RunStartedPayload,
)

log = logging.getLogger(__name__)

# A running run whose worker has not beaten for this long is presumed lost.
RUN_STALE_AFTER_S = float(settings.AGENTSITE_RUN_STALE_S)
# A queued run that RQ does not know after this long (its enqueue failed while
# Redis was away, or Redis lost its data) is handed to RQ again. Only the moment
# between a commit and its enqueue is raced, so this can be short.
RUN_REQUEUE_AFTER_S = 10.0
# Turn workers beat all their runs in one statement this often.
HEARTBEAT_EVERY_S = 2.0

ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING)
# The RQ entry point of a turn (``sessions.tasks.run_turn``), named rather than
# imported: the tasks sit above the runtime, which sits above this module.
RUN_TURN = "sessions.tasks.run_turn"


@dataclass(frozen=True)
class Claim:
    """What a worker gets when it starts a run: the run, its batch in order, and its
    session (with its owner) as the claim's lock read it."""

    run: Run
    batch: list[Event]
    session: AgentSession


@dataclass(frozen=True)
class LiveRuns:
    """A session's queued run (the newest, if a handed-back one waits too) and whether
    one of its runs is running: what the router decides on."""

    queued: Run | None
    running: bool


# The queries every turn runs, from the message that asks for it to its end, are
# compiled once (``agentsite.compat.django``): Django would build and compile each
# anew at every call, at several times the cost of running it.
_SESSION_LOCKED: CompiledQuery[AgentSession] = CompiledQuery(
    lambda session_id: AgentSession.objects.select_for_update().filter(pk=session_id),
    session_id=str,
)
_RUN_SESSION_LOCKED = {
    related: CompiledQuery[Run](
        lambda run_id, related=related: (
            Run.objects.select_related(related).select_for_update(of=("session",)).filter(pk=run_id)
        ),
        run_id=str,
    )
    for related in ("session", "session__owner")
}
_LIVE_RUNS: CompiledQuery[Run] = CompiledQuery(
    lambda session_id: Run.objects.filter(session_id=session_id, status__in=ACTIVE),
    session_id=str,
)
# Whether the session has a pending event: the first one's seq, if any.
_FIRST_PENDING: CompiledQuery[tuple[int]] = CompiledQuery(
    lambda session_id: (
        Event.objects.filter(session_id=session_id, pending=True).order_by().values_list("seq")[:1]
    ),
    session_id=str,
)
_PENDING_LOCKED: CompiledQuery[Event] = CompiledQuery(
    lambda session_id: (
        Event.objects.select_for_update()
        .filter(session_id=session_id, pending=True)
        .order_by("seq")
    ),
    session_id=str,
)


def session_lock(session_id: str) -> AgentSession:
    """Lock the session row for the rest of the current transaction."""
    session = _SESSION_LOCKED.one_or_none(session_id=session_id)
    if session is None:
        raise AgentSession.DoesNotExist(f"no session {session_id}")
    return session


def _run_session_lock(run_id: str, *, owner: bool = False) -> Run | None:
    """The run with its session (``run.session``, and its owner when asked), the session's
    row locked for the rest of the current transaction, in one statement: the lock is
    taken through the run rather than after reading the run's session id."""
    query = _RUN_SESSION_LOCKED["session__owner" if owner else "session"]
    return query.one_or_none(run_id=run_id)


def _live_runs(session_id: str) -> LiveRuns:
    """The session's live runs, in one query (a session has very few)."""
    live = _LIVE_RUNS.all(session_id=session_id)
    queued = [run for run in live if run.status == Run.Status.QUEUED]
    return LiveRuns(
        # As ``Run``'s ordering (newest first) would pick it.
        queued=max(queued, key=lambda run: run.created_at) if queued else None,
        running=any(run.status == Run.Status.RUNNING for run in live),
    )


def run_enqueue(run_id: str, *, at_front: bool = False) -> None:
    """Hand a run to the turn workers; the RQ job id is the run id."""
    _turns_queue(redis_connection()).enqueue(
        RUN_TURN, run_id, job_id=run_id, result_ttl=300, failure_ttl=3600, at_front=at_front
    )


@functools.lru_cache(maxsize=2)
def _turns_queue(connection: Redis) -> Queue:
    """The ``turns`` queue on this process's Redis client (django_rq's own would connect
    anew each time), built once per client: a fork's child has a client of its own."""
    return django_rq.get_queue("turns", connection=connection)


def _enqueue_on_commit(run_id: str) -> None:
    def enqueue() -> None:
        try:
            run_enqueue(run_id)
        except Exception:
            # The run stays queued; runs_reap hands it to RQ again.
            log.exception("could not enqueue run %s", run_id)

    transaction.on_commit(enqueue)


def _set_state(session: AgentSession, state: str) -> None:
    if session.state != state:
        AgentSession.objects.filter(pk=session.pk).update(state=state)
        session.state = state


def run_route(*, session_id: str) -> Run | None:
    """Make sure the session's pending events have a run to consume them.

    Must be called inside a transaction. Returns the queued run that will take
    the pending events, or None when nothing is pending.
    """
    assert transaction.get_connection().in_atomic_block, "run_route needs a transaction"
    return run_route_locked(session_lock(session_id))


def run_route_locked(session: AgentSession, *, pending: bool | None = None) -> Run | None:
    """``run_route`` for a session the current transaction has locked (``session_lock``).

    ``pending=True`` when the caller has just appended a pending event (one query less).
    """
    live = _live_runs(session.pk)
    if live.queued is not None:
        return live.queued
    return _route_unqueued(session, running=live.running, pending=pending)


def _route_unqueued(
    session: AgentSession, *, running: bool, pending: bool | None = None
) -> Run | None:
    """``run_route`` once the session is locked and known to have no queued run
    (``running``: whether one of its runs is running)."""
    session_id = session.pk
    if session.deleted_at is not None:
        return None
    if pending is None:
        pending = bool(_FIRST_PENDING.all(session_id=session_id))
    if not pending:
        _set_state(session, AgentSession.State.RUNNING if running else AgentSession.State.IDLE)
        return None
    run = Run(session_id=session_id, owner_id=session.owner_id)
    insert(run)
    if not running:
        _enqueue_on_commit(run.id)
    _set_state(session, AgentSession.State.RUNNING)
    return run


def run_start(*, run_id: str) -> Claim | None:
    """queued → running, claiming every pending event of the session as the batch
    (and fixing the client tools the run offers, ``sessions.client_tools``).

    Returns None when the run is not queued any more (a retried RQ job, a
    cancelled run) or when another run of the session is still running (that
    run hands this one to RQ again when it ends).
    """
    with transaction.atomic():
        run = _run_session_lock(run_id, owner=True)
        # The run's row is read as the lock found it, not locked: only an ended run,
        # which stays ended, is refused here; the claim below is the compare-and-set.
        if run is None or run.status in Run.TERMINAL:
            return None
        session_id = run.session_id
        live = [(r.id, r.status) for r in _LIVE_RUNS.all(session_id=session_id)]
        if any(status == Run.Status.RUNNING for _, status in live):
            return None
        # Another queued run exists only beside a handed-back run; the events that
        # arrived meanwhile were promised to that one.
        others_queued = any(rid != run_id for rid, _ in live)
        # A handed-back run takes its own batch again (it has a batch size from its
        # first start, and the session lock keeps that current); a fresh run has none.
        own = []
        if run.batch_size:
            own = list(Event.objects.filter(consumed_by_id=run_id).order_by("seq"))
        batch = own + ([] if others_queued else _pending_locked(session_id=session_id))
        now = timezone.now()
        run.batch_size = len(batch)
        run.start_seq = batch[0].seq - 1 if batch else 0
        run.client_tools = client_tools_of(batch)
        # The claim: one compare-and-set, the heartbeat on the database's clock (the
        # reaper on another host judges it by it).
        started = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
            status=Run.Status.RUNNING,
            started_at=now,
            heartbeat_at=database_now(),
            batch_size=run.batch_size,
            start_seq=run.start_seq,
            client_tools=run.client_tools,
        )
        if started != 1:
            return None
        run.status, run.started_at, run.heartbeat_at = Run.Status.RUNNING, now, now
        Event.objects.filter(pk__in=[e.pk for e in batch if e.pending]).update(
            pending=False, consumed_by_id=run_id
        )
        for event in batch:
            event.pending, event.consumed_by_id = False, run_id
        claimed: RunStartedPayload = {"run_id": run_id, "batch_size": len(batch)}
        event_append(
            session_id=session_id, kind=Event.Kind.RUN_STARTED, payload=claimed, run_id=run_id
        )
    return Claim(run=run, batch=batch, session=run.session)


def _pending_locked(*, session_id: str) -> list[Event]:
    """The session's pending events, in order, their rows locked."""
    # A cap only for comparisons (one run per trigger); normally the batch is everything.
    limit = settings.AGENTSITE_MAX_BATCH
    if limit > 0:
        capped = Event.objects.select_for_update().filter(session_id=session_id, pending=True)
        return list(capped.order_by("seq")[:limit])
    return _PENDING_LOCKED.all(session_id=session_id)


def run_hand_back(*, run_id: str, reason: str) -> bool:
    """running → queued: a stopping worker gives the turn back for another worker.

    The run keeps its batch (``run_start`` claims it again) and its id, so a
    client polling it or following its stream simply sees it run again. The
    ``run_requeued`` event says which of the run's earlier events the new
    attempt supersedes (those after ``superseded_after_seq``). The caller
    hands the run to RQ once its own RQ job is closed.
    """
    with transaction.atomic():
        run = _run_session_lock(run_id)
        if run is None:
            return False
        session_id = run.session_id
        moved = Run.objects.filter(
            pk=run_id, status=Run.Status.RUNNING, cancel_requested_at__isnull=True
        ).update(status=Run.Status.QUEUED, started_at=None, heartbeat_at=None, first_token_at=None)
        if moved != 1:
            return False
        started_seq = (
            Event.objects.filter(run_id=run_id, kind=Event.Kind.RUN_STARTED)
            .order_by("-seq")
            .values_list("seq", flat=True)
            .first()
        )
        requeued: RunRequeuedPayload = {
            "run_id": run_id,
            "reason": reason,
            "superseded_after_seq": started_seq or 0,
        }
        event_append(
            session_id=session_id, kind=Event.Kind.RUN_REQUEUED, payload=requeued, run_id=run_id
        )
    return True


def runs_beat(*, run_ids: list[str]) -> None:
    """One heartbeat for every run a worker is executing."""
    Run.objects.filter(pk__in=run_ids, status=Run.Status.RUNNING).update(
        heartbeat_at=database_now()
    )


def runs_watch(*, run_ids: list[str]) -> set[str]:
    """A worker's look at its running runs in the database: one heartbeat for all of
    them, then which must stop (``runs_to_stop``)."""
    runs_beat(run_ids=run_ids)
    return runs_to_stop(run_ids=run_ids)


def runs_to_stop(*, run_ids: list[str]) -> set[str]:
    """Which of ``run_ids`` must stop: interrupted, ended elsewhere, or gone.

    A run that another process already ended (the reaper, after a stall) or
    whose session was deleted must not keep a turn going.
    """
    rows = Run.objects.filter(pk__in=run_ids).values_list("id", "status", "cancel_requested_at")
    live = {r for r, status, asked in rows if status == Run.Status.RUNNING and asked is None}
    return set(run_ids) - live


def _finish(
    *,
    run_id: str,
    status: str,
    sources: tuple[str, ...],
    usage: dict[str, Any] | None = None,
    error: ErrorPayload | None = None,
    first_token_at: datetime | None = None,
) -> bool:
    with transaction.atomic():
        run = _run_session_lock(run_id)
        if run is None:
            return False
        session, session_id = run.session, run.session_id
        fields: dict[str, Any] = {"status": status, "finished_at": timezone.now()}
        if usage is not None:
            fields["usage"] = usage
        if first_token_at is not None:
            # When the model first answered, kept by the turn: written with the run's end,
            # where the metrics count it, not by a statement of its own as it starts.
            fields["first_token_at"] = first_token_at
        if error is not None:
            fields["error"] = f"{error['code']}: {error['message']}"
        if Run.objects.filter(pk=run_id, status__in=sources).update(**fields) != 1:
            return False
        if error is not None:
            event_append(session_id=session_id, kind=Event.Kind.ERROR, payload=error, run_id=run_id)
        finished: RunFinishedPayload = {"run_id": run_id, "status": status}
        if error is not None:
            finished["error"] = error
        event_append(
            session_id=session_id, kind=Event.Kind.RUN_FINISHED, payload=finished, run_id=run_id
        )
        _after_run(session=session, ended_status=status)
    return True


def _after_run(*, session: AgentSession, ended_status: str) -> None:
    """Route what waited behind the run that just ended (inside its transaction, with
    the session locked)."""
    live = _live_runs(session.pk)
    if live.queued is not None:
        _enqueue_on_commit(live.queued.id)
        return
    if ended_status == Run.Status.CANCELLED:
        # Interrupted: whatever is still pending waits for the next trigger.
        state = AgentSession.State.RUNNING if live.running else AgentSession.State.IDLE
        _set_state(session, state)
        return
    _route_unqueued(session, running=live.running)


def run_complete(
    *, run_id: str, usage: dict[str, Any], first_token_at: datetime | None = None
) -> bool:
    return _finish(
        run_id=run_id,
        status=Run.Status.COMPLETED,
        sources=(Run.Status.RUNNING,),
        usage=usage,
        first_token_at=first_token_at,
    )


def run_fail(
    *,
    run_id: str,
    code: str,
    message: str,
    usage: dict[str, Any] | None = None,
    first_token_at: datetime | None = None,
) -> bool:
    """Any live run → failed, with an ``error`` event that says why."""
    return _finish(
        run_id=run_id,
        status=Run.Status.FAILED,
        sources=tuple(ACTIVE),
        usage=usage,
        error={"code": code, "message": message},
        first_token_at=first_token_at,
    )


def run_cancel(
    *,
    run_id: str,
    usage: dict[str, Any] | None = None,
    first_token_at: datetime | None = None,
) -> bool:
    """Any live run → cancelled. Its batch stays consumed; later events wait for the next run."""
    return _finish(
        run_id=run_id,
        status=Run.Status.CANCELLED,
        sources=tuple(ACTIVE),
        usage=usage,
        first_token_at=first_token_at,
    )


def run_request_cancel(*, run_id: str) -> str:
    """Interrupt a run; returns the state reached.

    A queued run is cancelled at once (``"cancelled"``). A running run is asked
    to stop (``"cancelling"``); its worker sees the request within a fraction
    of a second and ends it cancelled, keeping the text so far. A finished run
    is left alone and its real status returned.
    """
    now = timezone.now()
    if Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).exists() and run_cancel(
        run_id=run_id
    ):
        return Run.Status.CANCELLED
    if Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(cancel_requested_at=now):
        transaction.on_commit(lambda: _stop_signal(run_id))
        return "cancelling"
    status = get_or_none(Run.objects.filter(pk=run_id).values_list("status", flat=True))
    if status is None:
        raise Run.DoesNotExist(run_id)
    return "cancelling" if status == Run.Status.RUNNING else status


def _stop_signal(run_id: str) -> None:
    """Tell the worker running ``run_id`` now: its watcher reads the key every
    ``sessions.runtime.CANCEL_POLL_S``. The request is already in the database, which
    the worker reads at its next heartbeat, so Redis away only makes it later."""
    try:
        redis_connection().set(cancel_key(run_id), "1", ex=CANCEL_KEY_TTL_S)
    except Exception as exc:
        log.warning(
            "could not signal the stop of run %s (%s); its worker sees it at its next heartbeat",
            run_id,
            exc,
        )


def runs_reap() -> dict[str, int]:
    """Fail runs whose worker was lost; hand forgotten queued runs to RQ again.

    Run by the scheduler. A lost run ends failed with an error event, and its
    session's queued run (if any) is started, so a dead worker never wedges a
    session.
    """
    stale = Run.objects.filter(
        status=Run.Status.RUNNING, heartbeat_at__lt=database_now_plus(-RUN_STALE_AFTER_S)
    ).values_list("id", flat=True)
    failed = 0
    # A turn worker cut off from the database (a failover) still says so in Redis.
    for run_id in silent_among("run", stale):
        failed += run_fail(
            run_id=run_id,
            code="worker_lost",
            message="The worker running this turn stopped responding.",
        )
    requeued = 0
    # Judged on the database's clock, not the scheduler's host's (the web host that
    # queued the run wrote created_at; RQ is asked before anything is enqueued again).
    forgotten = Run.objects.filter(
        status=Run.Status.QUEUED, created_at__lt=database_now_plus(-RUN_REQUEUE_AFTER_S)
    ).values_list("id", "session_id")
    for run_id, session_id in list(forgotten):
        if Run.objects.filter(session_id=session_id, status=Run.Status.RUNNING).exists():
            continue
        if not _rq_knows(run_id):
            run_enqueue(run_id)
            requeued += 1
    return {"failed": failed, "requeued": requeued}


def _rq_knows(run_id: str) -> bool:
    try:
        job = RqJob.fetch(run_id, connection=redis_connection())
    except Exception:
        return False
    return job.get_status(refresh=True) in ("queued", "started", "scheduled", "deferred")
