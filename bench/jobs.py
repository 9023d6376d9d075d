"""Job API overhead against raw RQ, with the same workers in the same run.

1. raw RQ: enqueue N no-op functions on ``tools`` → finished.
2. job API: N ``POST /api/jobs`` of the no-op tool → ``done``.
   (1 and 2 alternate for BENCH_ROUNDS rounds.)
3. queue wait on an idle worker: one job at a time, time from commit to start.

Prints throughput, latency p50/p95, queue wait and the workers' CPU time per
job for each, the CPU a job costs the rest (this process: the client, and the web
views it calls in-process; a PostgreSQL server's processes; Redis servers), the
median ratio of throughputs (target ≥ 0.8) and the idle queue wait p95 (target
≤ 100 ms).
Uses a scratch SQLite database (or BENCH_DATABASE_URL) and REDIS_URL, or an
embedded Redis when REDIS_URL is unset.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.support import (
    TICKS_PER_S,
    cpu_ticks,
    live_children_ticks,
    named_roots,
    parents,
    percentile,
    processes_stop,
    scratch_environment,
    tool_workers_start,
    tree_ticks,
    workers_wait,
)

N_JOBS = int(os.environ.get("BENCH_JOBS", "200"))
N_WORKERS = int(os.environ.get("BENCH_WORKERS", "2"))
N_IDLE = int(os.environ.get("BENCH_IDLE_JOBS", "30"))
N_ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))


def describe(
    name: str, count: int, elapsed: float, latency: list[float], wait: list[float]
) -> float:
    rate = count / elapsed
    print(
        f"{name:<8} {rate:8.1f} jobs/s  latency p50 {1000 * statistics.median(latency):6.1f} ms"
        f"  p95 {1000 * percentile(latency, 0.95):6.1f} ms"
        f"  queue wait p50 {1000 * statistics.median(wait):6.1f} ms"
        f"  p95 {1000 * percentile(wait, 0.95):6.1f} ms"
    )
    return rate


def cpu_seconds(procs: list[subprocess.Popen[bytes]]) -> tuple[float, float]:
    """CPU time of the workers, and of their work horses: the ones they reaped and the
    ones still alive (a tool worker's warm horse lives across jobs)."""
    table = parents()
    own = horses = 0
    for proc in procs:
        worker, reaped = cpu_ticks(proc.pid)
        own += worker
        horses += reaped + live_children_ticks(proc.pid, table)
    return own / TICKS_PER_S, horses / TICKS_PER_S


def others_seconds() -> tuple[float, float, float]:
    """CPU time of this process (the client, and the web views it calls in-process), of
    the database server (a PostgreSQL server's processes; SQLite's work is in its
    callers) and of the Redis servers on the machine."""
    own = cpu_ticks(os.getpid())[0]
    database = tree_ticks(named_roots("postgres"))
    redis = tree_ticks(named_roots("redis-server"))
    return own / TICKS_PER_S, database / TICKS_PER_S, redis / TICKS_PER_S


def others_line(name: str, before: tuple[float, ...], after: tuple[float, ...]) -> str:
    own, database, redis = (1000 * (b - a) / N_JOBS for a, b in zip(before, after, strict=True))
    return f"{name} client and web {own:.1f} ms, database server {database:.1f}, Redis {redis:.1f}"


def cpu_line(name: str, before: tuple[float, float], after: tuple[float, float]) -> str:
    own, horses = after[0] - before[0], after[1] - before[1]
    return (
        f"{name} {1000 * (own + horses) / N_JOBS:.1f} ms"
        f" (worker {1000 * own / N_JOBS:.1f}, horse {1000 * horses / N_JOBS:.1f})"
    )


def bench_raw_rq(count: int) -> float:
    import django_rq
    from rq.job import Job as RqJob

    queue = django_rq.get_queue("tools")
    connection = django_rq.get_connection("tools")
    start = time.time()
    func = "tests.jobs.tools_for_tests.raw_noop"
    ids = [queue.enqueue(func, result_ttl=600).id for _ in range(count)]
    pending = set(ids)
    while pending:
        jobs = RqJob.fetch_many(list(pending), connection=connection)
        pending -= {j.id for j in jobs if j is not None and j.get_status() == "finished"}
        time.sleep(0.02)
    jobs = [j for j in RqJob.fetch_many(ids, connection=connection) if j is not None]
    latency = [(j.ended_at - j.enqueued_at).total_seconds() for j in jobs]
    wait = [(j.started_at - j.enqueued_at).total_seconds() for j in jobs]
    elapsed = max(j.ended_at.timestamp() for j in jobs) - start
    rate = describe("raw RQ", count, elapsed, latency, wait)
    horse_time("raw RQ", ids)
    return rate


def horse_time(name: str, ids: list[str]) -> None:
    """How long RQ's work horse took per job, start to end (the per-job cost of a worker)."""
    import django_rq
    from rq.job import Job as RqJob

    jobs = RqJob.fetch_many(ids, connection=django_rq.get_connection("tools"))
    spans = [(j.ended_at - j.started_at).total_seconds() for j in jobs if j and j.ended_at]
    if spans:
        print(
            f"{name:<8} work horse p50 {1000 * statistics.median(spans):6.1f} ms"
            f"  p95 {1000 * percentile(spans, 0.95):6.1f} ms"
        )


def post_job(client: Any, key: str) -> tuple[str, float]:
    posted = time.time()
    response = client.post(
        "/api/jobs",
        {"tool": "noop", "args": {}},
        content_type="application/json",
        headers={"Idempotency-Key": key},
    )
    assert response.status_code == 202, response.content
    return str(response.json()["job_id"]), posted


def wait_done(ids: list[str]) -> list[Any]:
    from jobs.models import Job

    while Job.objects.filter(id__in=ids, status__in=["queued", "running"]).exists():
        time.sleep(0.02)
    jobs = list(Job.objects.filter(id__in=ids))
    bad = [j.id for j in jobs if j.status != "done"]
    if bad:
        raise SystemExit(f"{len(bad)} jobs did not end done, e.g. {bad[0]}")
    return jobs


def bench_job_api(client: Any, count: int, label: str) -> float:
    start = time.time()
    posted = dict(post_job(client, f"{label}-{i}") for i in range(count))
    jobs = wait_done(list(posted))
    latency = [j.finished_at.timestamp() - posted[j.id] for j in jobs]
    wait = [(j.started_at - j.enqueued_at).total_seconds() for j in jobs]
    elapsed = max(j.finished_at.timestamp() for j in jobs) - start
    rate = describe("job API", count, elapsed, latency, wait)
    horse_time("job API", list(posted))
    return rate


def bench_idle_wait(client: Any, count: int) -> float:
    waits = []
    for i in range(count):
        job_id, _ = post_job(client, f"idle-{i}")
        (job,) = wait_done([job_id])
        waits.append((job.started_at - job.enqueued_at).total_seconds())
        time.sleep(0.05)
    p95 = percentile(waits, 0.95)
    print(
        f"idle     queue wait p50 {1000 * statistics.median(waits):6.1f} ms"
        f"  p95 {1000 * p95:6.1f} ms (target ≤ 100 ms)"
    )
    return p95


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="agentsite-bench-"))
    owned = scratch_environment(scratch, name="jobs", extra_tools="tests.jobs.tools_for_tests")
    workers: list[subprocess.Popen[bytes]] = []
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.test import Client
        from django.test.utils import setup_test_environment

        from accounts.models import ApiToken

        setup_test_environment()
        call_command("migrate", interactive=False, verbosity=0)
        from django.contrib.auth import get_user_model

        user = get_user_model().objects.create_user(f"bench-{os.getpid()}", password="bench-pw-123")
        _, raw = ApiToken.issue(user=user, name="bench")
        client = Client(headers={"Authorization": f"Bearer {raw}"})
        workers = tool_workers_start(scratch, N_WORKERS)
        workers_wait("tools", N_WORKERS)
        print(f"{N_JOBS} no-op jobs x {N_ROUNDS} rounds, {N_WORKERS} workers, {settings_summary()}")
        bench_raw_rq(20)  # warm up both paths
        wait_done([post_job(client, f"warm-{i}")[0] for i in range(20)])
        ratios = []
        for round_no in range(N_ROUNDS):
            # Alternate the two in every round: the machine's drift hits both alike.
            before, others_before = cpu_seconds(workers), others_seconds()
            raw_rate = bench_raw_rq(N_JOBS)
            middle, others_middle = cpu_seconds(workers), others_seconds()
            api_rate = bench_job_api(client, N_JOBS, f"run{round_no}")
            after, others_after = cpu_seconds(workers), others_seconds()
            print(
                f"others   CPU per job: {others_line('raw RQ', others_before, others_middle)};"
                f" {others_line('job API', others_middle, others_after)}"
            )
            print(
                f"workers  CPU per job: {cpu_line('raw RQ', before, middle)},"
                f" {cpu_line('job API', middle, after)};"
                f" round {round_no + 1} ratio {api_rate / raw_rate:.2f}"
            )
            ratios.append(api_rate / raw_rate)
        idle_p95 = bench_idle_wait(client, N_IDLE)
        ratio = statistics.median(ratios)
        print(
            f"ratio    job API / raw RQ throughput = {ratio:.2f}, median of {N_ROUNDS} rounds"
            f" ({min(ratios):.2f} to {max(ratios):.2f}; target ≥ 0.80)"
        )
        print(
            f"verdict  throughput {'ok' if ratio >= 0.8 else 'BELOW TARGET'}, "
            f"idle queue wait {'ok' if idle_p95 <= 0.1 else 'ABOVE TARGET'}"
        )
        return 0
    finally:
        processes_stop(workers + owned)


def settings_summary() -> str:
    from django.db import connection

    return f"database {connection.vendor}"


if __name__ == "__main__":
    sys.exit(main())
