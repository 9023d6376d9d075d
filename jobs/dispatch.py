"""Which queued jobs are handed to RQ, and when: the tool workers shared fairly among owners.

A ready job (no dependency left to wait for: ``ready_at`` set) is *held* in the
database until a slot is free, then *handed over* (``enqueued_at`` set, enqueued
on ``tools`` once that commits). There are as many slots as tool workers
(``AGENTSITE_JOB_SLOTS``, or the workers Redis lists on ``tools``), and a slot
is taken by every handed-over job until it ends. So the RQ queue holds about
as many jobs as there are workers to take them.

Whose job takes a free slot: among the owners with held jobs, the one with the
fewest jobs in flight; among those, the one served longest ago (never served
first), "served" being the owner's latest hand-over (``MAX(enqueued_at)`` of its
jobs); then that owner's oldest held job. The second rule is what makes the share
fair with one worker: when the job of an owner with a backlog ends, that owner
and one who waits both have no job in flight, and the one just served must not
win the tie. Owners who wait thus take turns, one job each, and a user's first
job waits for one of the running jobs to end, however many jobs other users have
queued, on any number of workers. The order is read from the jobs themselves, so
it needs no state of its own, survives restarts and is the same for every
process that dispatches. Reading it goes once through the held jobs, as picking
the oldest did, plus a lookup per waiting owner for its last hand-over
(``job_served_idx``); the chosen owner's oldest job is one more
(``job_held_owner_idx``).

``jobs_dispatch`` fills the free slots. It runs after every commit that may hold
a job or free a slot (``jobs.lifecycle`` calls it on commit) and at every sweep
(``jobs.tasks``), which also finds what a crash or Redis lost. The end of a job
that held a slot hands the slot over inside its own transaction instead
(``jobs_dispatch_freed``): one transaction per job end, not two. Dispatches are
serialized (an advisory lock on PostgreSQL; on SQLite every transaction is
``BEGIN IMMEDIATE``), so two workers finishing at once never count the same
free slot nor read the same turn order; the hand-over itself is a compare-and-set
on ``enqueued_at``, so a job cancelled meanwhile is never handed over. Nothing
here changes ``Job.status``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any, cast

import django_rq
from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.db.models import QuerySet
from redis.exceptions import RedisError
from rq import Queue, worker_registration
from rq.exceptions import NoSuchJobError
from rq.job import Job as RqJob
from rq.job import JobStatus

from agentsite.core.clock import database_now
from jobs.live import redis_connection
from jobs.models import Job

log = logging.getLogger(__name__)

S = Job.Status
# The dispatch's advisory lock on PostgreSQL, named as accounts.quotas names its own.
LOCK_NAME = "jobs:dispatch"


def in_flight() -> QuerySet[Job]:
    """Jobs that hold a slot: handed to RQ and not ended (waiting in RQ, or running)."""
    return Job.objects.filter(status__in=[S.QUEUED, S.RUNNING], enqueued_at__isnull=False)


def held() -> QuerySet[Job]:
    """Ready jobs waiting in the database for a slot, oldest first."""
    return Job.objects.filter(
        status=S.QUEUED, enqueued_at__isnull=True, ready_at__isnull=False
    ).order_by("ready_at", "id")


def slots_total() -> int:
    """How many jobs may be in flight at once: one per tool worker."""
    if settings.AGENTSITE_JOB_SLOTS > 0:
        return int(settings.AGENTSITE_JOB_SLOTS)
    # At least one, so a job handed over before any worker registered starts with the first.
    return max(1, tool_workers_alive())


def tool_workers_alive() -> int:
    """The workers Redis lists on ``tools`` whose own key is still there.

    A worker killed without a word stays in RQ's list until some worker cleans it;
    its key expires with its heartbeat, as ``Worker.all`` sees it.
    """
    connection = redis_connection()
    queue = django_rq.get_queue("tools", connection=connection)
    keys = worker_registration.get_keys(queue=queue)
    if not keys:
        return 0
    with connection.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.exists(key)
        return sum(int(n) for n in pipe.execute())


def jobs_dispatch() -> int:
    """Hand held jobs to RQ while slots are free, fairly among owners; how many were handed.

    Call it outside any transaction (after a commit): the RQ enqueues follow its own.
    """
    if not _any_held():
        # Nothing to hand over: no lock to take, and no look at Redis for the tool workers.
        # A job held after this look asks for a dispatch of its own when it commits.
        return 0
    slots = slots_total()
    if _in_flight_count() >= slots:
        return 0  # no slot free: a slot freed after this look is handed over by its job's end
    with transaction.atomic():
        _dispatch_lock()
        return _slots_fill(slots)


def jobs_dispatch_freed(slots: int | None) -> None:
    """Inside the transaction that ends a job which held a slot: hand that slot over.

    The next held job is handed over in the same transaction as the end (and
    enqueued once it commits), which saves the worker a transaction of its own,
    its wait for the write lock and its look for free slots. ``slots`` is the
    slot count read before the transaction began (no Redis round trip while it
    holds locks); None (Redis was away) leaves the dispatch to after the commit.
    A dispatch that fails rolls back alone: the job's end commits, and the slot is
    handed over after the commit (or by the sweep).
    """
    if slots is None:
        transaction.on_commit(jobs_dispatch_after_commit)
        return
    try:
        with transaction.atomic():
            if _any_held():
                _dispatch_lock()
                _slots_fill(slots)
    except DatabaseError as exc:
        log.warning("dispatch left to after the commit: %r", exc)
        transaction.on_commit(jobs_dispatch_after_commit)


# How long a job's end trusts the slot count the last end in this process read. A
# worker ends jobs back to back, and the count costs three Redis round trips; a
# worker that came or went meanwhile is seen by the next dispatch after that (each
# POST and each sweep reads the count afresh).
SLOTS_COUNT_FRESH_S = 1.0
_slots_read: tuple[float, int] | None = None


def slots_total_or_none() -> int | None:
    """``slots_total`` as a job's end reads it (kept ``SLOTS_COUNT_FRESH_S``), or None
    while Redis does not answer."""
    global _slots_read
    counted = settings.AGENTSITE_JOB_SLOTS <= 0
    now = time.monotonic()
    if counted and _slots_read is not None and now - _slots_read[0] < SLOTS_COUNT_FRESH_S:
        return _slots_read[1]
    try:
        slots = slots_total()
    except RedisError:
        return None
    if counted:
        _slots_read = (now, slots)
    return slots


def _slots_fill(slots: int) -> int:
    """Under the dispatch lock: hand held jobs over while fewer than ``slots`` are in flight."""
    load = _in_flight_per_owner()
    free = slots - sum(load.values())
    if free <= 0:
        return 0
    turns = _owners_waiting()
    handed = 0
    while free > 0 and turns:
        # The fewest jobs in flight first; among equals, the first in turn order.
        turn = min(range(len(turns)), key=lambda i: (load[turns[i]], i))
        owner_id = turns.pop(turn)
        job = _first_held(owner_id)
        if job is None:
            continue  # its held jobs were cancelled meanwhile
        if job_hand_over(job_id=job[0], timeout_s=job[2]):
            handed += 1
            load[owner_id] += 1
            free -= 1
            turns.append(owner_id)  # served just now: last in turn order
        else:
            turns.insert(turn, owner_id)  # cancelled meanwhile: its next job keeps the turn
    return handed


def jobs_dispatch_after_commit() -> None:
    """``jobs_dispatch`` as an on-commit step: a failure leaves the jobs held for the sweep.

    The commit it follows (a job accepted, a job ended) has happened; neither Redis
    nor the database being away just then may undo it or fail the caller.
    """
    try:
        jobs_dispatch()
    except (RedisError, DatabaseError) as exc:
        log.warning("dispatch left to the sweep: %r", exc)


def _dispatch_lock() -> None:
    connection = connections[Job.objects.db]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [LOCK_NAME])


HeldJob = tuple[str, int, float]  # id, owner_id, timeout_s


# The dispatch runs at every job's end, inside that end's transaction, so its few
# statements are written out once rather than built by the ORM each time (which
# costs several times what the database spends on them). They say what ``held()``
# and ``in_flight()`` say, in the terms of the partial indexes made for them
# (``job_held_idx``, ``job_held_owner_idx``, ``job_in_flight_idx``).
_JOB = Job._meta.db_table
_HELD = "status = 'queued' AND enqueued_at IS NULL AND ready_at IS NOT NULL"
_IN_FLIGHT = "status IN ('queued', 'running') AND enqueued_at IS NOT NULL"


def _rows(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connections[Job.objects.db].cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def _any_held() -> bool:
    return bool(_rows(f"SELECT 1 FROM {_JOB} WHERE {_HELD} LIMIT 1", []))


def _in_flight_count() -> int:
    return int(_rows(f"SELECT COUNT(*) FROM {_JOB} WHERE {_IN_FLIGHT}", [])[0][0])


def _in_flight_per_owner() -> Counter[int]:
    sql = f"SELECT owner_id, COUNT(*) FROM {_JOB} WHERE {_IN_FLIGHT} GROUP BY owner_id"
    return Counter({owner: n for owner, n in _rows(sql, [])})


def _owners_waiting() -> list[int]:
    """The owners with held jobs, in turn order: the one served longest ago first
    (never served before all), then the one whose oldest held job is older."""
    return [owner for (owner,) in _rows(_OWNERS_WAITING, [])]


# An owner's last hand-over is one lookup in ``job_served_idx``.
_OWNERS_WAITING = f"""
    SELECT owner_id FROM {_JOB} waiting WHERE {_HELD} GROUP BY owner_id
    ORDER BY (
        SELECT MAX(enqueued_at) FROM {_JOB}
        WHERE owner_id = waiting.owner_id AND enqueued_at IS NOT NULL
    ) NULLS FIRST, MIN(ready_at), owner_id
