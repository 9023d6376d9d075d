"""Live streams: fan-out latency, resume correctness, connections per daphne.

1. Latency from a worker process appending an event (``event_append``: the
   database commit and the channel-layer publish) to a websocket client
   receiving its frame through a real daphne, p50/p99, with 1 and with 20
   concurrent streams, next to a raw Redis PUBLISH→SUBSCRIBE round trip
   measured in the same run (targets: p99 ≤ 50 ms with 1 stream, ≤ 150 ms
   with 20).
2. Resume correctness: a client drops its socket 200 times at random moments
   during a long stream and reconnects with its last token each time; counts
   missing and duplicated events (target 0 and 0) and the time from reconnect
   to the first replayed event.
3. Fan-out: 1,000 and 5,000 followers of one session spread over 1 and over 2
   daphne processes, an event a second; delivery p50/p99 (publisher's clock
   to the follower's socket), frames missing, resident memory per connection
   and CPU per delivered frame, next to plain Channels (a consumer that
   forwards a channels_redis ``group_send``, bench/_fanout_raw.py) serving the
   same followers in the same run. Targets (one process): p99 ≤ 100 ms at
   1,000, ≤ 400 ms at 5,000, ≤ 40 KiB per connection.
4. Reconnect storm: 1,000 followers connect at once while messages keep
   coming; when the message posted as they began reached all of them (target
   ≤ 10 s) and the delivery latency in those first 10 s.

Followers are bench/_wsclient.py's minimal websocket clients, so that holding
thousands costs the benchmark little next to the server it measures.

Everything runs on loopback: a scratch SQLite database (or BENCH_DATABASE_URL),
REDIS_URL or an embedded Redis, one daphne, one appending process.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from bench._wsclient import follow
from bench.support import (
    BASE_DIR,
    cpu_seconds,
    daphne_start,
    percentile,
    processes_stop,
    scratch_environment,
    status_figure,
)

LATENCY_EVENTS = int(os.environ.get("BENCH_STREAM_EVENTS", "300"))
RESUME_EVENTS = int(os.environ.get("BENCH_RESUME_EVENTS", "3000"))
DISCONNECTS = int(os.environ.get("BENCH_DISCONNECTS", "200"))
FANOUT_STEPS = [int(n) for n in os.environ.get("BENCH_FANOUT", "1000,5000").split(",")]
FANOUT_PROCESSES = [int(n) for n in os.environ.get("BENCH_FANOUT_PROCESSES", "1,2").split(",")]
FANOUT_EVENTS = int(os.environ.get("BENCH_FANOUT_EVENTS", "20"))
# One event a second: delivering one to 5,000 followers may take up to the 400 ms target.
FANOUT_PAUSE = float(os.environ.get("BENCH_FANOUT_PAUSE", "1.0"))
STORM = int(os.environ.get("BENCH_STORM", "1000"))
PARTS = os.environ.get("BENCH_STREAM_PARTS", "latency,resume,fanout,storm").split(",")
APPS = {"agentsite": "agentsite.asgi:application", "raw": "bench._fanout_raw:application"}

# The appending worker: writes events to sessions round-robin, stamping each
# with the wall-clock time just before the append (same machine, same clock).
APPENDER = textwrap.dedent(
    """
    import json, sys, time, django
    django.setup()
    from sessions.events import event_append
    sessions, count, pause = json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    for i in range(count):
        event_append(
            session_id=sessions[i % len(sessions)],
            kind="assistant_delta",
            payload={"text": f"<{i}>", "t": time.time()},
        )
        if pause:
            time.sleep(pause)
    """
)


def ms(values: list[float]) -> str:
    p50, p99 = 1000 * statistics.median(values), 1000 * percentile(values, 0.99)
    return f"p50 {p50:6.2f} ms  p99 {p99:6.2f} ms"


# --- environment ---------------------------------------------------------------------------


def appender(session_ids: list[str], count: int, pause: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", APPENDER, json.dumps(session_ids), str(count), str(pause)],
        cwd=BASE_DIR,
        env=dict(os.environ),
    )


def session_last_seq(session_id: str) -> int:
    from sessions.models import AgentSession

    return AgentSession.objects.values_list("last_seq", flat=True).get(pk=session_id)


# --- clients ---------------------------------------------------------------------------------


async def ws_connect(base: str, session_id: str, api_token: str, after: str = "") -> Any:
    import websockets

    return await websockets.connect(
        f"{base}/ws/sessions/{session_id}/?after={after}",
        subprotocols=["agentsite", f"agentsite.bearer.{api_token}"],  # type: ignore[list-item]
        origin=base.replace("ws://", "http://", 1),  # type: ignore[arg-type]  # the site's own
        max_queue=None,
        open_timeout=60,
    )


async def receive_latencies(ws: Any, count: int) -> list[float]:
    latencies = []
    while len(latencies) < count:
        frame = json.loads(await ws.recv())
        if "seq" in frame and "t" in frame["payload"]:
            latencies.append(time.time() - frame["payload"]["t"])
    return latencies


async def redis_round_trip(count: int) -> list[float]:
    import redis.asyncio as aioredis

    channel = f"bench-raw-{os.getpid()}"
    sub_client = aioredis.Redis.from_url(os.environ["REDIS_URL"])
    pub_client = aioredis.Redis.from_url(os.environ["REDIS_URL"])
    pubsub = sub_client.pubsub()
    await pubsub.subscribe(channel)
    await pubsub.get_message(timeout=1)  # the subscribe confirmation
    latencies = []
    for _ in range(count):
        await pub_client.publish(channel, json.dumps({"t": time.time()}))
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5)
            if message is not None:
                latencies.append(time.time() - json.loads(message["data"])["t"])
                break
        await asyncio.sleep(0.005)
    await pubsub.aclose()
    await sub_client.aclose()
    await pub_client.aclose()
    return latencies


async def bench_latency(base: str, sessions: list[Any], api_token: str) -> list[float]:
    clients = [await ws_connect(base, s.id, api_token) for s in sessions]
    await asyncio.sleep(0.5)
    per_stream = max(10, LATENCY_EVENTS // len(sessions))
    proc = appender([s.id for s in sessions], per_stream * len(sessions), 0.01)
    results = await asyncio.gather(*(receive_latencies(ws, per_stream) for ws in clients))
    await asyncio.to_thread(proc.wait)
    for ws in clients:
        await ws.close()
    return [latency for stream in results for latency in stream]


async def bench_resume(
    base: str, session: Any, api_token: str
) -> tuple[int, int, list[float], int]:
    """Returns (missing, duplicated, reconnect→first frame times, disconnects done)."""
    proc = appender([session.id], RESUME_EVENTS, 0.002)
    seen: list[int] = []
    token = ""
    first_frame: list[float] = []
    disconnects = 0
    rng = random.Random(5)
    while seen[-1:] != [RESUME_EVENTS] or disconnects < DISCONNECTS:
        started = time.perf_counter()
        ws = await ws_connect(base, session.id, api_token, token)
        budget = rng.randint(1, 40) if disconnects < DISCONNECTS else 10**9
        got = 0
        try:
            while got < budget and seen[-1:] != [RESUME_EVENTS]:
                timeout = 5.0 if disconnects >= DISCONNECTS else 0.3
                frame = json.loads(await asyncio.wait_for(ws.recv(), timeout))
                if "seq" not in frame:
                    continue
                if got == 0:
                    first_frame.append(time.perf_counter() - started)
                seen.append(frame["seq"])
                token = frame["token"]
                got += 1
        except TimeoutError:
            pass
        ws.transport.abort()  # an abrupt drop, not a polite close
        disconnects += 1
    await asyncio.to_thread(proc.wait)
    missing = len(set(range(1, RESUME_EVENTS + 1)) - set(seen))
    duplicated = len(seen) - len(set(seen))
    return missing, duplicated, first_frame, disconnects


# --- fan-out and reconnect storms ------------------------------------------------------------


class Stack:
    """``count`` daphne processes serving ``app``, the followers' addresses, and their cost."""

    def __init__(self, scratch: Path, app: str, count: int) -> None:
        self.app = app
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ports: list[int] = []
        for _ in range(count):
            proc, port = daphne_start(scratch, APPS[app])
            self.procs.append(proc)
            self.ports.append(port)
        self.rss_before = self.rss_kib()

    def rss_kib(self) -> int:
        return sum(status_figure(p.pid, "VmRSS") for p in self.procs)

    def rss_per_connection(self, connections: int) -> float:
        return (self.rss_kib() - self.rss_before) / max(1, connections)

    def cpu_s(self) -> float:
        return sum(cpu_seconds(p.pid) for p in self.procs)

    def stop(self) -> None:
        processes_stop(self.procs)


