"""Reads that must not slow down as history grows, against the same reads on a small history.

One scratch database grows in steps (``manage.py seed_history``) to BENCH_HISTORY_STEPS
events and jobs (default 10k, 100k, 1M of each). At each step, and first on the
empty database and on the baseline, each read is timed BENCH_HISTORY_REPEAT times
in this process, through the real URL stack (Django's test client, a real user):

- resume: ``GET /api/sessions/{id}/events?after=<token of its last event>`` of the
  newest session (what a reconnecting client does);
- job list: ``GET /api/jobs`` (the first page, 50 jobs, of a user who owns them all);
- admin job list: ``GET /admin/jobs/job/`` as a superuser;
- sweep: one pass of the scheduler's job sweep and run reaper.

Prints the median per read and step, and its ratio to the baseline's (target ≤ 1.5).
The baseline is BENCH_HISTORY_BASELINE (1,000) events and jobs: one session of
1,000 events and more jobs than a page of either list holds, so that every read
returns what it returns at 1M (4 events, 50 and 100 rows), and what grows is the
history alone. The empty database is shown beside it: there the lists render no
rows and the resume returns no event, so a ratio to it measures the page rather
than the history.
Uses a scratch SQLite database (or BENCH_DATABASE_URL) and REDIS_URL, or an
embedded Redis when REDIS_URL is unset.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.support import processes_stop, scratch_environment

STEPS = [int(n) for n in os.environ.get("BENCH_HISTORY_STEPS", "10000,100000,1000000").split(",")]
REPEAT = int(os.environ.get("BENCH_HISTORY_REPEAT", "30"))
BASELINE = int(os.environ.get("BENCH_HISTORY_BASELINE", "1000"))
EVENTS_PER_SESSION = 1000
TARGET = 1.5


def timed(action: Callable[[], Any]) -> float:
    """The median of REPEAT runs of ``action``, in milliseconds (after one warm-up)."""
    action()
    runs = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        action()
        runs.append(1000 * (time.perf_counter() - started))
    return statistics.median(runs)


def reads() -> dict[str, Callable[[], Any]]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from accounts.models import ApiToken
    from jobs.tasks import jobs_sweep
    from sessions.models import AgentSession
    from sessions.runs import runs_reap
    from sessions.tokens import session_token

    User = get_user_model()
    user, _ = User.objects.get_or_create(username="seed")
    admin = User.objects.filter(username="bench-admin").first() or User.objects.create_superuser(
        "bench-admin", password="bench-admin"
    )
    _, raw = ApiToken.issue(user=user)
    api = Client(headers={"Authorization": f"Bearer {raw}"})
    staff = Client()
    staff.force_login(admin)
    session = AgentSession.objects.filter(owner=user).order_by("-created_at").first()
    if session is None:  # the empty database: one session with one turn
        session = AgentSession.objects.create(owner=user, title="empty")
    after = session_token(session_id=session.id, owner_id=user.pk, seq=max(session.last_seq - 4, 0))

    def ok(response: Any) -> None:
        assert response.status_code == 200, (response.status_code, response.content[:300])

    return {
        "resume": lambda: ok(api.get(f"/api/sessions/{session.id}/events", {"after": after})),
        "job list": lambda: ok(api.get("/api/jobs")),
        "admin job list": lambda: ok(staff.get("/admin/jobs/job/")),
        # The passes themselves: the scheduler's entry points (sweep_jobs, reap_runs)
        # run each in a work horse of its own, and set the inherited connection aside
        # (kept open, for the parent): called here, every call would keep one more.
        "sweep": lambda: (jobs_sweep(), runs_reap()),
    }


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="bench-history-"))
    owned = scratch_environment(scratch, name="history")
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        table: dict[str, dict[int, float]] = {}
        seeded = 0
        for step in sorted({0, BASELINE, *STEPS}):
            if step > seeded:
                grow = step - seeded
                call_command(
                    "seed_history",
                    sessions=max(grow // EVENTS_PER_SESSION, 1),
                    events_per_session=min(EVENTS_PER_SESSION, grow),
                    jobs=grow,
                    seed=step,
                )
                seeded = step
            for name, action in reads().items():
                table.setdefault(name, {})[step] = timed(action)
            print(f"measured at {step:,} events and jobs", flush=True)
        return report(table)
    finally:
        processes_stop(owned)


def report(table: dict[str, dict[int, float]]) -> int:
    steps = sorted(next(iter(table.values())))
    grown = [s for s in steps if s >= BASELINE]
    print(
        f"\n{'read (median ms)':<18}"
        + "".join(f"{s:>12,}" for s in steps)
        + f"   worst ratio to {BASELINE:,} (to empty)"
    )
    failed = False
    for name, by_step in table.items():
        worst = max(by_step[s] / by_step[BASELINE] for s in grown)
        to_empty = max(by_step[s] / by_step[0] for s in grown)
        failed |= worst > TARGET
        cells = "".join(f"{by_step[s]:>12.2f}" for s in steps)
        verdict = "ok" if worst <= TARGET else "OVER"
        print(f"{name:<18}{cells}   {worst:.2f}x {verdict} ({to_empty:.2f}x)")
    print(f"\ntarget: each read within {TARGET}x of its time at {BASELINE:,} events and jobs")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
