"""The reads and housekeeping that must not slow down as history grows use their indexes.

On PostgreSQL, over a seeded history (``manage.py seed_history``, then ANALYZE),
every statement behind each operation is EXPLAINed: none reads a big table
from end to end (a Seq Scan), and the statement that matters scans the index
meant for it. SQLite's planner is not the one deployments run on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.sites import site
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.db.models import QuerySet
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agentsite.core.batches import Budget
from agentsite.core.ids import new_session_id
from jobs import api as jobs_api
from jobs import retention, services
from jobs.admin import CappedCountPaginator
from jobs.models import Job, JobChunk, JobEvent, WebhookAttempt, WebhookDelivery
from jobs.tasks import jobs_sweep
from sessions.models import AgentSession, Event, Run
from sessions.retention import sessions_purge
from sessions.runs import runs_reap
from sessions.streams import events_after
from sessions.tokens import session_token
from tests.conftest import api_client_for

pytestmark = [
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="EXPLAIN plans are PostgreSQL's; SQLite's planner is not the one deployed",
    ),
    pytest.mark.django_db,
]

# A table with at least this many rows after seeding is big: no Seq Scan on it.
BIG = 1000
STATEMENT = re.compile(r"^\s*(SELECT|UPDATE|DELETE|WITH)\b", re.IGNORECASE)


@pytest.fixture
def history() -> Iterator[Any]:
    """Thousands of events, jobs (with webhooks and dependencies) and sessions, some deleted."""
    call_command("seed_history", sessions=4, events_per_session=1000, jobs=4000, seed=7)
    owner = get_user_model().objects.get(username="seed")
    long_ago = timezone.now() - timedelta(days=60)
    AgentSession.objects.bulk_create(
        AgentSession(id=new_session_id(), owner=owner, deleted_at=long_ago if i % 10 else None)
        for i in range(3000)
    )
    # A session's events posted as webhooks, of no job: one in ten past retention.
    WebhookDelivery.objects.bulk_create(
        WebhookDelivery(
            owner=owner,
            event_type="approval.requested",
            message_id=f"msg_event_{i}",
            url="https://hooks.example.com/agentsite",
            payload={"type": "approval.requested"},
            status=WebhookDelivery.Status.DELIVERED,
            attempts=1,
        )
        for i in range(2000)
    )
    old = WebhookDelivery.objects.filter(job__isnull=True).values_list("pk", flat=True)[:200]
    WebhookDelivery.objects.filter(pk__in=list(old)).update(created_at=long_ago)
    # The last day's jobs still hold their Idempotency-Keys.
    recent = Job.objects.order_by("-created_at").values_list("pk", flat=True)[:1000]
    for n, pk in enumerate(recent):
        Job.objects.filter(pk=pk).update(
            idempotency_key=f"key-{n}", idempotency_expires_at=timezone.now() + timedelta(hours=1)
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    yield owner


def big_tables() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'r' AND reltuples >= %s", [BIG]
        )
        big = {row[0] for row in cursor.fetchall()}
    seeded = (Job, JobChunk, JobEvent, WebhookDelivery, WebhookAttempt, AgentSession, Event, Run)
    assert {m._meta.db_table for m in seeded} <= big, big
    return big


def plans(action: Callable[[], Any]) -> list[tuple[str, str]]:
    """(statement, its plan) for every query ``action`` runs."""
    with CaptureQueriesContext(connection) as captured:
        action()
    statements = [q["sql"] for q in captured.captured_queries if STATEMENT.match(q["sql"])]
    assert statements, "the action ran no query"
    out = []
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(f"EXPLAIN {sql}")
            out.append((sql, "\n".join(row[0] for row in cursor.fetchall())))
    return out


def assert_indexed(found: list[tuple[str, str]], index: str) -> None:
    """No Seq Scan on a big table in any plan, and some plan scans ``index`` (a pattern)."""
    big = big_tables()
    for sql, plan in found:
        seq = [t for t in re.findall(r"Seq Scan on (\w+)", plan) if t in big]
        assert not seq, f"Seq Scan on {seq} in\n{sql[:400]}\n{plan[:2000]}"
    scans = (
        rf"(Index Scan|Index Only Scan|Index Scan Backward|Bitmap Index Scan) (using|on) {index} "
    )
    assert any(re.search(scans, p) for _, p in found), f"no index scan using {index}:\n" + (
        "\n\n".join(p[:1000] for _, p in found)
    )


def page(rows: QuerySet[Any], size: int) -> list[Any]:
    return list(rows[:size])


def test_a_resume_reads_the_log_after_its_token_by_the_session_seq_index(history: Any) -> None:
    session = AgentSession.objects.filter(deleted_at__isnull=True, last_seq__gt=0).latest(
        "created_at"
    )
    after = session.last_seq - 4
    read = events_after.__wrapped__  # type: ignore[attr-defined]  # the stream's read, in this thread
    found = plans(
        lambda: read(session_id=session.id, after=after, upto=None, run_id=None, limit=500)
    )
    assert_indexed(found, "event_session_seq_unique")
    token = session_token(session_id=session.id, owner_id=history.pk, seq=after)
    api = api_client_for(history)
    found = plans(lambda: api.get(f"/api/sessions/{session.id}/events", {"after": token}))
    assert_indexed(found, "event_session_seq_unique")


def test_the_job_list_page_reads_the_owners_newest_jobs_by_index(history: Any) -> None:
    found = plans(lambda: page(services.job_list(owner=history), 50))
    assert_indexed(found, "job_owner_created_idx")


# The indexes that find jobs by status, or by tool, without reading others.
STATUS_INDEXES = r"(job_owner_status_idx|job_status_created_idx|jobs_job_status_\w+)"
TOOL_INDEXES = "(job_owner_tool_idx|job_tool_created_idx)"


@pytest.mark.parametrize(
    ("query", "index"),
    [
        ("", "job_owner_created_idx"),
        ("offset=100&limit=20", "job_owner_created_idx"),
        # A status and a tool that none of the seeded jobs have: any index on them
        # finds none at once (rather than reading every job of the owner, or every job).
        ("status=timed_out", STATUS_INDEXES),
        ("tool=sleepy", TOOL_INDEXES),
        ("status=failed&tool=sleepy", f"({STATUS_INDEXES}|{TOOL_INDEXES})"),
        # One in ten has this status: the page and the count read them in order.
        ("status=failed", "job_owner_status_idx"),
        ("session_id={session}", "job_session_created_idx"),
    ],
)
def test_the_job_list_api_pages_and_counts_by_index(
    history: Any, query: str, index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Counted 100 past the page: over a few thousand jobs, the share of the owner's
    # jobs that 1000 past the page are of a history of a million.
    monkeypatch.setattr(jobs_api, "COUNT_AHEAD", 100)
    session = AgentSession.objects.filter(owner=history).latest("created_at")
    api = api_client_for(history)

    def listed() -> None:
        response = api.get(f"/api/jobs?{query.format(session=session.id)}")
        assert response.status_code == 200, response.content

    found = plans(listed)
    assert_indexed(found, index)
    # The count too: it reads no further than the page's index, past the page.
    counts = [(sql, plan) for sql, plan in found if sql.startswith("SELECT COUNT(*)")]
    assert counts, found
    assert_indexed(counts, index)


def test_the_admin_job_list_reads_the_newest_jobs_by_index(history: Any) -> None:
    admin_user = get_user_model().objects.create_superuser("plans-admin", password="x")
    request = RequestFactory().get("/admin/jobs/job/")
    request.user = admin_user
    changelist = site._registry[Job].get_changelist_instance(request)
    found = plans(lambda: page(changelist.get_queryset(request), changelist.list_per_page))
    assert_indexed(found, "job_created_idx")


def test_the_whole_admin_job_list_pages_by_index_and_counts_its_cap_alone(
    history: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(CappedCountPaginator, "CAP", 300)
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("plans-admin", password="x"))
    found = [
        (sql, p) for sql, p in plans(lambda: staff.get("/admin/jobs/job/")) if "jobs_job" in sql
    ]
    pages = [(sql, plan) for sql, plan in found if not sql.startswith("SELECT COUNT(*)")]
    assert_indexed(pages, "job_created_idx")
    # Any CAP rows: a scan that stops at the cap, filters nothing, sorts nothing.
    [(sql, plan)] = [(sql, plan) for sql, plan in found if sql.startswith("SELECT COUNT(*)")]
    assert "LIMIT 301" in sql and " WHERE " not in sql, sql
    assert re.search(r"Limit .*\n\s*->  (Seq Scan|Index Only Scan)", plan), plan
    assert "Filter" not in plan and "Sort" not in plan, plan


@pytest.mark.parametrize(
    ("query", "index"),
    [
        ("status__exact=timed_out", STATUS_INDEXES),
        ("tool=sleepy", TOOL_INDEXES),
        # Nine in ten have this status, far more than the cap: the page and the
        # count read them in the list's order and stop.
        ("status__exact=done", "job_status_created_idx"),
        # One in ten, about as many as the cap: reading them in order or finding
        # them all and sorting them costs about the same, and which one PostgreSQL
        # picks turns on how much of the table a vacuum has marked all-visible.
        ("status__exact=failed", STATUS_INDEXES),
    ],
)
def test_the_admin_job_list_pages_and_counts_by_index(
    history: Any, query: str, index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cap of 300 over a few thousand jobs, nearer the share of a million that
    # 10,000 are; above a page (100) and "show all" (200), so the list is still paged.
    monkeypatch.setattr(CappedCountPaginator, "CAP", 300)
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("plans-admin", password="x"))

    def listed() -> None:
        response = staff.get(f"/admin/jobs/job/?{query}")
        assert response.status_code == 200, response.content[:300]

    found = [(sql, plan) for sql, plan in plans(listed) if "jobs_job" in sql]
    assert_indexed(found, index)
    counts = [(sql, plan) for sql, plan in found if sql.startswith("SELECT COUNT(*)")]
    assert counts, found
    assert_indexed(counts, index)


def test_the_sweep_reads_only_live_jobs_and_runs(history: Any) -> None:
    found = plans(jobs_sweep)
    # (status, heartbeat_at), or the partial index of live jobs only.
    assert_indexed(found, "(jobs_job_status_84c7a0_idx|job_live_owner_idx)")
    assert_indexed(found, "job_key_expiry_idx")
    assert_indexed(plans(runs_reap), "(run_status_created_idx|run_live_owner_idx)")


# Batches of 10: over a few thousand rows, one batch names the share of a table
# (well under 1%) that a batch of 500 names in a deployment's hundreds of thousands.


def test_the_retention_pass_finds_and_deletes_old_jobs_by_index(history: Any) -> None:
    found = plans(lambda: retention.jobs_purge(budget=Budget(size=10, batches=20)))
    assert_indexed(found, "job_finished_at_idx")
    assert_indexed(found, r"jobs_jobchunk_job_id_\w+")  # the foreign key's


def test_the_retention_pass_finds_and_deletes_old_deliveries_of_no_job_by_index(
    history: Any,
) -> None:
    found = plans(lambda: retention.deliveries_purge(budget=Budget(size=10, batches=20)))
    assert_indexed(found, "webhook_jobless_created_idx")
    assert_indexed(found, r"jobs_webhookattempt_delivery_id_\w+")  # the foreign key's


def test_the_retention_pass_finds_and_deletes_old_sessions_by_index(history: Any) -> None:
    found = plans(lambda: sessions_purge(budget=Budget(size=10, batches=20)))
    assert_indexed(found, "session_deleted_idx")
    assert_indexed(found, r"agent_sessions_event_session_id_\w+")  # the foreign key's
