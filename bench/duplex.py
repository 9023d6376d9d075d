"""The full-duplex agent loop against its baselines, measured in the same run.

1. Three 400 ms blocking tools in one model response: gathered (the loop) vs
   one after the other. Target: gathered ≤ 1.15x the slowest tool.
2. Time to the first assistant token for a user message while 10 long jobs run
   in the same session vs on an idle system (offline model with a simulated
   0.3 s call latency). Target: loaded ≤ 1.2x idle.
3. Batching: job completions arriving at 1 and at 40 per minute for a few
   simulated minutes against the offline model with a simulated latency,
   batched (the router) vs one run per trigger (AGENTSITE_MAX_BATCH=1). Prints
   mean batch size, runs per trigger and mean time per decision (from a
   trigger's arrival to the end of the run that decided on it), in simulated
   seconds. Target at 40/min: batch ≥ 2.5, time per decision ≤ 0.3x unbatched.

The idle baseline of (2) is sampled before and after the loaded phase;
BENCH_PARTS=1,2,3 chooses the parts. Simulated time runs BENCH_TIME_SCALE
(default 10) times faster than the wall clock: latencies and arrival
intervals are divided by it. Uses a scratch SQLite database (or
BENCH_DATABASE_URL) and REDIS_URL, or an embedded Redis.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.support import (
    BASE_DIR,
    process_start,
    processes_stop,
    scratch_environment,
    workers_wait,
)

TIME_SCALE = float(os.environ.get("BENCH_TIME_SCALE", "10"))
SIM_MINUTES = float(os.environ.get("BENCH_SIM_MINUTES", "3"))
TTFT_SAMPLES = int(os.environ.get("BENCH_TTFT_SAMPLES", "15"))
LONG_JOBS = 10
# Simulated model latency for the batching experiment: per call, per input and output token.
SIM_LATENCY = (4.0, 0.0002, 0.02)


class Workers:
    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, queue: str, count: int, **env: str) -> list[subprocess.Popen[bytes]]:
        from sessions.worker import TURN_WORKER_ARGS

        argv = [*TURN_WORKER_ARGS] if queue == "turns" else ["rqworker", queue]
        manage = str(BASE_DIR / "manage.py")
        started = [
            process_start(
                [manage, *argv, "-v", "0"],
                log=self.scratch / "workers.log",
                env={**os.environ, **env},
            )
            for _ in range(count)
        ]
        self.procs += started
        workers_wait(queue, count, within_s=60)
        return started

    def stop(self, procs: list[subprocess.Popen[bytes]] | None = None) -> None:
        processes_stop(list(procs if procs is not None else self.procs), grace_s=15)


def ratio_line(name: str, value: float, baseline: float, target: str, ok: bool) -> None:
    verdict = "ok" if ok else "MISSES TARGET"
    print(f"  {name}: {value / baseline:.2f}x baseline (target {target}) — {verdict}")


# --- 1. gathered blocking tools ---------------------------------------------------


def bench_gather(user: Any) -> None:
    from sessions.conversation import Conversation
    from sessions.llm import ToolUse
    from sessions.loop import Turn
    from sessions.models import AgentSession, Run
    from sessions.runtime import TurnRuntime

    session = AgentSession.objects.create(owner=user, model="offline")
    run = Run.objects.create(session=session, owner=user)
    turn = Turn(
        runtime=TurnRuntime(close_connections=True),
        session=session,
        run_id=run.id,
        conversation=Conversation(system="", tools=[]),
    )
    calls = [ToolUse(id=f"t{i}", name="pause_read", input={"seconds": 0.4}) for i in range(3)]

    def timed(batches: list[list[ToolUse]]) -> float:
        start = time.perf_counter()
        for batch in batches:
            asyncio.run(turn.tools_run(batch))
        return time.perf_counter() - start

    timed([calls[:1]])  # warm up threads and the database
    sequential = statistics.median(timed([[c] for c in calls]) for _ in range(3))
    gathered = statistics.median(timed([calls]) for _ in range(3))
    from sessions.runs import run_cancel

    run_cancel(run_id=run.id)  # it only hosted the tool events
    print("1. three 400 ms blocking tools in one response")
    print(f"  sequential {1000 * sequential:7.0f} ms   gathered {1000 * gathered:7.0f} ms")
    ratio_line("gathered vs the slowest tool (400 ms)", gathered, 0.4, "≤ 1.15", gathered <= 0.46)
    print(f"  sequential / gathered = {sequential / gathered:.2f}x")


# --- 2. time to first token under load ---------------------------------------------


def first_token_s(session: Any, text: str) -> float:
    from sessions.models import Run
    from sessions.services import message_post

    posted = time.time()
    _, run = message_post(session=session, text=text)
    while True:
        run = Run.objects.get(pk=run.id)
        if run.status in Run.TERMINAL:
            break
        time.sleep(0.01)
    if run.status != Run.Status.COMPLETED or run.first_token_at is None:
        raise SystemExit(f"run {run.id} ended {run.status}: {run.error}")
    return run.first_token_at.timestamp() - posted


def ttft_samples(session: Any) -> list[float]:
    return [first_token_s(session, f"hello {i}") for i in range(TTFT_SAMPLES)]


def bench_first_token(user: Any, workers: Workers) -> None:
    from jobs.models import Job
    from jobs.services import job_create
    from sessions.services import session_create

    turns = workers.start("turns", 1, AGENTSITE_OFFLINE_CALL_S="0.3")
    tools = workers.start("tools", LONG_JOBS)
    idle_session = session_create(owner=user, model="offline")
    for i in range(2):
        first_token_s(idle_session, f"warm up {i}")
    idle_before = ttft_samples(idle_session)

    busy = session_create(owner=user, model="offline")
    jobs = [
        job_create(
            owner=user,
            tool="sleepy",
            args={"seconds": 110, "steps": 220},
            idempotency_key=f"long-{i}",
            session_id=busy.id,
        )[0]
        for i in range(LONG_JOBS)
    ]
    deadline = time.monotonic() + 30
    while Job.objects.filter(pk__in=[j.id for j in jobs], status="running").count() < LONG_JOBS:
        if time.monotonic() > deadline:
            raise SystemExit("the long jobs did not all start")
        time.sleep(0.1)
    loaded = statistics.median(ttft_samples(busy))
    from jobs.lifecycle import job_request_cancel

    for job in jobs:
        job_request_cancel(job_id=job.id)
    # Let the cancellations and the turns they wake finish before the workers stop.
    while Job.objects.filter(pk__in=[j.id for j in jobs]).exclude(status__in=Job.TERMINAL):
        time.sleep(0.1)
    runs_drain()
    # Idle again after the load, so that drift on a shared machine weighs on both sides.
    idle = statistics.median(idle_before + ttft_samples(idle_session))
    print(
        f"2. time to first token, offline model with a 0.3 s simulated call, median of "
        f"{TTFT_SAMPLES} loaded and {2 * TTFT_SAMPLES} idle samples"
    )
    print(f"  idle {1000 * idle:7.0f} ms   while {LONG_JOBS} long jobs run {1000 * loaded:7.0f} ms")
    ratio_line("loaded vs idle", loaded, idle, "≤ 1.2", loaded <= 1.2 * idle)
    workers.stop(turns + tools)


# --- 3. batching --------------------------------------------------------------------


def trigger_payload(i: int) -> dict[str, Any]:
    return {
        "event": "job_completed",
        "job_id": f"job_bench{i:05d}",
        "tool": "run_tests",
        "status": "done",
        "progress": {"fraction": 1.0, "message": ""},
        "summary": f"{400 + i % 17} passed, {i % 4} failed (tests/test_{i % 9}.py)",
        "error": None,
        "partial_count": 0,
    }


def runs_drain() -> None:
    """Wait until no run is live anywhere, so one configuration never pays for another."""
    from sessions.models import Run

    while Run.objects.filter(status__in=["queued", "running"]).exists():
        time.sleep(0.05)


def batching_run(user: Any, per_minute: float, batched: bool) -> dict[str, float]:
    from sessions.inbox import inbox_append
    from sessions.models import Event, Run
    from sessions.services import session_create

    runs_drain()
    session = session_create(owner=user, model="offline")
    interval = 60.0 / per_minute / TIME_SCALE
    count = max(1, round(SIM_MINUTES * per_minute))
    start = time.monotonic()
    for i in range(count):
        time.sleep(max(0.0, start + i * interval - time.monotonic()))
        inbox_append(session_id=session.id, kind="job_event", payload=trigger_payload(i))
    while Run.objects.filter(session=session, status__in=["queued", "running"]).exists() or (
        Event.objects.filter(session=session, pending=True).exists()
    ):
        time.sleep(0.02)
    runs = list(Run.objects.filter(session=session))
    failed = [r for r in runs if r.status != Run.Status.COMPLETED]
    if failed:
        raise SystemExit(f"{len(failed)} runs did not complete: {failed[0].error}")
    # Completed runs have both timestamps; every trigger was consumed by one of them.
    finished = {r.id: r.finished_at.timestamp() for r in runs if r.finished_at}
    triggers = list(Event.objects.filter(session=session, kind="job_event"))
    waits = [
        (finished[str(e.consumed_by_id)] - e.created_at.timestamp()) * TIME_SCALE for e in triggers
    ]
    model = TIME_SCALE * sum(
        r.finished_at.timestamp() - r.started_at.timestamp()
        for r in runs
        if r.finished_at and r.started_at
    )
    return {
        "triggers": len(triggers),
        "runs": len(runs),
        "batch": statistics.mean(r.batch_size for r in runs),
        "runs_per_trigger": len(runs) / len(triggers),
        "decision_s": statistics.mean(waits),
        "model_s_per_trigger": model / len(triggers),
    }


def bench_batching(user: Any, workers: Workers) -> None:
    call_s, input_s, output_s = SIM_LATENCY
    env = {
        "AGENTSITE_OFFLINE_CALL_S": str(call_s / TIME_SCALE),
        "AGENTSITE_OFFLINE_INPUT_TOKEN_S": str(input_s / TIME_SCALE),
        "AGENTSITE_OFFLINE_OUTPUT_TOKEN_S": str(output_s / TIME_SCALE),
    }
    print(
        f"3. batching: {SIM_MINUTES:g} simulated minutes at {TIME_SCALE:g}x speed; simulated "
        f"latency {call_s:g} s a call + {1000 * input_s:g} ms an input token + "
        f"{1000 * output_s:g} ms an output token"
    )
    results: dict[tuple[float, bool], dict[str, float]] = {}
    for batched in (True, False):
        turns = workers.start("turns", 1, **env, AGENTSITE_MAX_BATCH="0" if batched else "1")
        for per_minute in (1.0, 40.0):
            results[(per_minute, batched)] = batching_run(user, per_minute, batched)
        workers.stop(turns)
    for per_minute in (1.0, 40.0):
        print(f"  {per_minute:g} trigger(s)/min")
        for batched in (True, False):
            r = results[(per_minute, batched)]
            label = "batched      " if batched else "one per run  "
            print(
                f"    {label} {r['triggers']:4.0f} triggers {r['runs']:4.0f} runs  "
                f"mean batch {r['batch']:5.2f}  runs/trigger {r['runs_per_trigger']:4.2f}  "
                f"time per decision {r['decision_s']:7.1f} s  "
                f"model time per trigger {r['model_s_per_trigger']:5.1f} s"
            )
    fast, slow = results[(40.0, True)], results[(40.0, False)]
    print(
        f"  at 40/min: mean batch {fast['batch']:.2f} (target ≥ 2.5) — "
        f"{'ok' if fast['batch'] >= 2.5 else 'MISSES TARGET'}"
    )
    ratio_line(
        "time per decision, batched vs one run per trigger",
        fast["decision_s"],
        slow["decision_s"],
        "≤ 0.3",
        fast["decision_s"] <= 0.3 * slow["decision_s"],
    )


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="agentsite-bench-duplex-"))
    owned = scratch_environment(
        scratch,
        name="duplex",
        extra_tools="tests.jobs.tools_for_tests,tests.sessions.tools_for_tests",
    )
    import django

    django.setup()
    workers = Workers(scratch)
    try:
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        call_command("migrate", interactive=False, verbosity=0)
        user = get_user_model().objects.create_user(f"bench-{os.getpid()}", password="bench-pw-123")
        parts = os.environ.get("BENCH_PARTS", "1,2,3").split(",")
        if "1" in parts:
            bench_gather(user)
        if "2" in parts:
            bench_first_token(user, workers)
        if "3" in parts:
            bench_batching(user, workers)
        return 0
    finally:
        workers.stop()
        processes_stop(owned)


if __name__ == "__main__":
    sys.exit(main())
