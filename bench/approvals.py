"""Pending approval requests hold nothing, and an approval starts its job at once.

``manage.py serve`` (web, a turn worker, ``BENCH_APPROVALS_TOOL_WORKERS`` tool
workers, default 4, and the scheduler) on a scratch SQLite database (or
``BENCH_DATABASE_URL``) and ``REDIS_URL`` or an embedded Redis, started by
bench/load.py's ``Serve``; the chatting users are bench/load.py's Locust users
(bench/_locust_users.py), each with a session of its own followed over the
websocket, a message every 5-10 s (``BENCH_APPROVALS_MESSAGE_EVERY_S``) and no
jobs, on the offline model with the delay the environment gives it
(``AGENTSITE_OFFLINE_CALL_S``, 0 unless set, as for bench/load.py).

1. Baseline: ``BENCH_APPROVALS_USERS`` (100) users chat for
   ``BENCH_APPROVALS_PHASE_S`` (120 s); time to first token p50/p95 (the message
   POST → the first text of its run on the websocket, as bench/load.py measures it).
2. Then each user's agent is asked to run the tests
   (``ToolApprovalRule(user, "run_tests", "always")``) in
   ``BENCH_APPROVALS_PER_USER`` (10) sessions of the user's own, one
   ``POST /api/sessions/{id}/messages`` each: 1,000 requests made by the agents'
   own ``start_run_tests`` calls, pending for the rest of the run. The same chat
   again; TTFT p50/p95 and the ratio of p95 to the baseline's (target ≤ 1.1x).
   What the processes hold, read from /proc, Redis and RQ at rest before and after
   the requests are made (and the most seen while each chat phase ran): the web
   and turn-worker processes' threads, the turn worker's running turns (RQ's
   started registry on ``turns``; runs ``running`` in the database), RQ workers
   (registered in Redis; processes, work horses included), queued RQ jobs and the
   jobs handed to RQ. Target: no more of any of them at rest with the requests.
3. Decision → job started: ``BENCH_APPROVALS_DECISIONS`` (200) requests for the
   test tool ``noop``, made in this process by the agent's own toolbox function
   (``sessions.toolbox.tool_execute``, under ``ToolApprovalRule(user, "noop",
   "always")``), decided with ``POST /api/approvals/{id}/decision`` by
   ``BENCH_APPROVALS_CLIENTS`` (4) clients at once; each client waits for its job
   to end before the next request, so a tool worker is free for every job. From
   the decision's response to the job's ``started_at`` (read from the database),
   against the same tool started with ``POST /api/jobs`` in the same sessions, each
   client alternating the two. Target: p95 ≤ 100 ms.

``--quick`` (a smoke run): 10 users, 20 s phases, 20 decisions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.load import Serve, Step, children, run_step
from bench.support import (
    api_tokens_file,
    children_of,
    machine_ticks,
    parents,
    percentile,
    processes_stop,
    scratch_environment,
    status_figure,
)

TTFT_RATIO_TARGET = 1.1
START_P95_TARGET_S = 0.1
WORKER_ROLES = ("turns", "tools")
TERMINAL = ("done", "failed", "cancelled", "timed_out")


@dataclass
class Settings:
    users: int
    per_user: int
    phase_s: float
    drain_s: float
    decisions: int
    clients: int
    tool_workers: int
    message_every: str

    @classmethod
    def from_environment(cls, quick: bool) -> Settings:
        def number(name: str, full: str, short: str) -> float:
            return float(os.environ.get(f"BENCH_APPROVALS_{name}", short if quick else full))

        return cls(
            users=int(number("USERS", "100", "10")),
            per_user=int(number("PER_USER", "10", "10")),
            phase_s=number("PHASE_S", "120", "20"),
            drain_s=number("DRAIN_S", "30", "10"),
            decisions=int(number("DECISIONS", "200", "20")),
            clients=int(number("CLIENTS", "4", "2")),
            tool_workers=int(number("TOOL_WORKERS", "4", "2")),
            message_every=os.environ.get("BENCH_APPROVALS_MESSAGE_EVERY_S", "5,10"),
        )


# --- what the processes hold ------------------------------------------------------------


def holdings(serve_pid: int) -> dict[str, int]:
    """What the processes and Redis hold right now."""
    import django_rq
    from rq import Worker
    from rq.registry import StartedJobRegistry

    from jobs.models import Job
    from sessions.models import Run

    roles = children(serve_pid)
    table = parents()
    workers = [pid for role, pid in roles.items() if role.rstrip("0123456789") in WORKER_ROLES]
    horses = [child for pid in workers for child in children_of(pid, table)]
    connection = django_rq.get_connection("tools")
    queues = [django_rq.get_queue(name) for name in ("turns", "tools", "default")]
    return {
        "web threads": status_figure(roles["web"], "Threads"),
        "turn worker threads": status_figure(roles["turns"], "Threads"),
        "running turns (RQ)": StartedJobRegistry(queue=queues[0]).count,
        "running turns (database)": Run.objects.filter(status=Run.Status.RUNNING).count(),
        "RQ workers (Redis)": len(Worker.all(connection=connection)),
        "RQ worker processes": len(workers) + len(horses),
        "queued RQ jobs": sum(queue.count for queue in queues),
        "jobs handed to RQ": Job.objects.filter(
            status__in=["queued", "running"], enqueued_at__isnull=False
        ).count(),
    }


class Peaks(threading.Thread):
    """The most of each holding seen while a phase runs, read once a second."""

    def __init__(self, serve_pid: int) -> None:
        super().__init__(daemon=True)
        self.serve_pid = serve_pid
        self.peak: dict[str, int] = {}
        self.done = threading.Event()

    def run(self) -> None:
        from django.db import connections

        try:
            while not self.done.wait(1.0):
                for name, value in holdings(self.serve_pid).items():
                    self.peak[name] = max(value, self.peak.get(name, 0))
        finally:
            connections.close_all()


def chat(
    serve: Serve, scratch: Path, tokens_path: Path, cfg: Settings, name: str
) -> tuple[Step, dict[str, int]]:
    """One chat phase, with the most held while it ran; the step's CPU gains ``box``: the
    whole machine's busy cores (others share it: their part is ``box`` less the rest)."""
    peaks = Peaks(serve.proc.pid)
    peaks.start()
    busy, every = machine_ticks()
    try:
        step = run_step(
            serve,
            scratch,
            tokens_path,
            cfg.users,
            active_s=cfg.phase_s,
            drain_s=cfg.drain_s,
            name=name,
            env={"BENCH_LOAD_MESSAGE_EVERY_S": cfg.message_every, "BENCH_LOAD_JOB_EVERY_S": "0"},
        )
    finally:
        peaks.done.set()
        peaks.join()
    busy_after, every_after = machine_ticks()
    step.cpu["box"] = (busy_after - busy) / (every_after - every) * (os.cpu_count() or 1)
    return step, peaks.peak


