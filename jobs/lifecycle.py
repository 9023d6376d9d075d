"""Every change of ``Job.status``, and nothing else does it.

``queued → running → done | failed | cancelled | timed_out``; a queued job may
also end directly (cancelled, or failed because a dependency did not succeed).
Each transition is a compare-and-set — ``filter(id=…, status__in=sources)
.update(...)`` — so when two processes race (the worker finishing, a user
cancelling, the scheduler noticing a lost worker) exactly one wins, and the
loser gets ``JobTransitionError``. A terminal status never changes again.

Each transition publishes exactly one event through ``job_publish``: a
``JobEvent`` row (and, through the ``jobs.hooks`` that sessions registers, a
session event when the job belongs to a session) in the same transaction,
then, once committed, a channel-layer message to the owner's group and — for
final states of jobs with a callback URL — a webhook delivery.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connections, transaction
from django.db.models.sql import UpdateQuery
from django.utils import timezone

from agentsite.core.clock import database_now, database_now_plus
from agentsite.core.queries import insert
from jobs import dispatch, hooks
from jobs.documents import FINAL_EVENT_OF, JobEventName, job_event_payload, job_status_doc
from jobs.groups import cancel_key
from jobs.live import job_update_send, redis_connection
from jobs.models import Job, JobChunk, JobEvent
from jobs.webhooks import webhook_delivery_create

log = logging.getLogger(__name__)

S = Job.Status
E = JobEventName
# A cancel signal outlives any job that could still be running.
CANCEL_KEY_TTL_S = 24 * 3600


class JobTransitionError(Exception):
    """The job was not in a state the transition may start from."""

    def __init__(self, job_id: str, target: str, current: str | None) -> None:
        super().__init__(f"job {job_id} cannot become {target} from {current or 'nowhere'}")
        self.job_id = job_id
        self.target = target
        self.current = current


def _compare_and_set(job_id: str, sources: Iterable[str], fields: dict[str, Any]) -> Job | None:
    """``UPDATE … WHERE id = job_id AND status IN sources``; the updated row, or None.

    PostgreSQL and SQLite 3.35+ return the row from the UPDATE itself
    (``RETURNING``), which saves reading it back on every transition. Every job
    goes through two of these and a worker does them back to back, so the
    statement is written out here, with the ORM's own conversion of each value
    (``get_db_prep_save``) and of each column read back (its converters).
    """
    sources = list(sources)
    connection = connections[Job.objects.db]
    if not _returns_from_update(connection):
        if Job.objects.filter(id=job_id, status__in=sources).update(**fields) != 1:
            return None
        return Job.objects.get(id=job_id)
    quote = connection.ops.quote_name
    returned = _returned_columns(connection)
    assignments: list[str] = []
    params: list[Any] = []
    for name, value in fields.items():
        field = returned.fields[name]
        if hasattr(value, "resolve_expression"):  # the database's clock, say
            sql, expression_params = _compiled(value, connection)
            assignments.append(f"{quote(str(field.column))} = {sql}")
            params.extend(expression_params)
            continue
        assignments.append(f"{quote(str(field.column))} = %s")
        params.append(field.get_db_prep_save(value, connection))
    sql = (
        f"UPDATE {quote(Job._meta.db_table)} SET {', '.join(assignments)}"
        f" WHERE {quote('id')} = %s AND {quote('status')} IN ({', '.join(['%s'] * len(sources))})"
        f" RETURNING {returned.columns}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, job_id, *sources])
        row = cursor.fetchone()
    return None if row is None else returned.job(connection, row)


def _compiled(expression: Any, connection: Any) -> tuple[str, Sequence[Any]]:
    """An expression as the SQL of an UPDATE's SET, the way ``QuerySet.update`` compiles it."""
    query = UpdateQuery(Job)
    resolved = expression.resolve_expression(query, allow_joins=False, for_save=True)
    sql, params = query.get_compiler(connection=connection).compile(resolved)
    return sql, params