class Target:
    """Where followers of one stream connect, and the process that publishes to it."""

    def __init__(self, stack: Stack, session: Any = None, api_token: str = "") -> None:
        self.stack = stack
        self.session = session
        self.api_token = api_token

    def path_and_headers(self) -> tuple[str, dict[str, str]]:
        if self.session is None:
            return "/ws/raw/", {}
        from sessions.tokens import session_token

        edge = session_last_seq(self.session.id)
        after = session_token(session_id=self.session.id, owner_id=self.session.owner_id, seq=edge)
        protocols = f"agentsite, agentsite.bearer.{self.api_token}"
        return f"/ws/sessions/{self.session.id}/?after={after}", {
            "Sec-WebSocket-Protocol": protocols
        }

    def publisher(self, count: int, pause: float) -> subprocess.Popen[bytes]:
        if self.session is None:
            return subprocess.Popen(
                [sys.executable, "-m", "bench._fanout_raw", str(count), str(pause)],
                cwd=BASE_DIR,
                env=dict(os.environ),
            )
        return appender([self.session.id], count, pause)

    async def open(self, count: int, batch: int) -> tuple[list[Any], int]:
        """``count`` followers spread over the stack's processes, ``batch`` connecting at once."""
        path, headers = await asyncio.to_thread(self.path_and_headers)
        ports = self.stack.ports
        followers: list[Any] = []
        failures = 0
        for first in range(0, count, batch):
            opened = await asyncio.gather(
                *(
                    follow("127.0.0.1", ports[i % len(ports)], path, headers, timeout=120)
                    for i in range(first, min(count, first + batch))
                ),
                return_exceptions=True,
            )
            followers += [f for f in opened if not isinstance(f, BaseException)]
            errors = [f for f in opened if isinstance(f, BaseException)]
            if errors and not failures:
                print(f"    first connect failure: {errors[0]!r}")
            failures += len(errors)
        return followers, failures


