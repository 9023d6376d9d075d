"""Sustained mixed load: how many active users one box carries.

``manage.py serve`` — what ``make run`` starts: daphne, one turn worker, one
tool worker and the scheduler — runs on a scratch SQLite database (or
``BENCH_DATABASE_URL``) and ``REDIS_URL`` or an embedded Redis. Locust, in
headless mode, plays N users (bench/_locust_users.py), each with an account, an
API token and a session of its own: a message every 10-20 s, a 2-5 s tool job
(the test tool ``sleepy``) in the session every minute, the session followed
over the websocket, the job polled while it runs and once it has ended.

N steps up through ``BENCH_LOAD_USERS`` (default 10,25,50,100,150,200,300,400),
``BENCH_LOAD_STEP_S`` seconds of traffic each (default 180) and up to
``BENCH_LOAD_DRAIN_S`` (30) for the replies and job ends still owed, stopping
after the first step that misses a target (``BENCH_LOAD_KEEP_GOING=1`` runs
them all). ``BENCH_LOAD_TOOL_WORKERS`` and ``BENCH_LOAD_TURN_WORKERS`` (1 each,
as ``make run``) are for finding which process sets the limit. For each step it prints time to
first token p50/p95 (the message POST → the first text of its run on the
user's websocket), the same minus the offline model's configured delay before
its first token (``AGENTSITE_OFFLINE_CALL_S``, 0 unless the environment sets
it), job queue wait p95 (``started_at - created_at`` of each job; beside it the
p95 of the jobs that found a tool worker free, and how busy the tool workers
were: a job that arrives while every tool worker runs another waits for one),
errors, and the CPU each process used, as a share of one core.

The targets: TTFT p95 at most 500 ms over the model's configured delay, queue
wait p95 at most 1 s, no errors (an unexpected HTTP status, a websocket that
dropped, a gap in a stream, a reply, job end or log event that never reached
the websocket). It prints the largest N that meets them all. The baseline,
measured first in the same run: the same behaviour with one user, to which each
step's p95 is compared.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from agentsite.core.embedded_redis import free_port
from bench.support import (
    BASE_DIR,
    TICKS_PER_S,
    api_tokens_file,
    children_of,
    command_line,
    cpu_ticks,
    live_children_ticks,
    parents,
    percentile,
    processes_stop,
    pss_mib,
    scratch_environment,
)

LEVELS = [
    int(n)
    for n in os.environ.get("BENCH_LOAD_USERS", "10,25,50,100,150,200,300,400").split(",")
    if n.strip()
]
STEP_S = float(os.environ.get("BENCH_LOAD_STEP_S", "180"))
# make run starts one of each; more only to see which process sets the limit.
TOOL_WORKERS = int(os.environ.get("BENCH_LOAD_TOOL_WORKERS", "1"))
TURN_WORKERS = int(os.environ.get("BENCH_LOAD_TURN_WORKERS", "1"))
DRAIN_S = float(os.environ.get("BENCH_LOAD_DRAIN_S", "30"))
# A step past the limit only costs time; set it to draw the whole curve anyway.
KEEP_GOING = os.environ.get("BENCH_LOAD_KEEP_GOING", "") not in ("", "0")
TTFT_OVER_MODEL_P95_S = 0.5
QUEUE_WAIT_P95_S = 1.0
LOCUSTFILE = BASE_DIR / "bench" / "_locust_users.py"
# Which of serve's children is which, by a word of its command line.
ROLES = (("daphne", "web"), ("TurnWorker", "turns"), ("rqworker", "tools"), ("scheduler", "cron"))


def cpu_s(pid: int, table: dict[int, int]) -> float:
    """CPU time of a process and of its work horses: the ones it reaped and the live one."""
    return (sum(cpu_ticks(pid)) + live_children_ticks(pid, table)) / TICKS_PER_S


def children(pid: int) -> dict[str, int]:
    """serve's processes by role, numbered when there are several (read each step: serve
    restarts one that exits)."""
    by_role: dict[str, list[int]] = {}
    for child in children_of(pid, parents()):
        try:
            argv = command_line(child)
        except OSError:
            continue
        role = next((name for word, name in ROLES if word in argv), None)
        if role:
            by_role.setdefault(role, []).append(child)
    named: dict[str, int] = {}
    for _, role in ROLES:
        pids = sorted(by_role.get(role, []))
        for i, child in enumerate(pids, 1):
            named[role if len(pids) == 1 else f"{role}{i}"] = child
    return named


def memory_line(serve_pid: int) -> str:
    """PSS by role, a tool worker counted with its horse; shared pages are not double-counted."""
    totals: dict[str, list[float]] = {}
    horses = 0
    table = parents()
    for name, pid in children(serve_pid).items():
        role = name.rstrip("0123456789")
        try:
            pss = pss_mib(pid)
            for child in children_of(pid, table) if role == "tools" else []:
                pss += pss_mib(child)
                horses += 1
        except OSError:
            continue
        totals.setdefault(role, []).append(pss)
    parts = []
    for role, values in totals.items():
        each = f", {sum(values) / len(values):.0f} each" if len(values) > 1 else ""
        parts.append(f"{role} {sum(values):.0f}{each}")
    total = sum(sum(values) for values in totals.values())
    return (
        f"memory (PSS, MiB) after the last step: {', '.join(parts)}"
        f" (tools with {horses} live horses); all {total:.0f}"
    )


class Serve:
    """``manage.py serve`` on a free port, stopped (with everything it started) on exit."""

    def __init__(
        self, scratch: Path, *, tool_workers: int = TOOL_WORKERS, turn_workers: int = TURN_WORKERS
    ) -> None:
        self.scratch = scratch
        self.tool_workers = tool_workers
        self.turn_workers = turn_workers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Serve:
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            # ensure_login then keeps no password file in the project.
            "AGENTSITE_ADMIN_PASSWORD": secrets.token_urlsafe(12),
        }
        self.log = open(self.scratch / "serve.log", "ab")
        self.proc = subprocess.Popen(
            [
                *(sys.executable, str(BASE_DIR / "manage.py"), "serve", "--port", str(self.port)),
                *("--tool-workers", str(self.tool_workers)),
                *("--turn-workers", str(self.turn_workers)),
            ],
            cwd=BASE_DIR,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.wait_healthy()
        return self

    def wait_healthy(self) -> None:
        import httpx

        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        self.__exit__()
        raise SystemExit(f"the app did not become healthy; see {self.scratch / 'serve.log'}")

    def __exit__(self, *exc: object) -> None:
        started = children(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)  # serve stops its children, then itself
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for pid in started.values():  # each leads a process group of its own
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.log.close()


@dataclass
class Step:
    users: int
    ttft: list[float] = field(default_factory=list)
    queue_wait: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    messages: int = 0
    jobs: int = 0
    cpu: dict[str, float] = field(default_factory=dict)  # share of one core
    free_worker_wait: list[float] = field(default_factory=list)
    tools_busy: float = 0.0  # share of the tool workers' time spent running jobs


def tool_occupancy(step: Step, since: datetime, until: datetime, workers: int) -> None:
    """Which jobs found a tool worker free, and how busy the tool workers were.

    A job that arrives while every tool worker runs another waits for one to
    finish: with make run's single worker that alone can exceed the target.
    These figures tell that wait apart from the system's own.
    """
    from jobs.models import Job

    rows = list(
        Job.objects.filter(
            created_at__gte=since, created_at__lt=until, started_at__isnull=False
        ).values_list("created_at", "started_at", "finished_at")
    )
    for created, started, _ in rows:
        running = sum(1 for _, s, f in rows if s <= created and (f is None or f > created))
        if running < workers:
            step.free_worker_wait.append((started - created).total_seconds())
    busy = sum((f - s).total_seconds() for _, s, f in rows if f is not None)
    step.tools_busy = busy / ((until - since).total_seconds() * workers)


def run_step(
    serve: Serve,
    scratch: Path,
    tokens_path: Path,
    users: int,
    *,
    active_s: float = STEP_S,
    drain_s: float = DRAIN_S,
    name: str = "",
    env: dict[str, str] | None = None,
) -> Step:
    """``users`` Locust users for ``active_s`` (+ up to ``drain_s``); ``env`` reaches the
    users (bench/_locust_users.py reads its pace there), ``name`` its files."""
    name = name or str(users)
    results = scratch / f"results-{name}.json"
    results.unlink(missing_ok=True)
    env = {
        **os.environ,
        **(env or {}),
        "BENCH_LOAD_TOKENS": str(tokens_path),
        "BENCH_LOAD_RESULTS": str(results),
        "BENCH_LOAD_ACTIVE_S": str(active_s),
        "BENCH_LOAD_DRAIN_S": str(drain_s),
    }
    run_time = f"{active_s + drain_s + 15:.0f}s"
    argv = [
        *(sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless"),
        *("--host", serve.url, "--users", str(users)),
        *("--spawn-rate", str(max(1.0, users / 10)), "--run-time", run_time),
        *("--only-summary", "--exit-code-on-error", "0", "--loglevel", "WARNING"),
        *("--csv", str(scratch / f"locust-{name}")),
    ]
    pids = children(serve.proc.pid)
    table = parents()
    before = {role: cpu_s(pid, table) for role, pid in pids.items()}
    client_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started, since = time.monotonic(), datetime.now(UTC)
    with open(scratch / f"locust-{name}.log", "wb") as log:
        code = subprocess.call(argv, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT)
    elapsed = time.monotonic() - started
    step = Step(users)
    tool_occupancy(step, since, datetime.now(UTC), serve.tool_workers)
    table = parents()
    for role, pid in pids.items():
        try:
            step.cpu[role] = (cpu_s(pid, table) - before[role]) / elapsed
        except OSError:
            step.errors.append(f"{role} (pid {pid}) exited during the step")
    client = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = client.ru_utime + client.ru_stime - client_before.ru_utime - client_before.ru_stime
    step.cpu["locust"] = used / elapsed
    if code != 0 or not results.exists():
        step.errors.append(f"locust exited with {code}; see {scratch / f'locust-{name}.log'}")
        return step
    data = json.loads(results.read_text())
    step.ttft, step.queue_wait = data["ttft"], data["queue_wait"]
    step.errors += data["errors"]
    step.messages, step.jobs = data["messages"], data["jobs"]
    return step


COLUMNS = (
    ("users", 5),
    ("TTFT p50", 9),
    ("p95", 6),
    ("p95/1u", 7),
    ("p95-model", 10),
    ("queue p95", 10),
    ("free-worker p95", 16),
    ("tools busy", 11),
    ("errors", 7),
    ("ttft/msgs", 10),
    ("jobs", 8),
    ("pass", 5),
)


def row(cells: list[str]) -> str:
    # A space between cells, so that a figure wider than its column never runs into the next.
    return "  " + " ".join(
        cell.rjust(width) for cell, (_, width) in zip(cells, COLUMNS, strict=False)
    )


def ms(values: list[float], q: float, minus: float = 0.0) -> str:
    return f"{1000 * (percentile(values, q) - minus):.0f}" if values else "—"


def passes(step: Step, model_delay: float) -> bool:
    return (
        bool(step.ttft)
        and bool(step.queue_wait)
        and percentile(step.ttft, 0.95) - model_delay <= TTFT_OVER_MODEL_P95_S
        and percentile(step.queue_wait, 0.95) <= QUEUE_WAIT_P95_S
        and not step.errors
    )


def print_step(step: Step, model_delay: float, baseline: Step | None) -> None:
    ratio = "—"
    if baseline is not None and baseline.ttft and step.ttft:
        ratio = f"{percentile(step.ttft, 0.95) / percentile(baseline.ttft, 0.95):.2f}x"
    cells = [
        str(step.users),
        ms(step.ttft, 0.5),
        ms(step.ttft, 0.95),
        ratio,
        ms(step.ttft, 0.95, model_delay),
        ms(step.queue_wait, 0.95),
        ms(step.free_worker_wait, 0.95),
        f"{100 * step.tools_busy:.0f}%",
        str(len(step.errors)),
        f"{len(step.ttft)}/{step.messages}",
        f"{len(step.queue_wait)}/{step.jobs}",
        "yes" if passes(step, model_delay) else "NO",
    ]
    cpu = "  ".join(f"{role} {100 * share:.0f}%" for role, share in step.cpu.items())
    print(row(cells) + f"   {cpu}", flush=True)
    for line in step.errors[:5]:
        print(f"          error: {line}")
    if len(step.errors) > 5:
        print(f"          … and {len(step.errors) - 5} more")


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="agentsite-bench-load-"))
    owned = scratch_environment(scratch, name="load", extra_tools="tests.jobs.tools_for_tests")
    os.environ["AGENTSITE_MODEL"] = "offline"  # the users' traffic stays on this machine
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    tokens_path = scratch / "tokens.json"
    api_tokens_file(max([1, *LEVELS]), tokens_path, username_prefix="load-user")
    call_s, input_s, output_s = settings.AGENTSITE_OFFLINE_LATENCY
    database = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(
        f"offline model: {call_s:g} s before the first token (AGENTSITE_OFFLINE_CALL_S),"
        f" {input_s:g} s per input token, {output_s:g} s per output token;"
        f" {TURN_WORKERS} turn worker(s), {TOOL_WORKERS} tool worker(s);"
        f" steps of {STEP_S:g} s (+ up to {DRAIN_S:g} s drain); {database};"
        f" logs in {scratch}"
    )
    if input_s or output_s:
        print("  (only AGENTSITE_OFFLINE_CALL_S is subtracted below; the per-token delays are not)")
    print(row([name for name, _ in COLUMNS]) + "   CPU (share of one core)")
    print(row(["", "(ms)", "(ms)", "", "(ms)", "(ms)", "(ms)"]))
    try:
        with Serve(scratch) as serve:
            baseline = run_step(serve, scratch, tokens_path, 1)
            print_step(baseline, call_s, None)
            steps: list[Step] = []
            for users in LEVELS:
                time.sleep(5)  # let the previous step's last turns and jobs settle
                step = run_step(serve, scratch, tokens_path, users)
                steps.append(step)
                print_step(step, call_s, baseline)
                if not passes(step, call_s) and not KEEP_GOING:
                    break
            print(memory_line(serve.proc.pid))
    finally:
        processes_stop(owned)
    largest = 0
    for step in steps:  # the curve up to the first miss
        if not passes(step, call_s):
            break
        largest = step.users
    print(
        f"largest N with TTFT p95 ≤ {1000 * TTFT_OVER_MODEL_P95_S:.0f} ms over the model's"
        f" {call_s:g} s, queue wait p95 ≤ {QUEUE_WAIT_P95_S:g} s and no errors: "
        + (str(largest) if largest else "none")
    )
    return 0 if passes(baseline, call_s) and largest else 1


if __name__ == "__main__":
    sys.exit(main())