class _Returned:
    """Every column of a job, as an UPDATE's RETURNING lists them and as a model reads them."""

    def __init__(self, connection: Any) -> None:
        concrete = Job._meta.concrete_fields
        self.fields = {f.name: f for f in concrete} | {f.attname: f for f in concrete}
        self.columns = ", ".join(connection.ops.quote_name(f.column) for f in concrete)
        self.attnames = [f.attname for f in concrete]
        self.converters = []
        for i, f in enumerate(concrete):
            column = f.get_col(Job._meta.db_table)
            converters = connection.ops.get_db_converters(column) + f.get_db_converters(connection)
            if converters:
                self.converters.append((i, column, converters))

    def job(self, connection: Any, row: Sequence[Any]) -> Job:
        values = list(row)
        for i, column, converters in self.converters:
            for convert in converters:
                values[i] = convert(values[i], column, connection)
        return Job.from_db(connection.alias, self.attnames, values)


_RETURNED: dict[str, _Returned] = {}


def _returned_columns(connection: Any) -> _Returned:
    returned = _RETURNED.get(connection.alias)
    if returned is None:
        returned = _RETURNED[connection.alias] = _Returned(connection)
    return returned


def _returns_from_update(connection: Any) -> bool:
    if connection.vendor == "postgresql":
        return True
    return connection.vendor == "sqlite" and sqlite3.sqlite_version_info >= (3, 35)


def _transition(
    job_id: str,
    *,
    sources: Iterable[str],
    target: str,
    event: JobEventName,
    slots: int | None = None,
    **fields: Any,
) -> Job:
    with transaction.atomic():
        job = _compare_and_set(job_id, sources, {"status": target, **fields})
        if job is None:
            current = Job.objects.filter(id=job_id).values_list("status", flat=True).first()
            raise JobTransitionError(job_id, target, current)
        job_publish(job, event)
        if job.is_terminal and job.has_dependents:
            # In the same transaction: a final state and its consequences commit together.
            dependents_release(job_id=job_id, status=str(job.status))
        if job.is_terminal and job.enqueued_at is not None:
            # It held a slot: the next held job takes it, committed with this end.
            dispatch.jobs_dispatch_freed(slots)
    return job


def _finish(
    job_id: str,
    *,
    sources: Iterable[str],
    target: str,
    code: str = "",
    message: str = "",
    slots_read: bool = True,
    **kw: Any,
) -> Job:
    """A final state. ``slots_read``: read the slot count for the dispatch of the slot
    the job frees before the transaction begins, so that no Redis round trip happens
    while it holds the write lock (False for jobs that never held a slot)."""
    return _transition(
        job_id,
        sources=sources,
        target=target,
        event=FINAL_EVENT_OF[target],
        slots=dispatch.slots_total_or_none() if slots_read else None,
        finished_at=timezone.now(),
        error_code=code,
        error_message=message[:5000],
        **kw,
    )


def job_queue(*, depends_on: Sequence[str] = (), **fields: Any) -> Job:
    """Create a job ``queued`` inside the caller's transaction and publish ``job_queued``.

    Without dependencies it is ready at once: held in the database until
    ``jobs.dispatch`` hands it to the tool workers, which it is asked to do when
    the transaction commits. With them it waits until they are all done — or
    fails at once if one already ended otherwise.
    """
    ready = not depends_on and not fields.get("gate")
    job = Job(
        status=S.QUEUED,
        ready_at=timezone.now() if ready else None,
        dependency_ids=sorted(depends_on),
        **fields,
    )
    insert(job)
    job_publish(job, E.QUEUED)
    if ready:
        transaction.on_commit(dispatch.jobs_dispatch_after_commit)
        return job
    if depends_on:
        link = Job.depends_on.through
        link.objects.bulk_create([link(from_job_id=job.id, to_job_id=dep) for dep in depends_on])
        # Before reading their states: on PostgreSQL this waits for a dependency that is
        # ending right now, whose end then finds this job among its dependents.
        Job.objects.filter(id__in=depends_on).update(has_dependents=True)
    job_release_if_ready(job_id=job.id)
    job.refresh_from_db()
    return job


def job_ungate(*, job_id: str, gate: str, args: dict[str, Any] | None = None) -> Job:
    """Open the gate ``gate`` of a queued job (its approval was given), with ``args`` if
    they were edited; it is then ready as soon as its dependencies are done.

    Raises ``JobTransitionError`` when the job is no longer queued behind that gate
    (cancelled meanwhile, say).
    """
    fields: dict[str, Any] = {"gate": ""}
    if args is not None:
        fields["args"] = args
    with transaction.atomic():
        if Job.objects.filter(id=job_id, status=S.QUEUED, gate=gate).update(**fields) != 1:
            current = Job.objects.filter(id=job_id).values_list("status", flat=True).first()
            raise JobTransitionError(job_id, "ungated", current)
        job_release_if_ready(job_id=job_id)
        return Job.objects.get(id=job_id)