def delivery(followers: list[Any], after: float = 0.0) -> tuple[list[float], int]:
    """Latencies of the frames published after ``after``, and how many frames arrived."""
    latencies = [at - t for f in followers for at, t in f.arrivals if t >= after]
    return latencies, sum(len(f.arrivals) for f in followers)


async def fanout_step(target: Target, followers: int, events: int) -> dict[str, float]:
    opened, failures = await target.open(followers, batch=100)
    await asyncio.sleep(1.0)
    rss = target.stack.rss_per_connection(len(opened))
    cpu = target.stack.cpu_s()
    proc = target.publisher(events, FANOUT_PAUSE)
    await asyncio.to_thread(proc.wait)
    await asyncio.sleep(2.0)
    cpu = target.stack.cpu_s() - cpu
    latencies, arrived = delivery(opened)
    # Followers the server closed before the end (e.g. 4429: too far behind).
    cut = sum(1 for follower in opened if follower.closed.done())
    for follower in opened:
        follower.close()
    expected = len(opened) * events
    return {
        "open": len(opened),
        "cut": cut,
        "failures": failures,
        "p50": statistics.median(latencies or [float("nan")]),
        "p99": percentile(latencies, 0.99) if latencies else float("nan"),
        "missing": expected - arrived,
        "rss_kib": rss,
        "cpu_us_per_frame": 1e6 * cpu / max(1, arrived),
    }


async def storm(target: Target, followers: int, events: int) -> dict[str, float]:
    """``followers`` connect at once while a message is published every 0.5 s."""
    started = time.time()
    proc = target.publisher(events, 0.5)
    opened, failures = await target.open(followers, batch=followers)
    connected = time.time() - started
    await asyncio.to_thread(proc.wait)
    await asyncio.sleep(2.0)
    for follower in opened:
        follower.close()
    first_t = min((t for f in opened for _, t in f.arrivals), default=started)
    # The first message, posted as the storm began: when had every follower got it?
    reached = [min((at for at, t in f.arrivals if t == first_t), default=math.inf) for f in opened]
    during = [at - t for f in opened for at, t in f.arrivals if t < started + 10]
    return {
        "open": len(opened),
        "failures": failures,
        "connected_s": connected,
        "first_reached_all_s": max(reached, default=float("inf")) - first_t,
        "p50": statistics.median(during or [float("nan")]),
        "p99": percentile(during, 0.99) if during else float("nan"),
    }


def fanout_line(name: str, procs: int, step: int, r: dict[str, float]) -> str:
    return (
        f"  {name:9s} {step:5d} followers / {procs} daphne: p50 {1000 * r['p50']:7.1f} ms  "
        f"p99 {1000 * r['p99']:7.1f} ms  missing {int(r['missing'])}  "
        f"{r['rss_kib']:5.1f} KiB/conn  {r['cpu_us_per_frame']:5.1f} µs CPU/frame"
        + (f"  ({int(r['failures'])} failed to connect)" if r["failures"] else "")
        + (f"  ({int(r['cut'])} closed by the server)" if r.get("cut") else "")
    )


