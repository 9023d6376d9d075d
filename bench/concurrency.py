"""Many conversations at once: time to first token as the number of users grows.

N simulated users, each with a session of their own, follow it over SSE and
send a message every 6-10 s; the offline model waits 2 s before its first
token, as a hosted model does. For N = 1, 10, 50, 100, 200 (``BENCH_USERS``)
the benchmark prints time to first token (from the POST to the first
``assistant_delta`` of that run on the user's stream) p50/p95/max, errors, the
most turns that overlapped, and the turn worker's resident memory.

The processes are ``make run``'s defaults — one daphne, one turn worker
(``TurnWorker``), one tool worker, the scheduler — on a scratch SQLite
database (or ``BENCH_DATABASE_URL``) and ``REDIS_URL`` or an embedded Redis.
The simulated users speak HTTP through aiohttp, whose parser is in C: they share
the box with the server, and a heavier client (httpx: docs/benchmarks.md) would
take the cores the server needs at 200 users.

The baseline, measured in the same run: the same load against a forking
turn worker (RQ's worker, one turn at a time), for N = 1 and 10.

Targets: at 50 users TTFT p95 ≤ 1.3x the 1-user value, at 200 users ≤ 2x,
no errors, turn worker RSS growth ≤ 2 MB per concurrent turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from agentsite.core.embedded_redis import free_port
from bench.support import (
    BASE_DIR,
    api_tokens,
    cpu_seconds,
    percentile,
    process_start,
    processes_stop,
    rss_mib,
    scratch_environment,
)

LEVELS = [int(n) for n in os.environ.get("BENCH_USERS", "1,10,50,100,200").split(",")]
BASELINE_LEVELS = [
    int(n) for n in os.environ.get("BENCH_BASELINE_USERS", "1,10").split(",") if n.strip()
]
MESSAGES = int(os.environ.get("BENCH_MESSAGES", "3"))
FIRST_TOKEN_S = os.environ.get("BENCH_FIRST_TOKEN_S", "2")
REPLY_TIMEOUT_S = 60.0
# More turn workers than make run's one: only to see where a level's limit lies
# (the RSS and CPU columns then describe the first worker).
TURN_WORKERS = int(os.environ.get("BENCH_TURN_WORKERS", "1"))


class Stack:
    """daphne, a turn worker, a tool worker and the scheduler, as ``make run`` starts them."""

    def __init__(self, scratch: Path, *, concurrent_turns: bool) -> None:
        self.scratch = scratch
        self.concurrent_turns = concurrent_turns
        self.port = free_port()
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *argv: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "AGENTSITE_OFFLINE_CALL_S": FIRST_TOKEN_S, "PYTHONUNBUFFERED": "1"}
        proc = process_start(list(argv), log=self.scratch / "stack.log", env=env)
        self.procs.append(proc)
        return proc

    def __enter__(self) -> Stack:
        from sessions.worker import TURN_WORKER_ARGS

        manage = str(BASE_DIR / "manage.py")
        turn_args = TURN_WORKER_ARGS if self.concurrent_turns else ("rqworker", "turns")
        self.web = self.start(
            "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "agentsite.asgi:application"
        )
        self.turn_worker = self.start(manage, *turn_args)
        for _ in range(TURN_WORKERS - 1):  # scale-out comparisons only
            self.start(manage, *turn_args)
        self.start(manage, "rqworker", "tools", "default")
        self.start(manage, "scheduler")
        self.wait_healthy()
        return self

    def wait_healthy(self) -> None:
        import httpx

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise SystemExit(f"the stack did not become healthy; see {self.scratch / 'stack.log'}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        processes_stop(self.procs, grace_s=30)


@dataclass
class Level:
    users: int
    ttft: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    rss_peak: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)


class User:
    def __init__(self, client: Any, url: str, token: str, level: Level) -> None:
        self.client = client
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}"}
        self.level = level
        self.first_delta: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.finished: dict[str, asyncio.Future[None]] = {}

    def waiter(self, table: dict[str, asyncio.Future[Any]], run_id: str) -> asyncio.Future[Any]:
        return table.setdefault(run_id, asyncio.get_running_loop().create_future())

    async def follow(self, session_id: str, ready: asyncio.Event) -> None:
        url = f"{self.url}/api/sessions/{session_id}/stream"
        forever = aiohttp.ClientTimeout(total=None)
        async with self.client.get(url, headers=self.headers, timeout=forever) as resp:
            ready.set()
            async for raw in resp.content:
                if not raw.startswith(b"data: "):
                    continue
                frame = json.loads(raw[6:])
                # A user waits for each reply before the next message, so the first
                # delta after a send belongs to that send's run.
                if frame["kind"] == "assistant_delta" and not self.first_delta.done():
                    self.first_delta.set_result(time.monotonic())
                elif frame["kind"] == "run_finished":
                    future = self.waiter(self.finished, frame["payload"]["run_id"])
                    if not future.done():
                        future.set_result(None)

    async def chat(self) -> None:
        url = f"{self.url}/api/sessions"
        async with self.client.post(url, json={}, headers=self.headers) as resp:
            if resp.status != 201:
                text = await resp.text()
                self.level.errors.append(f"POST /api/sessions {resp.status}: {text[:200]}")
                return
            session_id = (await resp.json())["session_id"]
        ready = asyncio.Event()
        follower = asyncio.create_task(self.follow(session_id, ready))
        try:
            await asyncio.wait_for(ready.wait(), 30)
            await asyncio.sleep(random.uniform(0, 6))  # users do not all start together
            for i in range(MESSAGES):
                next_at = time.monotonic() + random.uniform(6, 10)
                await self.send(session_id, i)
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        except Exception as exc:
            self.level.errors.append(repr(exc))
        finally:
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)

    async def send(self, session_id: str, i: int) -> None:
        self.first_delta = asyncio.get_running_loop().create_future()
        sent = time.monotonic()
        async with self.client.post(
            f"{self.url}/api/sessions/{session_id}/messages",
            json={"text": f"hello there, message {i}"},
            headers=self.headers,
        ) as resp:
            if resp.status != 202:
                self.level.errors.append(f"POST {resp.status}")
                return
            run_id = (await resp.json())["run_id"]
        self.level.run_ids.append(run_id)
        try:
            first = await asyncio.wait_for(self.first_delta, REPLY_TIMEOUT_S)
            self.level.ttft.append(first - sent)
            await asyncio.wait_for(self.waiter(self.finished, run_id), REPLY_TIMEOUT_S)
        except TimeoutError:
            self.level.errors.append(f"no reply to {run_id}")


async def sample_rss(pid: int, level: Level, stop: asyncio.Event) -> None:
    while not stop.is_set():
        level.rss_peak = max(level.rss_peak, rss_mib(pid))
        await asyncio.sleep(0.5)


async def run_level(stack: Stack, tokens: list[str], users: int) -> Level:
    level = Level(users)
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
        stop = asyncio.Event()
        sampler = asyncio.create_task(sample_rss(stack.turn_worker.pid, level, stop))
        people = [User(client, stack.url, tokens[i], level) for i in range(users)]
        pids = {"turn worker": stack.turn_worker.pid, "daphne": stack.web.pid}
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        client_before = time.process_time()
        await asyncio.gather(*(p.chat() for p in people))
        level.cpu = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
        # The simulated users share the box: their own cost shows how much is left.
        level.cpu["bench client"] = time.process_time() - client_before
        stop.set()
        await sampler
    return level


def max_overlap(run_ids: list[str]) -> int:
    from sessions.models import Run

    edges: list[tuple[float, int]] = []
    for started, finished in Run.objects.filter(pk__in=run_ids).values_list(
        "started_at", "finished_at"
    ):
        if started and finished:
            edges += [(started.timestamp(), 1), (finished.timestamp(), -1)]
    best = current = 0
    for _, step in sorted(edges):
        current += step
        best = max(best, current)
    return best


def report(name: str, levels: list[Level], idle_rss: float) -> None:
    print(f"{name}")
    print("  users  TTFT p50   p95      max   errors  overlap  turn worker RSS (MB)")
    for lv in levels:
        if not lv.ttft:
            print(f"  {lv.users:5d}  no replies  errors {len(lv.errors)}")
            continue
        print(
            f"  {lv.users:5d}  {percentile(lv.ttft, 0.5):6.2f}s {percentile(lv.ttft, 0.95):6.2f}s"
            f" {max(lv.ttft):6.2f}s  {len(lv.errors):6d}  {max_overlap(lv.run_ids):7d}"
            f"  {lv.rss_peak:6.1f} (+{lv.rss_peak - idle_rss:.1f})"
        )
        turns = max(1, len(lv.run_ids))
        print(
            "         CPU per turn: "
            + ", ".join(f"{name} {1000 * sec / turns:.1f} ms" for name, sec in lv.cpu.items())
        )


def verdicts(levels: list[Level], idle_rss: float) -> bool:
    by_users = {lv.users: lv for lv in levels}
    ok = True
    one = by_users.get(1)
    if one is None or not one.ttft:
        print("  (no 1-user level: no ratios)")
        return False
    base = percentile(one.ttft, 0.95)
    for users, target in ((50, 1.3), (200, 2.0)):
        lv = by_users.get(users)
        if lv is None or not lv.ttft:
            continue
        ratio = percentile(lv.ttft, 0.95) / base
        good = ratio <= target
        ok &= good
        print(
            f"  p95 at {users} users / p95 at 1 user = {ratio:.2f} (target ≤ {target}) — "
            + ("ok" if good else "MISSES TARGET")
        )
    errors = sum(len(lv.errors) for lv in levels)
    ok &= errors == 0
    print(f"  errors: {errors} (target 0) — " + ("ok" if errors == 0 else "MISSES TARGET"))
    widest = max(levels, key=lambda lv: max_overlap(lv.run_ids))
    overlap = max_overlap(widest.run_ids)
    if overlap > 1:
        per_turn = (widest.rss_peak - idle_rss) / overlap
        good = per_turn <= 2.0
        ok &= good
        print(
            f"  RSS growth per concurrent turn: {per_turn:.2f} MB at {overlap} turns "
            "(target ≤ 2) — " + ("ok" if good else "MISSES TARGET")
        )
    return ok


def measure(
    scratch: Path, tokens: list[str], levels: list[int], concurrent: bool
) -> tuple[list[Level], float]:
    with Stack(scratch, concurrent_turns=concurrent) as stack:
        asyncio.run(run_level(stack, tokens, 1))  # warm-up: imports, connections, first queries
        idle = rss_mib(stack.turn_worker.pid)
        results = []
        for users in levels:
            results.append(asyncio.run(run_level(stack, tokens, users)))
            print(f"  … {users} users done", flush=True)
    return results, idle


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="agentsite-bench-concurrency-"))
    owned = scratch_environment(scratch, name="concurrency")
    os.environ.setdefault("AGENTSITE_SSE_HEARTBEAT_S", "5")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    tokens = api_tokens(max([*LEVELS, *BASELINE_LEVELS]), username_prefix="bench-user")
    try:
        print(f"{MESSAGES} messages per user, every 6-10 s; {FIRST_TOKEN_S} s to the first token")
        baseline, baseline_idle = [], 0.0
        if BASELINE_LEVELS:
            baseline, baseline_idle = measure(scratch, tokens, BASELINE_LEVELS, concurrent=False)
            report("baseline: forking turn worker, one turn at a time", baseline, baseline_idle)
        levels, idle = measure(scratch, tokens, LEVELS, concurrent=True)
        report("TurnWorker: concurrent turns on one event loop", levels, idle)
        ok = verdicts(levels, idle)
        for lv in baseline:
            match = next((x for x in levels if x.users == lv.users and x.ttft), None)
            if match and lv.ttft:
                ratio = percentile(lv.ttft, 0.95) / percentile(match.ttft, 0.95)
                print(
                    f"  at {lv.users} users the forking worker's p95 is {ratio:.1f}x TurnWorker's"
                )
        return 0 if ok else 1
    finally:
        processes_stop(owned)


if __name__ == "__main__":
    sys.exit(main())
