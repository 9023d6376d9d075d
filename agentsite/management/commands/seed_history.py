"""``manage.py seed_history``: months of history in bulk, to measure what grows.

Sessions with their event logs and finished runs, and finished jobs with their
events, partial results, delivered webhooks (one in two) and dependencies (one
in five depends on the job before it), spread over the last ``--days`` days, owned by
``--user`` (created when missing). For benchmarks and capacity checks on a
scratch database, never on one whose data matters.
"""

from __future__ import annotations

import itertools
import random
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction
from django.db.models import DateTimeField, Model
from django.utils import timezone

from agentsite.core.ids import new_job_id, new_run_id, new_session_id
from jobs.models import Job, JobChunk, JobEvent, WebhookAttempt, WebhookDelivery
from sessions.models import AgentSession, Event, Run

BATCH = 5000
# What one seeded turn writes: the message, the turn's start and end, its answer.
TURN = [
    (Event.Kind.USER_MESSAGE, {"text": "How are the tests doing?"}),
    (Event.Kind.RUN_STARTED, {}),
    (Event.Kind.ASSISTANT_MESSAGE, {"text": "All 31 tests passed in the last run."}),
    (Event.Kind.RUN_FINISHED, {"status": "completed"}),
]


@contextmanager
def own_creation_times(model: type[Model]) -> Iterator[None]:
    """Let ``bulk_create`` keep the ``created_at`` given (``auto_now_add`` stamps "now")."""
    field = model._meta.get_field("created_at")
    assert isinstance(field, DateTimeField)
    field.auto_now_add = False
    try:
        yield
    finally:
        field.auto_now_add = True


def analyze() -> None:
    """Fresh planner statistics on PostgreSQL, as autovacuum gathers a while after a bulk load.

    Without them the planner takes the seeded tables for nearly empty ones.
    """
    if connection.vendor != "postgresql":
        return
    tables = [m._meta.db_table for m in (AgentSession, Event, Run, Job, JobChunk, JobEvent)]
    tables += [WebhookDelivery._meta.db_table, WebhookAttempt._meta.db_table]
    tables.append(Job.depends_on.through._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {', '.join(connection.ops.quote_name(t) for t in tables)}")


class Progress:
    """One line on stderr that says how far the seeding is."""

    def __init__(self, what: str, total: int) -> None:
        self.what, self.total, self.done, self.started = what, total, 0, time.monotonic()

    def add(self, n: int) -> None:
        self.done += n
        rate = self.done / max(time.monotonic() - self.started, 1e-6)
        sys.stderr.write(
            f"\r{self.what}: {self.done:,}/{self.total:,} "
            f"({100 * self.done / max(self.total, 1):.0f}%, {rate:,.0f}/s)"
        )
        if self.done >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


class Command(BaseCommand):
    help = "Seed N sessions of M events each and K finished jobs (scratch databases only)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sessions", type=int, default=100)
        parser.add_argument("--events-per-session", type=int, default=100)
        parser.add_argument("--jobs", type=int, default=10_000)
        parser.add_argument("--user", default="seed", help="Owner of what is seeded.")
        parser.add_argument("--days", type=int, default=90, help="How far back history goes.")
        parser.add_argument(
            "--seed", type=int, default=1, help="Random seed (same data each time)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        sessions, per_session, jobs = (
            options["sessions"],
            options["events_per_session"],
            options["jobs"],
        )
        if min(sessions, per_session, jobs) < 0:
            raise CommandError("--sessions, --events-per-session and --jobs must be ≥ 0.")
        rng = random.Random(options["seed"])
        User = get_user_model()
        user, _ = User.objects.get_or_create(**{User.USERNAME_FIELD: options["user"]})
        span = timedelta(days=max(options["days"], 1))
        now = timezone.now()
        self.seed_sessions(user, sessions, per_session, now, span, rng)
        self.seed_jobs(user, jobs, now, span, rng)
        analyze()

    def seed_sessions(
        self, user: Any, n: int, per_session: int, now: Any, span: timedelta, rng: random.Random
    ) -> None:
        progress = Progress("events", n * per_session)
        events: list[Event] = []
        for _ in range(n):
            at = now - span * rng.random()
            turns = max(per_session // len(TURN), 1)
            with transaction.atomic():
                session = AgentSession.objects.create(
                    id=new_session_id(), owner=user, title="seeded", last_seq=per_session
                )
                runs = Run.objects.bulk_create(
                    Run(
                        id=new_run_id(),
                        session=session,
                        owner=user,
                        status=Run.Status.COMPLETED,
                        started_at=at,
                        finished_at=at,
                    )
                    for _ in range(turns)
                )
            for seq in range(1, per_session + 1):
                kind, payload = TURN[(seq - 1) % len(TURN)]
                run = runs[min((seq - 1) // len(TURN), len(runs) - 1)]
                events.append(Event(session=session, seq=seq, kind=kind, payload=payload, run=run))
                if len(events) >= BATCH:
                    Event.objects.bulk_create(events)
                    progress.add(len(events))
                    events = []
        if events:
            Event.objects.bulk_create(events)
            progress.add(len(events))

    def seed_jobs(self, user: Any, n: int, now: Any, span: timedelta, rng: random.Random) -> None:
        progress = Progress("jobs", n)
        done = 0
        while done < n:
            size = min(BATCH, n - done)
            batch = []
            for _ in range(size):
                finished = now - span * rng.random()
                ok = rng.random() < 0.9
                batch.append(
                    Job(
                        id=new_job_id(),
                        owner=user,
                        tool="run_tests",
                        args={"path": "."},
                        status=Job.Status.DONE if ok else Job.Status.FAILED,
                        result={"summary": "31 passed"} if ok else None,
                        error_code="" if ok else "tool_error",
                        error_message="" if ok else "2 tests failed",
                        timeout_s=60,
                        partial_count=1,
                        enqueued_at=finished - timedelta(seconds=3),
                        created_at=finished - timedelta(seconds=3),
                        started_at=finished - timedelta(seconds=2),
                        finished_at=finished,
                    )
                )
            for before, job in itertools.pairwise(batch):
                if rng.random() < 0.2:
                    job.dependency_ids, before.has_dependents = [before.id], True
            with transaction.atomic(), own_creation_times(Job):
                Job.objects.bulk_create(batch)
                JobEvent.objects.bulk_create(
                    JobEvent(job=job, event=f"job.{job.status}", payload={}) for job in batch
                )
                JobChunk.objects.bulk_create(
                    JobChunk(job=job, index=0, item={"line": "31 passed"}) for job in batch
                )
                self.seed_webhooks(batch[::2])
                Job.depends_on.through.objects.bulk_create(
                    Job.depends_on.through(from_job_id=job.id, to_job_id=job.dependency_ids[0])
                    for job in batch
                    if job.dependency_ids
                )
            done += size
            progress.add(size)

    def seed_webhooks(self, jobs: list[Job]) -> None:
        """A delivered callback of each of ``jobs``, with its one attempt."""
        deliveries = WebhookDelivery.objects.bulk_create(
            WebhookDelivery(
                owner_id=job.owner_id,
                event_type=f"job.{job.status}",
                job=job,
                message_id=f"msg_{job.id}",
                url="https://hooks.example.com/agentsite",
                payload={"type": f"job.{job.status}"},
                status=WebhookDelivery.Status.DELIVERED,
                attempts=1,
            )
            for job in jobs
        )
        WebhookAttempt.objects.bulk_create(
            WebhookAttempt(delivery=d, number=1, status_code=200, duration_ms=12.0)
            for d in deliveries
        )