def job_start(*, job_id: str, worker_name: str = "", timeout_s: float | None = None) -> Job:
    """Running, with its start, first heartbeat and deadline on the database's clock
    (``agentsite.core.clock``: the scheduler on another host judges them by it)."""
    if timeout_s is None:
        timeout_s = Job.objects.filter(id=job_id).values_list("timeout_s", flat=True).first()
    return _transition(
        job_id,
        sources=[S.QUEUED],
        target=S.RUNNING,
        event=E.STARTED,
        started_at=database_now(),
        heartbeat_at=database_now(),
        deadline=database_now_plus(timeout_s or 0),
        worker_name=worker_name[:200],
    )


def job_return_unstarted(*, job_id: str) -> Job:
    """A started job whose tool never ran (its horse failed before it): queued again.

    Its ``enqueued_at`` is cleared: it is held again and gives its slot back, to
    be handed over by the dispatch after this commits (or the sweep's).
    """
    job = _transition(
        job_id,
        sources=[S.RUNNING],
        target=S.QUEUED,
        event=E.QUEUED,
        started_at=None,
        heartbeat_at=None,
        deadline=None,
        worker_name="",
        enqueued_at=None,
    )
    transaction.on_commit(dispatch.jobs_dispatch_after_commit)
    return job


def job_progress(*, job_id: str, fraction: float | None, message: str = "") -> Job:
    """Record progress of a running job (the runner throttles how often)."""
    if fraction is not None:
        fraction = min(1.0, max(0.0, float(fraction)))
    return _transition(
        job_id,
        sources=[S.RUNNING],
        target=S.RUNNING,
        event=E.PROGRESS,
        progress_fraction=fraction,
        progress_message=message[:300],
    )


def job_partial(*, job_id: str, index: int, item: Any) -> JobChunk:
    """Append partial result ``index`` of a running job.

    Nothing is published: readers page through the rows (``/result?cursor=``),
    prompted by the ``partial_count`` of the job's next progress event.
    """
    with transaction.atomic():
        grown = Job.objects.filter(id=job_id, status=S.RUNNING).update(partial_count=index + 1)
        if grown != 1:
            current = Job.objects.filter(id=job_id).values_list("status", flat=True).first()
            raise JobTransitionError(job_id, "partial", current)
        chunk = JobChunk.objects.create(job_id=job_id, index=index, item=item)
    return chunk


def job_succeed(*, job_id: str, result: Any) -> Job:
    return _finish(job_id, sources=[S.RUNNING], target=S.DONE, result=result, progress_fraction=1.0)


def job_fail(*, job_id: str, code: str, message: str) -> Job:
    return _finish(
        job_id, sources=[S.QUEUED, S.RUNNING], target=S.FAILED, code=code, message=message
    )


def _fail_waiting(*, job_id: str, code: str, message: str) -> Job:
    """Fail a job waiting on its dependencies, inside the transaction that decided it.

    It never held a slot, so there is no slot count to read (and no Redis round trip
    in the middle of that transaction).
    """
    return _finish(
        job_id, sources=[S.QUEUED], target=S.FAILED, code=code, message=message, slots_read=False
    )


def job_cancel(
    *, job_id: str, message: str = "Cancelled on request.", code: str = "cancelled"
) -> Job:
    return _finish(
        job_id, sources=[S.QUEUED, S.RUNNING], target=S.CANCELLED, code=code, message=message
    )


def job_time_out(*, job_id: str, message: str = "") -> Job:
    return _finish(
        job_id,
        sources=[S.RUNNING],
        target=S.TIMED_OUT,
        code="deadline_exceeded",
        message=message or "The job ran past its deadline and was stopped.",
    )


def job_heartbeat(*, job_id: str) -> bool:
    """Mark a running job alive; False once it is no longer running."""
    running = Job.objects.filter(id=job_id, status=S.RUNNING)
    return running.update(heartbeat_at=database_now()) == 1