def bench_fanout(scratch: Path, user: Any, api_token: str) -> None:
    from sessions.models import AgentSession

    targets = {1_000: 0.100, 5_000: 0.400}
    for procs in FANOUT_PROCESSES:
        for step in FANOUT_STEPS:
            results = {}
            for name in ("raw", "agentsite"):
                stack = Stack(scratch, name, procs)
                try:
                    session = (
                        AgentSession.objects.create(owner=user) if name == "agentsite" else None
                    )
                    target = Target(stack, session, api_token)
                    results[name] = asyncio.run(fanout_step(target, step, FANOUT_EVENTS))
                finally:
                    stack.stop()
                print(fanout_line(name, procs, step, results[name]), flush=True)
            ours, raw = results["agentsite"], results["raw"]
            verdict = ""
            if procs == 1 and step in targets:
                ok = ours["p99"] <= targets[step] and ours["rss_kib"] <= 40 and not ours["missing"]
                verdict = (
                    f"; target p99 ≤ {1000 * targets[step]:.0f} ms, ≤ 40 KiB, 0 missing: "
                    f"{'met' if ok else 'MISSED'}"
                )
            print(f"  → p99 {ours['p99'] / raw['p99']:.2f}x raw Channels{verdict}", flush=True)


def bench_storm(scratch: Path, user: Any, api_token: str) -> None:
    from sessions.models import AgentSession

    for name in ("raw", "agentsite"):
        stack = Stack(scratch, name, 1)
        try:
            session = AgentSession.objects.create(owner=user) if name == "agentsite" else None
            r = asyncio.run(storm(Target(stack, session, api_token), STORM, 30))
        finally:
            stack.stop()
        line = (
            f"  {name:9s} {int(r['open'])} followers at once: all connected after "
            f"{r['connected_s']:5.1f} s; delivery in the first 10 s p50 {1000 * r['p50']:7.1f} ms "
            f"p99 {1000 * r['p99']:7.1f} ms"
        )
        if name == "agentsite":
            settled = r["first_reached_all_s"]
            line += (
                f"; the message posted as they connected reached all after {settled:5.1f} s "
                f"(target ≤ 10 s: {'met' if settled <= 10 and not r['failures'] else 'MISSED'})"
            )
        print(line + (f" ({int(r['failures'])} failed)" if r["failures"] else ""), flush=True)


# --- main ---------------------------------------------------------------------------


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="agentsite-bench-stream-"))
    owned = scratch_environment(scratch, name="stream")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from accounts.models import ApiToken
    from sessions.models import AgentSession

    call_command("migrate", interactive=False, verbosity=0)
    user = get_user_model().objects.create_user(f"bench-{os.getpid()}", password="bench-pw")
    _, api_token = ApiToken.issue(user=user, name="bench")
    daphne, port = daphne_start(scratch)
    owned.append(daphne)
    base = f"ws://127.0.0.1:{port}"
    try:
        if "latency" in PARTS:
            raw = asyncio.run(redis_round_trip(LATENCY_EVENTS))
            print(f"raw Redis PUBLISH→SUBSCRIBE       {ms(raw)}")
            for streams, target in ((1, 0.050), (20, 0.150)):
                sessions = [AgentSession.objects.create(owner=user) for _ in range(streams)]
                lat = asyncio.run(bench_latency(base, sessions, api_token))
                p99 = percentile(lat, 0.99)
                print(
                    f"append→websocket, {streams:2d} stream(s)  {ms(lat)}  "
                    f"(p99 {p99 / percentile(raw, 0.99):5.1f}x raw Redis; "
                    f"target ≤ {1000 * target:.0f} ms: "
                    f"{'met' if p99 <= target else 'MISSED'})"
                )
        if "resume" in PARTS:
            session = AgentSession.objects.create(owner=user)
            missing, duplicated, first, drops = asyncio.run(bench_resume(base, session, api_token))
            print(
                f"resume: {drops} disconnects over {RESUME_EVENTS} events: {missing} missing, "
                f"{duplicated} duplicated (target 0 and 0); reconnect→first event {ms(first)}"
            )
        if "fanout" in PARTS:
            print("fan-out: one session's events to many followers, against plain Channels")
            bench_fanout(scratch, user, api_token)
        if "storm" in PARTS:
            print(f"reconnect storm: {STORM} followers of one session connect at once")
            bench_storm(scratch, user, api_token)
    finally:
        processes_stop(owned)
    return 0


if __name__ == "__main__":
    sys.exit(main())