"""


def _first_held(owner_id: int) -> HeldJob | None:
    """The oldest held job of one owner."""
    sql = (
        f"SELECT id, owner_id, timeout_s FROM {_JOB} WHERE {_HELD} AND owner_id = %s"
        " ORDER BY ready_at, id LIMIT 1"
    )
    rows = _rows(sql, [owner_id])
    return cast(HeldJob, rows[0]) if rows else None


_NOW_SQL: dict[str, str] = {}


def _database_now_sql(connection: Any) -> str:
    """The database's time (``agentsite.core.clock``) as SQL of ``connection``'s dialect,
    compiled once per vendor."""
    sql = _NOW_SQL.get(connection.vendor)
    if sql is None:
        compiler = Job.objects.none().query.get_compiler(connection=connection)
        sql = _NOW_SQL[connection.vendor] = str(compiler.compile(database_now())[0])
    return sql


def job_hand_over(*, job_id: str, timeout_s: float) -> bool:
    """Mark a held job handed over and enqueue it once this commits; False if it is not held.

    The hand-over is stamped with the database's time, whichever host hands it over:
    owners take turns by it, and the sweep judges by it whether RQ lost the job.
    """
    connection = connections[Job.objects.db]
    now = _database_now_sql(connection)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {_JOB} SET enqueued_at = {now} WHERE id = %s AND {_HELD}", [job_id])
        if cursor.rowcount != 1:
            return False
    transaction.on_commit(lambda: rq_enqueue_or_leave(job_id, timeout_s))
    return True


def rq_enqueue_or_leave(job_id: str, timeout_s: float) -> None:
    """Enqueue after the commit; with Redis away the job is held again in the database.

    Its ``enqueued_at`` is cleared (it was not handed over), so the sweep hands it
    to RQ at its first pass once Redis answers: accepting a job never depends on
    Redis being up.
    """
    try:
        rq_enqueue(job_id, timeout_s)
    except RedisError as exc:
        log.warning("job %s kept queued: RQ unreachable (%r); the sweep hands it over", job_id, exc)
        job_handover_lost(job_id=job_id)


def job_handover_lost(*, job_id: str) -> None:
    """A queued job RQ never got (or lost before a worker started it): held again.

    It gives its slot back; the next dispatch (the sweep's, at the latest) hands it over.
    """
    Job.objects.filter(id=job_id, status=S.QUEUED).update(enqueued_at=None)


def rq_enqueue(job_id: str, timeout_s: float, queue: Queue | None = None) -> None:
    """Enqueue ``run_job`` for the job on ``tools`` (or ``queue``)."""
    if queue is None:
        # "auto": enqueue now. Callers already run this after their transaction commits.
        queue = django_rq.get_queue("tools", connection=redis_connection(), commit_mode="auto")
    # RQ's own timeout is only the last resort, after the runner's deadline and grace.
    hard_timeout = int(timeout_s + 2 * settings.AGENTSITE_JOB_STOP_GRACE_S + 60)
    queue.enqueue(
        "jobs.runner.run_job",
        job_id,
        job_id=job_id,
        job_timeout=hard_timeout,
        result_ttl=300,
        failure_ttl=24 * 3600,
        meta={"timeout_s": timeout_s},  # the worker starts the job without reading it back
    )


def rq_will_run(job_id: str) -> bool:
    """Whether RQ still runs a job handed to it: it waits in ``tools``, or a worker started it.

    Not when Redis forgot it (flushed); nor when it is ``queued`` in no queue: a worker
    took it off (RQ's dequeue is a pop) and died before starting it, or RQ gave up on it.
    """
    connection = redis_connection()
    try:
        status = RqJob.fetch(job_id, connection=connection).get_status(refresh=False)
    except NoSuchJobError:
        return False
    if status == JobStatus.QUEUED:
        queue = django_rq.get_queue("tools", connection=connection)
        return queue.get_job_position(job_id) is not None
    return status in (JobStatus.STARTED, JobStatus.FINISHED)


def rq_forget(job_id: str) -> None:
    """Take a job that will never run out of RQ (best effort: a worker refuses it anyway)."""
    try:
        django_rq.get_queue("tools", connection=redis_connection()).remove(job_id)
        RqJob.fetch(job_id, connection=redis_connection()).cancel()
    except Exception:
        log.debug("RQ job %s not removed", job_id, exc_info=True)
