"""One user's queue wait while another floods the tool workers, for 1, 2 and 8 workers.

For each number of tool workers in BENCH_WORKERS (default 1,2,8):

1. idle: user B starts one slow job at a time on an idle server; its queue wait
   is the time from accepting the job (``created_at``) to its start.
2. flood: user A starts BENCH_FLOOD slow jobs at once (by default ten per worker
   and twenty more, so a backlog outlasts B's jobs); a second later, while A's
   backlog is still waiting, B starts one job at a time again, and its queue
   wait is taken the same way.

Both sides use the same workers in the same run. Prints, per layout, B's waits,
A's job run time, and the target: B's longest wait under the flood at most one
of A's job run times plus 1 s (B waits for one of the running jobs to end).
Uses a scratch SQLite database (or BENCH_DATABASE_URL) and REDIS_URL, or an
embedded Redis when REDIS_URL is unset.
"""

from __future__ import annotations

import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.support import (
    processes_stop,
    scratch_environment,
    tool_workers_start,
    workers_wait,
)

N_FLOOD = int(os.environ.get("BENCH_FLOOD", "0"))  # 0: 10 per worker + 20
LAYOUTS = [int(n) for n in os.environ.get("BENCH_WORKERS", "1,2,8").split(",")]
N_PROBES = int(os.environ.get("BENCH_PROBES", "5"))
JOB_S = float(os.environ.get("BENCH_JOB_S", "0.5"))
SLOW = {"seconds": JOB_S, "steps": 5}
_keys = itertools.count()


def post_job(client: Any) -> str:
    response = client.post(
        "/api/jobs",
        {"tool": "sleepy", "args": SLOW},
        content_type="application/json",
        headers={"Idempotency-Key": f"fair-{next(_keys)}"},
    )
    assert response.status_code == 202, response.content
    return str(response.json()["job_id"])


def wait_done(ids: list[str], timeout: float = 300) -> list[Any]:
    from jobs.models import Job

    deadline = time.monotonic() + timeout
    while Job.objects.filter(id__in=ids, status__in=["queued", "running"]).exists():
        if time.monotonic() > deadline:
            raise SystemExit("jobs did not end in time")
        time.sleep(0.02)
    jobs = list(Job.objects.filter(id__in=ids))
    bad = [j.id for j in jobs if j.status != "done"]
    if bad:
        raise SystemExit(f"{len(bad)} jobs did not end done, e.g. {bad[0]}")
    return jobs


def queue_wait(job: Any) -> float:
    return float((job.started_at - job.created_at).total_seconds())


def probe(client: Any) -> float:
    """B's queue wait for one job (its start minus its acceptance, from its row)."""
    (job,) = wait_done([post_job(client)])
    return queue_wait(job)


def backlog(owner: Any) -> int:
    """How many of ``owner``'s jobs have not started yet."""
    from jobs.models import Job

    return Job.objects.filter(owner=owner, status="queued").count()


def describe(name: str, waits: list[float]) -> None:
    print(
        f"  {name:<6} B's queue wait p50 {1000 * statistics.median(waits):7.1f} ms"
        f"  max {1000 * max(waits):7.1f} ms  ({len(waits)} jobs)"
    )


def tool_workers_gone() -> None:
    """Return once no worker listens on ``tools`` (stopped workers deregister)."""
    import django_rq
    from rq import Worker

    queue = django_rq.get_queue("tools")
    deadline = time.monotonic() + 30
    while Worker.all(queue=queue):
        if time.monotonic() > deadline:
            raise SystemExit("workers did not stop")
        time.sleep(0.1)


def layout(scratch: Path, n_workers: int, clients: list[Any], users: list[Any]) -> bool:
    """B's waits under A's flood on ``n_workers`` tool workers; whether the target held."""
    client_a, client_b = clients
    n_flood = N_FLOOD or 10 * n_workers + 20
    workers = tool_workers_start(scratch, n_workers)
    try:
        workers_wait("tools", n_workers)
        print(f"{n_workers} workers: {n_flood} jobs of {JOB_S:g} s from A, then B's one at a time")
        wait_done([post_job(client_b) for _ in range(n_workers)])  # warm up
        describe("idle", [probe(client_b) for _ in range(N_PROBES)])

        flood = [post_job(client_a) for _ in range(n_flood)]
        time.sleep(1.0)
        flooded = []
        for _ in range(N_PROBES):
            if backlog(users[0]) == 0:
                break
            flooded.append(probe(client_b))
        left = backlog(users[0])
        flood_jobs = wait_done(flood)
        if not flooded:
            raise SystemExit("A's backlog ran out before B's first job")
        describe("flood", flooded)
        run_s = statistics.median(
            (j.finished_at - j.started_at).total_seconds() for j in flood_jobs
        )
        target = run_s + 1.0
        ok = max(flooded) <= target
        print(
            f"  A's jobs left waiting after B's last: {left}; one of A's jobs runs"
            f" {1000 * run_s:.0f} ms; ratio B's max wait / (A's run + 1 s) ="
            f" {max(flooded) / target:.2f}  {'ok' if ok else 'ABOVE TARGET'}"
        )
        return ok
    finally:
        processes_stop(workers)
        tool_workers_gone()


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="agentsite-bench-"))
    owned = scratch_environment(scratch, name="fairness", extra_tools="tests.jobs.tools_for_tests")
    try:
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db import connection
        from django.test import Client
        from django.test.utils import setup_test_environment

        from accounts.models import ApiToken

        setup_test_environment()
        call_command("migrate", interactive=False, verbosity=0)
        clients, users = [], []
        for name in ("a", "b"):
            user = get_user_model().objects.create_user(f"bench-{name}-{os.getpid()}", "pw-123456")
            _, raw = ApiToken.issue(user=user, name="bench")
            clients.append(Client(headers={"Authorization": f"Bearer {raw}"}))
            users.append(user)
        print(f"database {connection.vendor}; target: B's wait ≤ one of A's job runs + 1 s")
        verdicts = [layout(scratch, n, clients, users) for n in LAYOUTS]
        print(f"verdict  {'ok' if all(verdicts) else 'ABOVE TARGET'}")
        return 0
    finally:
        processes_stop(owned)


if __name__ == "__main__":
    sys.exit(main())