def settle(what: str, done: Callable[[], bool], timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not within {timeout:g} s")
        time.sleep(0.5)


def idle() -> bool:
    """No turn queued or running, no job in flight, RQ's queues empty."""
    import django_rq

    from jobs.models import Job
    from sessions.models import Run

    return (
        not Run.objects.filter(status__in=["queued", "running"]).exists()
        and not Job.objects.filter(status__in=["queued", "running"], gate="").exists()
        and all(django_rq.get_queue(q).count == 0 for q in ("turns", "tools", "default"))
    )


# --- the requests -----------------------------------------------------------------------


def api(url: str, token: str) -> Any:
    import httpx

    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def ask_for_tests(serve: Serve, tokens: list[str], cfg: Settings) -> float:
    """Each user's agent asked to run the tests in ``per_user`` sessions; returns how long
    until every request was pending and every turn had ended."""
    from django.contrib.auth import get_user_model

    from sessions.models import Approval, ToolApprovalRule

    User = get_user_model()
    for i in range(cfg.users):
        ToolApprovalRule.objects.get_or_create(
            user=User.objects.get(username=f"load-user-{i}"), tool="run_tests", mode="always"
        )
    started = time.monotonic()

    def ask(i: int) -> None:
        with api(serve.url, tokens[i]) as client:
            for n in range(cfg.per_user):
                created = client.post("/api/sessions", json={"title": f"approvals {i}.{n}"})
                assert created.status_code == 201, created.text
                session = created.json()["session_id"]
                sent = client.post(
                    f"/api/sessions/{session}/messages", json={"text": "run the tests"}
                )
                assert sent.status_code == 202, sent.text

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(ask, range(cfg.users)))
    expected = cfg.users * cfg.per_user
    pending = Approval.objects.filter(status="pending", tool="run_tests")
    settle("the agents' requests", lambda: pending.count() >= expected and idle())
    if pending.count() != expected:
        raise SystemExit(f"{pending.count()} requests pending, not {expected}")
    return time.monotonic() - started


