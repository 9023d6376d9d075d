"""One user's queue wait while another floods the tool workers, against an idle server.

1. idle: user B starts one slow job at a time on an idle server; its queue wait
   is the time from accepting the job (``created_at``) to its start.
2. flood: user A starts BENCH_FLOOD slow jobs at once; while A's backlog is
   still waiting, B starts one job at a time again, and its queue wait is taken
   the same way.

Both sides use the same workers in the same run. Prints both waits, their
ratio, and the target: B's wait under the flood at most 1.5 x the idle wait
plus one job's run time (B waits for one of the running jobs to end).
Uses a scratch SQLite database (or BENCH_DATABASE_URL) and REDIS_URL, or an
embedded Redis when REDIS_URL is unset.
"""

from __future__ import annotations

import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from _scratch import (  # noqa: E402
    scratch_environment,
    tool_workers_start,
    tool_workers_wait,
)

N_FLOOD = int(os.environ.get("BENCH_FLOOD", "40"))
N_WORKERS = int(os.environ.get("BENCH_WORKERS", "2"))
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


def describe(name: str, waits: list[float]) -> float:
    p50 = statistics.median(waits)
    print(
        f"{name:<6} B's queue wait p50 {1000 * p50:7.1f} ms  max {1000 * max(waits):7.1f} ms"
        f"  ({len(waits)} jobs)"
    )
    return p50


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="agentsite-bench-"))
    owned = scratch_environment(scratch, name="fairness", extra_tools="tests.jobs.tools_for_tests")
    workers: list[subprocess.Popen[bytes]] = []
    try:
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db import connection
        from django.test import Client
        from django.test.utils import setup_test_environment

        from agentsite.models import ApiToken

        setup_test_environment()
        call_command("migrate", interactive=False, verbosity=0)
        clients, users = [], []
        for name in ("a", "b"):
            user = get_user_model().objects.create_user(f"bench-{name}-{os.getpid()}", "pw-123456")
            _, raw = ApiToken.issue(user=user, name="bench")
            clients.append(Client(headers={"Authorization": f"Bearer {raw}"}))
            users.append(user)
        client_a, client_b = clients
        workers = tool_workers_start(scratch, N_WORKERS)
        tool_workers_wait(N_WORKERS)
        print(
            f"{N_FLOOD} jobs of {JOB_S:g} s from A, {N_PROBES} from B one at a time,"
            f" {N_WORKERS} workers, database {connection.vendor}"
        )
        wait_done([post_job(client_b) for _ in range(N_WORKERS)])  # warm up

        idle = describe("idle", [probe(client_b) for _ in range(N_PROBES)])

        flood = [post_job(client_a) for _ in range(N_FLOOD)]
        flooded = []
        for _ in range(N_PROBES):
            if backlog(users[0]) == 0:
                break
            flooded.append(probe(client_b))
        left = backlog(users[0])
        flood_jobs = wait_done(flood)
        if not flooded:
            raise SystemExit("A's backlog ran out before B's first job")
        under_flood = describe("flood", flooded)
        run_s = statistics.median(
            (j.finished_at - j.started_at).total_seconds() for j in flood_jobs
        )
        target = 1.5 * idle + run_s
        print(f"A's jobs left waiting after B's last: {left}; one job runs {1000 * run_s:.0f} ms")
        print(
            f"ratio    flood / idle = {under_flood / idle:.1f}"
            f"; target: flood ≤ 1.5 x idle + one job's run = {1000 * target:.0f} ms"
        )
        print(f"verdict  {'ok' if under_flood <= target else 'ABOVE TARGET'}")
        return 0
    finally:
        for proc in workers + owned:
            proc.terminate()
        for proc in workers + owned:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    sys.exit(main())
