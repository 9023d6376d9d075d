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
3. Capacity: websocket clients held by one daphne process, all following one
   session that receives 2 events/s (every event fans out to every client), in
   bounded steps, and daphne's resident memory per connection.

Everything runs on loopback: a scratch SQLite database (or BENCH_DATABASE_URL),
REDIS_URL or an embedded Redis, one daphne, one appending process.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from _scratch import percentile, scratch_environment  # noqa: E402

LATENCY_EVENTS = int(os.environ.get("BENCH_STREAM_EVENTS", "300"))
RESUME_EVENTS = int(os.environ.get("BENCH_RESUME_EVENTS", "3000"))
DISCONNECTS = int(os.environ.get("BENCH_DISCONNECTS", "200"))
CAPACITY_STEPS = [int(n) for n in os.environ.get("BENCH_CAPACITY", "250,500,1000,2000").split(",")]

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_daphne(scratch: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    log = open(scratch / "daphne.log", "ab")  # open as long as daphne runs
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "-v",
            "0",
            "agentsite.asgi:application",
        ],
        cwd=BASE_DIR,
        env=dict(os.environ),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"ws://127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("daphne did not start; see its log") from None
            time.sleep(0.1)


def appender(session_ids: list[str], count: int, pause: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", APPENDER, json.dumps(session_ids), str(count), str(pause)],
        cwd=BASE_DIR,
        env=dict(os.environ),
    )


def session_last_seq(session_id: str) -> int:
    from sessions.models import AgentSession

    return AgentSession.objects.values_list("last_seq", flat=True).get(pk=session_id)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


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


async def bench_capacity(base: str, session: Any, api_token: str, daphne_pid: int) -> None:
    clients: list[Any] = []
    baseline = rss_kib(daphne_pid)
    print(f"daphne RSS before clients: {baseline / 1024:.1f} MiB")
    from sessions.tokens import session_token

    proc = appender([session.id], 10**6, 0.5)  # a steady stream while clients pile up
    try:
        for target in CAPACITY_STEPS:
            failures = 0
            while len(clients) < target:
                batch = min(50, target - len(clients))
                # Join at the live edge: this measures holding streams, not replaying them.
                edge = await asyncio.to_thread(session_last_seq, session.id)
                after = session_token(session_id=session.id, owner_id=session.owner_id, seq=edge)
                opened = await asyncio.gather(
                    *(ws_connect(base, session.id, api_token, after) for _ in range(batch)),
                    return_exceptions=True,
                )
                clients += [c for c in opened if not isinstance(c, BaseException)]
                errors = [c for c in opened if isinstance(c, BaseException)]
                if errors and not failures:
                    print(f"first connect failure: {errors[0]!r}")
                failures += len(errors)
                if failures > 50:
                    break
            # Every client must still be receiving: wait for a new event on each.
            last_seq = await asyncio.to_thread(session_last_seq, session.id)
            live = await asyncio.gather(
                *(asyncio.wait_for(next_live_frame(ws, last_seq), 30) for ws in clients),
                return_exceptions=True,
            )
            latencies = [r for r in live if isinstance(r, float)]
            ok = len(latencies)
            rss = rss_kib(daphne_pid)
            per = (rss - baseline) / max(1, len(clients))
            print(
                f"{len(clients):5d} clients open, {ok:5d} receiving live events, "
                f"{failures} failed to connect; delivery {ms(latencies or [0.0])}; "
                f"daphne RSS {rss / 1024:7.1f} MiB, {per:6.1f} KiB per connection"
            )
            if failures > 50 or ok < len(clients):
                print(f"stopped: one daphne held {ok} streaming clients")
                break
    finally:
        proc.kill()
        await asyncio.gather(*(ws.close() for ws in clients), return_exceptions=True)


async def next_live_frame(ws: Any, after_seq: int) -> float:
    """Read through the backlog to the first event appended after ``after_seq``; its latency."""
    while True:
        frame = json.loads(await ws.recv())
        if "seq" in frame and frame["seq"] > after_seq:
            return time.time() - frame["payload"]["t"]


# --- main ---------------------------------------------------------------------------


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="agentsite-bench-stream-"))
    owned = scratch_environment(scratch, name="stream")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from agentsite.models import ApiToken
    from sessions.models import AgentSession

    call_command("migrate", interactive=False, verbosity=0)
    user = get_user_model().objects.create_user(f"bench-{os.getpid()}", password="bench-pw")
    _, api_token = ApiToken.issue(user=user, name="bench")
    daphne, base = start_daphne(scratch)
    owned.append(daphne)
    try:
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

        session = AgentSession.objects.create(owner=user)
        missing, duplicated, first, drops = asyncio.run(bench_resume(base, session, api_token))
        print(
            f"resume: {drops} disconnects over {RESUME_EVENTS} events: {missing} missing, "
            f"{duplicated} duplicated (target 0 and 0); reconnect→first event {ms(first)}"
        )

        session = AgentSession.objects.create(owner=user)
        asyncio.run(bench_capacity(base, session, api_token, daphne.pid))
    finally:
        for proc in owned:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