@dataclass
class Starts:
    """One way of starting a job: client times and the jobs, read back afterwards."""

    sent: dict[str, float] = field(default_factory=dict)  # job id → request sent
    answered: dict[str, float] = field(default_factory=dict)  # job id → response received

    def delays(self) -> tuple[list[float], list[float], list[float], list[float]]:
        """(response → started_at, the server's mark → started_at, the server's mark →
        handed to RQ, round trip); the mark: ``decided_at`` of the job's request, else
        the job's ``created_at``."""
        from jobs.models import Job
        from sessions.models import Approval

        rows = Job.objects.filter(id__in=list(self.sent)).values_list(
            "id", "status", "started_at", "created_at", "enqueued_at"
        )
        decided = dict(
            Approval.objects.filter(job_id__in=list(self.sent)).values_list("job_id", "decided_at")
        )
        from_answer, from_mark, handed, trip = [], [], [], []
        for job_id, status, started_at, created_at, enqueued_at in rows:
            if status != "done" or started_at is None or enqueued_at is None:
                raise SystemExit(f"job {job_id} ended {status}")
            mark = (decided.get(job_id) or created_at).timestamp()
            from_answer.append(started_at.timestamp() - self.answered[job_id])
            from_mark.append(started_at.timestamp() - mark)
            handed.append(enqueued_at.timestamp() - mark)
            trip.append(self.answered[job_id] - self.sent[job_id])
        return from_answer, from_mark, handed, trip


def noop_requests(tokens: list[str], cfg: Settings) -> list[tuple[int, str, str]]:
    """``decisions`` pending requests for ``noop``, made as an agent's call makes them:
    (user number, approval id, session id)."""
    from django.contrib.auth import get_user_model

    from sessions.models import Approval, Run, ToolApprovalRule
    from sessions.toolbox import tool_execute

    User = get_user_model()
    made = []
    for n in range(cfg.decisions):
        i = n % cfg.users
        user = User.objects.get(username=f"load-user-{i}")
        ToolApprovalRule.objects.get_or_create(user=user, tool="noop", mode="always")
        run = Run.objects.filter(owner=user, session__title__startswith="approvals ").first()
        assert run is not None
        output, failed = tool_execute(
            owner=user,
            session_id=run.session_id,
            run_id=run.id,
            name="start_noop",
            args={},
            call_id=f"bench-noop-{n}",
        )
        if failed or output.get("status") != "awaiting_approval":
            raise SystemExit(f"no request made: {output}")
        approval = Approval.objects.get(pk=output["approval_id"])
        made.append((i, approval.id, run.session_id))
    return made


def job_wait(job_id: str) -> None:
    from jobs.models import Job

    deadline = time.monotonic() + 60
    while Job.objects.filter(id=job_id).values_list("status", flat=True).get() not in TERMINAL:
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job_id} did not end")
        time.sleep(0.005)


def decide_and_start(
    serve: Serve, tokens: list[str], cfg: Settings
) -> tuple[Starts, Starts, list[str]]:
    """The decisions, and as many jobs started directly, ``clients`` at once."""
    from django.db import connections

    requests = noop_requests(tokens, cfg)
    approved, direct = Starts(), Starts()
    errors: list[str] = []
    lanes = [requests[c :: cfg.clients] for c in range(cfg.clients)]

    def lane(mine: list[tuple[int, str, str]]) -> None:
        clients = {i: api(serve.url, tokens[i]) for i, _, _ in mine}
        try:
            for i, approval_id, session_id in mine:
                client = clients[i]
                sent = time.time()
                reply = client.post(
                    f"/api/approvals/{approval_id}/decision", json={"decision": "approve"}
                )
                answered = time.time()
                if reply.status_code != 200 or not reply.json().get("job_id"):
                    errors.append(f"decision {approval_id}: {reply.status_code} {reply.text[:200]}")
                    continue
                job_id = reply.json()["job_id"]
                approved.sent[job_id], approved.answered[job_id] = sent, answered
                job_wait(job_id)
                sent = time.time()
                reply = client.post(
                    "/api/jobs",
                    json={"tool": "noop", "args": {}, "session_id": session_id},
                    headers={"Idempotency-Key": uuid.uuid4().hex},
                )
                answered = time.time()
                if reply.status_code != 202:
                    errors.append(f"POST /api/jobs: {reply.status_code} {reply.text[:200]}")
                    continue
                job_id = reply.json()["job_id"]
                direct.sent[job_id], direct.answered[job_id] = sent, answered
                job_wait(job_id)
        finally:
            for client in clients.values():
                client.close()
            connections.close_all()

    with ThreadPoolExecutor(cfg.clients) as pool:
        list(pool.map(lane, lanes))
    return approved, direct, errors