def job_request_cancel(*, job_id: str) -> str:
    """Ask a job to stop and return the state reached.

    A queued job is cancelled at once and never starts. A running job gets the
    cancel signal (its tool sees ``ctx.cancelled`` within a second) and the
    answer is ``"cancelling"``; the runner records what really happens. A job
    that is already final keeps its status, which is what is returned — never
    "cancelled" for a job that completed.
    """
    while True:
        status = Job.objects.filter(id=job_id).values_list("status", flat=True).first()
        if status is None:
            raise Job.DoesNotExist(job_id)
        if status in Job.TERMINAL:
            return str(status)
        if status == S.QUEUED:
            try:
                job_cancel(job_id=job_id, message="Cancelled before it started.")
            except JobTransitionError:
                continue  # it started (or ended) meanwhile: look again
            dispatch.rq_forget(job_id)
            return str(S.CANCELLED)
        Job.objects.filter(id=job_id, status=S.RUNNING, cancel_requested_at__isnull=True).update(
            cancel_requested_at=database_now()  # judged by the scheduler on its clock
        )
        redis_connection().set(cancel_key(job_id), "1", ex=CANCEL_KEY_TTL_S)
        status = Job.objects.filter(id=job_id).values_list("status", flat=True).first()
        return "cancelling" if status == S.RUNNING else str(status)


def dependents_release(*, job_id: str, status: str) -> None:
    """After ``job_id`` ended ``status``: fail its dependents, or start the ready ones."""
    waiting = Job.objects.filter(
        depends_on__id=job_id, status=S.QUEUED, ready_at__isnull=True
    ).values_list("id", flat=True)
    for dependent in waiting:
        if status != S.DONE:
            try:
                _fail_waiting(
                    job_id=dependent,
                    code="dependency_failed",
                    message=f"dependency {job_id} ended {status}",
                )
            except JobTransitionError:
                pass
        else:
            job_release_if_ready(job_id=dependent)


def job_release_if_ready(*, job_id: str) -> str:
    """Make a waiting job whose dependencies are all done ready; fail it if one did not succeed.

    A ready job is held for ``jobs.dispatch``, asked to hand it over on commit.
    Returns ``"released"``, ``"waiting"``, ``"failed"`` or ``"ignored"``.
    """
    with transaction.atomic():
        job = Job.objects.filter(id=job_id, status=S.QUEUED, ready_at__isnull=True).first()
        if job is None:
            return "ignored"
        if job.gate:
            return "waiting"
        deps = list(job.depends_on.values_list("id", "status"))
        broken = [(dep_id, st) for dep_id, st in deps if st in Job.TERMINAL and st != S.DONE]
        if broken:
            dep_id, st = broken[0]
            try:
                _fail_waiting(
                    job_id=job_id,
                    code="dependency_failed",
                    message=f"dependency {dep_id} ended {st}",
                )
            except JobTransitionError:
                return "ignored"
            return "failed"
        if any(st != S.DONE for _, st in deps):
            return "waiting"
        released = Job.objects.filter(
            id=job_id, status=S.QUEUED, ready_at__isnull=True, gate=""
        ).update(ready_at=timezone.now())
        if released != 1:
            return "ignored"
        transaction.on_commit(dispatch.jobs_dispatch_after_commit)
        return "released"


# --- publishing --------------------------------------------------------------------


def job_publish(job: Job, event: JobEventName) -> None:
    """Publish one transition: event rows now, live message and webhook after commit.

    Called inside the transition's transaction. The session's event (the
    ``session_event`` hook) is written in a savepoint of it: it commits with the
    job's state, and a session that cannot take it never costs the job its state.
    """
    payload = job_event_payload(job, event)
    insert(JobEvent(job=job, event=event, payload=payload))
    if job.session_id:
        try:
            with transaction.atomic():
                hooks.session_event_record(session_id=job.session_id, payload=payload)
        except Exception:
            log.exception("could not add %s of %s to session %s", event, job.id, job.session_id)
    doc, owner_id = job_status_doc(job), job.owner_id
    transaction.on_commit(lambda: job_update_send(owner_id=owner_id, job=doc, event=event))
    if job.is_terminal and job.callback_url:
        webhook_delivery_create(job=job, event=event)