def warm_up(serve: Serve, token: str, cfg: Settings) -> None:
    """A job on every tool worker first, so no measured job waits for a horse's fork."""
    with api(serve.url, token) as client:
        jobs = []
        for _ in range(2 * cfg.tool_workers):
            reply = client.post(
                "/api/jobs",
                json={"tool": "noop", "args": {}},
                headers={"Idempotency-Key": uuid.uuid4().hex},
            )
            assert reply.status_code == 202, reply.text
            jobs.append(reply.json()["job_id"])
    for job_id in jobs:
        job_wait(job_id)


# --- printing ---------------------------------------------------------------------------


def ms(values: list[float], q: float) -> str:
    return f"{1000 * percentile(values, q):,.0f}" if values else "—"


def ms1(values: list[float], q: float) -> str:
    return f"{1000 * percentile(values, q):,.1f}" if values else "—"


def print_chat(name: str, step: Step, baseline: Step | None) -> None:
    ratio = ""
    if baseline is not None and baseline.ttft and step.ttft:
        ratio = f"{percentile(step.ttft, 0.95) / percentile(baseline.ttft, 0.95):.2f}x"
    cpu = "  ".join(
        f"{role} {100 * share:.0f}%"
        for role, share in step.cpu.items()
        if role != "box" and share >= 0.01
    )
    ours = sum(share for role, share in step.cpu.items() if role != "box")
    cpu += f"; others on the box {100 * max(0.0, step.cpu['box'] - ours):.0f}%"
    print(
        f"  {name:<28} {ms(step.ttft, 0.5):>8} {ms(step.ttft, 0.95):>8} {ratio:>7}"
        f" {f'{len(step.ttft)}/{step.messages}':>11} {len(step.errors):>7}   {cpu}",
        flush=True,
    )
    for line in step.errors[:5]:
        print(f"      error: {line}")


def print_holdings(columns: list[tuple[str, dict[str, int]]]) -> bool:
    """A table of holdings, one column each: at rest without the requests, at rest with
    them (twice), then peaks. Returns whether the requests held nothing more at rest."""
    print("  " + " " * 26 + "".join(f"{title:>21}" for title, _ in columns) + f"{'extra':>7}")
    without = columns[0][1]
    ok = True
    for name in without:
        extra = max(columns[1][1][name], columns[2][1][name]) - without[name]
        ok &= extra <= 0
        cells = "".join(f"{values.get(name, 0):>21}" for _, values in columns)
        print(f"  {name:<26}{cells}{extra:>+7}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: small and short")
    cfg = Settings.from_environment(parser.parse_args().quick)
    scratch = Path(tempfile.mkdtemp(prefix="agentsite-bench-approvals-"))
    owned = scratch_environment(scratch, name="approvals", extra_tools="tests.jobs.tools_for_tests")
    os.environ["AGENTSITE_MODEL"] = "offline"  # the users' traffic stays on this machine
    os.environ.setdefault("AGENTSITE_QUOTA_PENDING_APPROVALS", "0")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from sessions.models import Approval

    call_command("migrate", interactive=False, verbosity=0)
    tokens_path = scratch / "tokens.json"
    api_tokens_file(cfg.users, tokens_path, username_prefix="load-user")
    tokens: list[str] = json.loads(tokens_path.read_text())
    pending_total = cfg.users * cfg.per_user
    call_s = settings.AGENTSITE_OFFLINE_LATENCY[0]
    database = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(
        f"{cfg.users} users, a message every {cfg.message_every.replace(',', '-')} s each,"
        f" {cfg.phase_s:g} s phases; {pending_total:,} pending requests"
        f" ({cfg.per_user} a user); {cfg.decisions} decisions by {cfg.clients} clients;"
        f" offline model {call_s:g} s before its first token; 1 turn worker,"
        f" {cfg.tool_workers} tool workers; {database}; logs in {scratch}",
        flush=True,
    )
    passed = True
    try:
        with Serve(scratch, tool_workers=cfg.tool_workers, turn_workers=1) as serve:
            print("\nchat" + " " * 25 + "TTFT p50      p95   p95/base  first tokens  errors   CPU")
            baseline, peak_without = chat(serve, scratch, tokens_path, cfg, "baseline")
            print_chat("no pending request", baseline, None)
            settle("the processes at rest", idle)
            rest_without = holdings(serve.proc.pid)

            took = ask_for_tests(serve, tokens, cfg)
            settle("the processes at rest", idle)
            rest_with = holdings(serve.proc.pid)
            pending, peak_with = chat(serve, scratch, tokens_path, cfg, "pending")
            print_chat(f"{pending_total:,} pending requests", pending, baseline)
            still = Approval.objects.filter(status="pending", tool="run_tests").count()
            ratio = (
                percentile(pending.ttft, 0.95) / percentile(baseline.ttft, 0.95)
                if pending.ttft and baseline.ttft
                else float("inf")
            )
            passed &= ratio <= TTFT_RATIO_TARGET and not baseline.errors and not pending.errors
            print(
                f"  ({pending_total:,} requests made by the agents' start_run_tests in"
                f" {took:.0f} s; {still:,} still pending after the phase;"
                f" target p95 ≤ {TTFT_RATIO_TARGET}x the baseline's: "
                f"{'met' if ratio <= TTFT_RATIO_TARGET else 'MISSED'})"
            )
            settle("the processes at rest", idle)
            rest_after = holdings(serve.proc.pid)

            print("\nwhat the processes hold")
            held = print_holdings(
                [
                    ("rest, no request", rest_without),
                    ("rest, pending", rest_with),
                    ("rest, pending, chat", rest_after),
                    ("peak, chat", peak_without),
                    ("peak, chat + pending", peak_with),
                ]
            )
            passed &= held
            print(
                "  (rest: the processes idle after the phase before; extra: the most at rest"
                " with the requests pending less at rest without them; target 0: "
                f"{'met' if held else 'MISSED'})"
            )

            warm_up(serve, tokens[0], cfg)
            approved, direct, errors = decide_and_start(serve, tokens, cfg)
    finally:
        processes_stop(owned)
    a_answer, a_mark, a_handed, a_trip = approved.delays()
    d_answer, d_mark, d_handed, d_trip = direct.delays()
    print(
        f"\njob start ({len(a_answer)} approvals and {len(d_answer)} direct starts of"
        f" noop, {cfg.clients} clients, {cfg.tool_workers} tool workers)"
        + " " * 4
        + "p50 (ms)   p95 (ms)"
    )
    rows = [
        ("decision's 200 → started_at", a_answer),
        ("POST /api/jobs's 202 → started_at", d_answer),
        ("decided_at → started_at", a_mark),
        ("created_at → started_at", d_mark),
        ("decided_at → handed to RQ", a_handed),
        ("created_at → handed to RQ", d_handed),
        ("decision round trip", a_trip),
        ("POST /api/jobs round trip", d_trip),
    ]
    for name, values in rows:
        print(f"  {name:<40} {ms1(values, 0.5):>10} {ms1(values, 0.95):>10}")
    p95 = percentile(a_answer, 0.95) if a_answer else float("inf")
    if a_answer and d_answer:
        print(
            "  what the approval adds, response → started_at: p50"
            f" {1000 * (statistics.median(a_answer) - statistics.median(d_answer)):+.1f} ms,"
            f" p95 {1000 * (percentile(a_answer, 0.95) - percentile(d_answer, 0.95)):+.1f} ms;"
            " server's mark → started_at: p50"
            f" {statistics.median(a_mark) / statistics.median(d_mark):.2f}x,"
            f" p95 {percentile(a_mark, 0.95) / percentile(d_mark, 0.95):.2f}x"
        )
    print(
        f"  target: decision → started p95 ≤ {1000 * START_P95_TARGET_S:.0f} ms: "
        f"{'met' if p95 <= START_P95_TARGET_S else 'MISSED'}"
    )
    for line in errors[:5]:
        print(f"  error: {line}")
    passed &= p95 <= START_P95_TARGET_S and not errors
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
