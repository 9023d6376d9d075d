"""agentsite against a peer: the LangGraph Agent Server, the same chat and the same users.

Both servers answer every message with the reply of agentsite's offline model (its help
text, 31 pieces, 107 tokens), ``BENCH_PEERS_CALL_S`` (2) seconds before the first piece
and ``BENCH_PEERS_TOKEN_S`` (0.02) seconds per token before each piece after it. They
run one after the other on this box, each alone, under the same client:

- agentsite is ``make run``'s layout, ``manage.py serve`` (one daphne, one turn worker,
  one tool worker, the scheduler) with the offline model, on a scratch SQLite database
  and a Redis of its own (started here, so that its CPU and memory are counted with
  agentsite's: ``REDIS_URL`` is not used);
- the peer is ``langgraph dev`` (LangGraph's Agent Server, ``langgraph-api``, on its
  in-memory runtime) from a virtualenv of its own, ``.bench/peers-venv``, made here with
  the pinned releases of ``PEER_PINS`` from PyPI. It serves ``bench/_langgraph_chat.py``:
  one node calling a chat model that streams the same pieces at the same pace. Its
  runs-per-worker cap (``N_JOBS_PER_WORKER``, 10 by default) is raised above the most
  users, and everything that would leave this machine is turned off (``PEER_ENV``); the
  benchmark checks that neither server holds a connection off loopback.

N users (``BENCH_USERS``, default 1,50,200), each with an HTTP client session of its
own, send a message every 6-10 s for ``BENCH_SECONDS`` (120) and follow each answer:
agentsite's users follow their session's event stream (``/api/sessions/{id}/stream``)
and post to ``/api/sessions/{id}/messages``; the peer's post to
``/threads/{id}/runs/stream`` (``stream_mode`` ``messages-tuple``, LangGraph's
``messages`` mode: one event per model chunk) and read it to its end. Per server and N it
prints time to first token (the POST to the first text of its reply) p50/p95, errors
(a status, a timeout, a reply that differs from the known one), the turns answered, the
CPU per turn of every server process (utime + stime from /proc, over the step, divided
by the turns), the same net of what those processes spend idle (measured for
``BENCH_IDLE_S`` (30) seconds, starting 10 s after a warm-up turn: polls, heartbeats,
timers) and their peak memory (PSS); then
agentsite/peer. ``BENCH_PEERS_SERVERS=agentsite`` (or ``langgraph``) measures one alone.

"Leave and come back" (``BENCH_REJOINS`` runs per server, default 5, on an idle server):
a run is started, the client reads it up to its first text and disconnects, and one
second later rejoins with the last event's id (agentsite: the run's stream with that
continuation token; the peer: ``GET /threads/{id}/runs/{run_id}/stream`` with
``Last-Event-ID``, the run created with ``stream_resumable``). It prints the time from
the rejoin to its first event (one the client missed while away), and the characters of
the reply lost or repeated against the known reply, and events repeated (an id seen twice).
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from agentsite.core.embedded_redis import free_port
from bench.support import (
    BASE_DIR,
    TICKS_PER_S,
    api_tokens,
    outbound,
    percentile,
    processes_stop,
    scratch_environment,
    tree_pss,
    tree_ticks,
    tree_ticks_by_process,
)

LEVELS = [int(n) for n in os.environ.get("BENCH_USERS", "1,50,200").split(",") if n.strip()]
STEP_S = float(os.environ.get("BENCH_SECONDS", "120"))
REJOINS = int(os.environ.get("BENCH_REJOINS", "5"))
CALL_S = float(os.environ.get("BENCH_PEERS_CALL_S", "2"))
TOKEN_S = float(os.environ.get("BENCH_PEERS_TOKEN_S", "0.02"))
SERVERS = os.environ.get("BENCH_PEERS_SERVERS", "agentsite,langgraph").split(",")
REPLY_TIMEOUT_S = 60.0
AWAY_S = 1.0
# Idle is measured over IDLE_S after IDLE_SETTLE_S: right after the warm-up turn a server
# is still finishing its start (a tool worker forks its warm horse at its first job, the
# scheduler's first passes run), which a 10 s window right away counted as idle (7 to 17
# ms a second for the same agentsite from run to run).
IDLE_S = float(os.environ.get("BENCH_IDLE_S", "30"))
IDLE_SETTLE_S = 10.0

PEER_VENV = BASE_DIR / ".bench" / "peers-venv"
# The peer's releases (PyPI), each pinned; the rest of its dependencies as pip resolves them
# (their versions are printed).
PEER_PINS = (
    "langgraph-cli[inmem]==0.4.40",
    "langgraph-api==0.16.7",
    "langgraph-runtime-inmem==0.36.7",
    "langgraph==1.2.24",
    "langgraph-checkpoint==4.3.2",
    "langgraph-sdk==0.4.14",
    "langchain-core==1.8.3",
)
# Nothing leaves the machine: no LangSmith tracing, no CLI analytics (a POST per command
# otherwise), no PyPI version check at start; no license or LangSmith key, so the
# metadata beacon never starts. Every other LANGSMITH_/LANGCHAIN_/LANGGRAPH_ variable of
# this process's environment is dropped.
PEER_ENV = {
    "LANGSMITH_TRACING": "false",
    "LANGSMITH_TRACING_V2": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LOG_LEVEL": "WARNING",
}
# The flags of `langgraph dev` beyond host and port: no browser (nor the LangSmith lookup
# that opening it makes), no file watcher process, and blockbuster (a development-only
# check wrapping blocking calls on the event loop) off, so that its cost is not the peer's.
PEER_FLAGS = ("--no-browser", "--no-reload", "--allow-blocking", "--server-log-level", "WARNING")


def reply() -> tuple[str, list[tuple[str, int]]]:
    """The offline model's answer to the benchmark's messages, and its streamed pieces."""
    from sessions.llm.base import approx_tokens
    from sessions.llm.offline import HELP, pieces, plan_reply

    tools = [{"name": "start_run_tests"}]
    assert plan_reply([{"role": "user", "content": message(0)}], tools).text == [HELP]
    return HELP, [(piece, approx_tokens(piece)) for piece in pieces(HELP)]


def message(i: int) -> str:
    return f"hello there, message {i}"


# --- the wire -------------------------------------------------------------------------------


@dataclass
class Event:
    id: str = ""
    event: str = ""
    data: str = ""


async def sse(response: aiohttp.ClientResponse) -> AsyncIterator[Event]:
    """Each server-sent event with its id, name and data (comments skipped)."""
    current = Event()
    data: list[str] = []
    async for raw in response.content:
        line = raw.decode().rstrip("\r\n")
        if not line:
            if data:
                current.data = "\n".join(data)
                yield current
            current, data = Event(), []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif line.startswith("id:"):
            current.id = line[3:].strip()
        elif line.startswith("event:"):
            current.event = line[6:].strip()


def client() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=None)
    )


# --- the servers ------------------------------------------------------------------------------


@dataclass
class Step:
    users: int
    ttft: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    turns: int = 0
    cpu_s: float = 0.0
    pss_peak: float = 0.0
    client_cpu_s: float = 0.0
    elapsed_s: float = 0.0
    cpu_by_process: dict[str, float] = field(default_factory=dict)  # seconds


@dataclass
class Rejoin:
    first_event_s: float = 0.0  # the rejoin's request to its first event
    first_text_s: float = 0.0  # … to its first text
    lost_chars: int = 0
    repeated_chars: int = 0
    repeated_events: int = 0
    error: str = ""


def compare(expected: str, got: str) -> tuple[int, int]:
    """(characters of ``expected`` missing from ``got``, characters ``got`` has in excess)."""
    lost = extra = 0
    matcher = difflib.SequenceMatcher(a=expected, b=got, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op in ("delete", "replace"):
            lost += a1 - a0
        if op in ("insert", "replace"):
            extra += b1 - b0
    return lost, extra


class Server:
    name = ""
    text = ""

    def roots(self) -> list[int]:
        raise NotImplementedError

    async def user(self, i: int, step: Step, end: float) -> None:
        raise NotImplementedError

    async def rejoin(self, i: int) -> Rejoin:
        raise NotImplementedError

    def settings(self) -> list[str]:
        raise NotImplementedError

    async def pace(self, step: Step, end: float, turn: Callable[[int], Awaitable[None]]) -> None:
        """A message every 6-10 s until ``end``, the users' first ones spread over 6 s (the
        warm-up's one user sends at once)."""
        await asyncio.sleep(random.uniform(0, 6) if step.users > 0 else 0)
        i = 0
        while time.monotonic() < end:
            next_at = time.monotonic() + random.uniform(6, 10)
            try:
                await asyncio.wait_for(turn(i), REPLY_TIMEOUT_S)
            except TimeoutError:
                step.errors.append("no complete reply in time")
            except aiohttp.ClientError as exc:
                step.errors.append(repr(exc))
            i += 1
            await asyncio.sleep(max(0.0, min(next_at, end) - time.monotonic()))

    def check(self, step: Step, sent: float, first: float | None, text: str) -> None:
        if first is None:
            step.errors.append("a reply without text")
            return
        step.ttft.append(first - sent)
        if text != self.text:
            step.errors.append(f"a reply that differs: {text[:80]!r}")
            return
        step.turns += 1


class Agentsite(Server):
    """``manage.py serve`` (bench/load.py's ``Serve``), with its own Redis."""

    name = "agentsite"

    def __init__(self, scratch: Path, redis: subprocess.Popen[bytes], tokens: list[str]) -> None:
        from bench.load import Serve

        self.serve = Serve(scratch)
        self.redis = redis
        self.tokens = tokens
        self.url = self.serve.url

    def __enter__(self) -> Agentsite:
        self.serve.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.serve.__exit__()

    def roots(self) -> list[int]:
        return [self.serve.proc.pid, self.redis.pid]

    def settings(self) -> list[str]:
        from django.conf import settings

        return [
            "manage.py serve: 1 daphne, 1 turn worker (TurnWorker), 1 tool worker, scheduler",
            f"database {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]} (scratch),"
            " an embedded Redis of its own (counted with agentsite)",
            "AGENTSITE_MODEL=offline"
            f" AGENTSITE_OFFLINE_CALL_S={os.environ['AGENTSITE_OFFLINE_CALL_S']}"
            f" AGENTSITE_OFFLINE_OUTPUT_TOKEN_S={os.environ['AGENTSITE_OFFLINE_OUTPUT_TOKEN_S']}",
            f"LOG_LEVEL={os.environ['LOG_LEVEL']}, per-user quotas off (AGENTSITE_QUOTA_*=0)",
            f"AGENTSITE_TURN_CONCURRENCY={settings.AGENTSITE_TURN_CONCURRENCY} (turns a worker"
            f" runs at once), AGENTSITE_DELTA_WRITES_PER_S={settings.AGENTSITE_DELTA_WRITES_PER_S}",
        ]

    def headers(self, i: int) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[i]}"}

    async def session(self, http: aiohttp.ClientSession, i: int) -> str:
        async with http.post(f"{self.url}/api/sessions", json={}, headers=self.headers(i)) as resp:
            if resp.status != 201:
                raise RuntimeError(f"POST /api/sessions {resp.status}: {await resp.text()}")
            return str((await resp.json())["session_id"])

    async def post(self, http: aiohttp.ClientSession, i: int, sid: str, n: int) -> dict[str, Any]:
        async with http.post(
            f"{self.url}/api/sessions/{sid}/messages",
            json={"text": message(n)},
            headers=self.headers(i),
        ) as resp:
            if resp.status != 202:
                raise RuntimeError(f"POST messages {resp.status}: {await resp.text()}")
            return dict(await resp.json())

    async def user(self, i: int, step: Step, end: float) -> None:
        async with client() as http:
            try:
                sid = await self.session(http, i)
            except (RuntimeError, aiohttp.ClientError) as exc:
                step.errors.append(str(exc))
                return
            # The session's stream: a user waits for each reply before the next message,
            # so the text after a send belongs to that send's run.
            state: dict[str, Any] = {"first": None, "text": [], "done": None}
            ready = asyncio.Event()

            async def follow() -> None:
                url = f"{self.url}/api/sessions/{sid}/stream"
                async with http.get(url, headers=self.headers(i)) as resp:
                    ready.set()
                    async for event in sse(resp):
                        frame = json.loads(event.data)
                        if frame["kind"] == "assistant_delta":
                            if state["first"] is None:
                                state["first"] = time.monotonic()
                            state["text"].append(frame["payload"]["text"])
                        elif frame["kind"] == "run_finished" and state["done"] is not None:
                            if not state["done"].done():
                                state["done"].set_result(None)

            async def turn(n: int) -> None:
                state.update(first=None, text=[], done=asyncio.get_running_loop().create_future())
                sent = time.monotonic()
                try:
                    await self.post(http, i, sid, n)
                except RuntimeError as exc:
                    step.errors.append(str(exc))
                    return
                await state["done"]
                self.check(step, sent, state["first"], "".join(state["text"]))

            follower = asyncio.create_task(follow())
            try:
                await asyncio.wait_for(ready.wait(), 30)
                await self.pace(step, end, turn)
            except Exception as exc:
                step.errors.append(repr(exc))
            finally:
                follower.cancel()
                await asyncio.gather(follower, return_exceptions=True)

    async def rejoin(self, i: int) -> Rejoin:
        result = Rejoin()
        async with client() as http:
            sid = await self.session(http, i)
            started = await self.post(http, i, sid, 0)
            run_id, token = started["run_id"], started["continuation_token"]
            url = f"{self.url}/api/runs/{run_id}/stream"
            seen: set[str] = set()
            text: list[str] = []
            async with http.get(
                url, params={"continuation_token": token}, headers=self.headers(i)
            ) as resp:
                async for event in sse(resp):
                    seen.add(event.id)
                    token = event.id
                    frame = json.loads(event.data)
                    if frame["kind"] == "assistant_delta":
                        text.append(frame["payload"]["text"])
                        break  # gone after the first text
            await asyncio.sleep(AWAY_S)
            asked = time.monotonic()
            headers = {**self.headers(i), "Last-Event-ID": token}
            async with http.get(url, headers=headers) as resp:
                async for event in sse(resp):
                    now = time.monotonic()
                    result.first_event_s = result.first_event_s or now - asked
                    result.repeated_events += event.id in seen
                    seen.add(event.id)
                    frame = json.loads(event.data)
                    if frame["kind"] == "assistant_delta":
                        result.first_text_s = result.first_text_s or now - asked
                        text.append(frame["payload"]["text"])
        result.lost_chars, result.repeated_chars = compare(self.text, "".join(text))
        return result


class LangGraph(Server):
    """``langgraph dev`` from the peer's virtualenv, serving ``bench/_langgraph_chat.py``."""

    name = "langgraph"

    def __init__(self, scratch: Path, pieces: list[tuple[str, int]], jobs: int) -> None:
        self.dir = scratch / "langgraph"
        self.dir.mkdir()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.jobs = jobs
        shutil.copy(BASE_DIR / "bench" / "_langgraph_chat.py", self.dir / "chat.py")
        (self.dir / "reply.json").write_text(
            json.dumps({"call_s": CALL_S, "token_s": TOKEN_S, "pieces": pieces})
        )
        config = {"dependencies": ["."], "graphs": {"chat": "./chat.py:graph"}}
        (self.dir / "langgraph.json").write_text(json.dumps(config))
        self.argv = [
            str(PEER_VENV / "bin" / "langgraph"),
            *("dev", "--config", "langgraph.json", "--host", "127.0.0.1"),
            *("--port", str(self.port), "--n-jobs-per-worker", str(jobs), *PEER_FLAGS),
        ]

    def env(self) -> dict[str, str]:
        keep = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "LANGGRAPH_", "VIRTUAL_ENV"))
            and k not in ("LOG_LEVEL", "DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
        }
        return {
            **keep,
            **PEER_ENV,
            "PEER_CHAT_REPLY": str(self.dir / "reply.json"),
            "PATH": f"{PEER_VENV / 'bin'}:{os.environ.get('PATH', '')}",
        }

    def __enter__(self) -> LangGraph:
        self.log = open(self.dir / "server.log", "ab")
        self.proc = subprocess.Popen(
            self.argv,
            cwd=self.dir,
            env=self.env(),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        import httpx

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        self.__exit__()
        raise SystemExit(f"langgraph dev did not start; see {self.dir / 'server.log'}")

    def __exit__(self, *exc: object) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass
        self.log.close()

    def roots(self) -> list[int]:
        return [self.proc.pid]

    def settings(self) -> list[str]:
        return [
            " ".join(["langgraph", *self.argv[1:]]),
            f"N_JOBS_PER_WORKER={self.jobs} (--n-jobs-per-worker; the default is 10),"
            " in-memory runtime (langgraph dev's own; file persistence as it defaults)",
            " ".join(f"{k}={v}" for k, v in PEER_ENV.items())
            + "; no LANGSMITH_API_KEY, LANGGRAPH_CLOUD_LICENSE_KEY or other LANGSMITH_*,"
            " LANGCHAIN_*, LANGGRAPH_* variable",
            f"graph: bench/_langgraph_chat.py, {CALL_S:g} s to the first piece,"
            f" {TOKEN_S:g} s per token; runs streamed with stream_mode messages-tuple",
        ]

    async def thread(self, http: aiohttp.ClientSession) -> str:
        async with http.post(f"{self.url}/threads", json={}) as resp:
            if resp.status != 200:
                raise RuntimeError(f"POST /threads {resp.status}: {await resp.text()}")
            return str((await resp.json())["thread_id"])

    def run_body(self, n: int, **extra: Any) -> dict[str, Any]:
        return {
            "assistant_id": "chat",
            "input": {"messages": [{"role": "user", "content": message(n)}]},
            "stream_mode": ["messages-tuple"],
            **extra,
        }

    @staticmethod
    def chunk_text(event: Event) -> str:
        if event.event != "messages":
            return ""
        chunk = json.loads(event.data)[0]
        if chunk.get("type") not in ("AIMessageChunk", "ai"):
            return ""
        content = chunk.get("content")
        return content if isinstance(content, str) else ""

    async def user(self, i: int, step: Step, end: float) -> None:
        async with client() as http:
            try:
                tid = await self.thread(http)
            except (RuntimeError, aiohttp.ClientError) as exc:
                step.errors.append(str(exc))
                return

            async def turn(n: int) -> None:
                sent = time.monotonic()
                first, text = None, []
                url = f"{self.url}/threads/{tid}/runs/stream"
                async with http.post(url, json=self.run_body(n)) as resp:
                    if resp.status != 200:
                        step.errors.append(f"POST runs/stream {resp.status}")
                        return
                    async for event in sse(resp):
                        if event.event == "error":
                            step.errors.append(f"error event: {event.data[:200]}")
                            return
                        if piece := self.chunk_text(event):
                            first = first or time.monotonic()
                            text.append(piece)
                self.check(step, sent, first, "".join(text))

            try:
                await self.pace(step, end, turn)
            except Exception as exc:
                step.errors.append(repr(exc))

    async def rejoin(self, i: int) -> Rejoin:
        result = Rejoin()
        async with client() as http:
            tid = await self.thread(http)
            seen: set[str] = set()
            text: list[str] = []
            last = ""
            body = self.run_body(0, stream_resumable=True, on_disconnect="continue")
            async with http.post(f"{self.url}/threads/{tid}/runs/stream", json=body) as resp:
                run_id = resp.headers["Content-Location"].rsplit("/", 1)[-1]
                async for event in sse(resp):
                    seen.add(event.id)
                    last = event.id
                    if piece := self.chunk_text(event):
                        text.append(piece)
                        break  # gone after the first text
            await asyncio.sleep(AWAY_S)
            asked = time.monotonic()
            url = f"{self.url}/threads/{tid}/runs/{run_id}/stream"
            async with http.get(
                url, params={"stream_mode": "messages-tuple"}, headers={"Last-Event-ID": last}
            ) as resp:
                async for event in sse(resp):
                    now = time.monotonic()
                    result.first_event_s = result.first_event_s or now - asked
                    result.repeated_events += bool(event.id) and event.id in seen
                    seen.add(event.id)
                    if piece := self.chunk_text(event):
                        result.first_text_s = result.first_text_s or now - asked
                        text.append(piece)
        result.lost_chars, result.repeated_chars = compare(self.text, "".join(text))
        return result


# --- the run -----------------------------------------------------------------------------------


async def run_step(
    server: Server, users: int, seconds: float, *, warm_up: bool = False
) -> tuple[Step, set[str]]:
    step = Step(users)
    roots = server.roots()
    seen_outbound: set[str] = set()
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            step.pss_peak = max(step.pss_peak, tree_pss(roots))
            seen_outbound.update(outbound(roots))
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except TimeoutError:
                pass

    sampler = asyncio.create_task(sample())
    before, client_before = tree_ticks(roots), time.process_time()
    by_process = tree_ticks_by_process(roots)
    end = time.monotonic() + seconds
    await asyncio.gather(*(server.user(i, step, end) for i in range(1 if warm_up else users)))
    step.cpu_s = (tree_ticks(roots) - before) / TICKS_PER_S
    for label, ticks in tree_ticks_by_process(roots).items():
        step.cpu_by_process[label] = (ticks - by_process.get(label, 0)) / TICKS_PER_S
    step.elapsed_s = time.monotonic() - end + seconds
    step.client_cpu_s = time.process_time() - client_before
    stop.set()
    await sampler
    return step, seen_outbound


async def rejoins(server: Server) -> list[Rejoin]:
    found = []
    for i in range(REJOINS):
        try:
            found.append(await asyncio.wait_for(server.rejoin(i), REPLY_TIMEOUT_S))
        except Exception as exc:
            found.append(Rejoin(error=repr(exc)))
    return found


def measure(server: Server) -> Measured:
    print(f"{server.name}:", flush=True)
    for line in server.settings():
        print(f"  {line}")
    # Warm-up, one turn: imports, connections, first queries (users=0: no spread).
    asyncio.run(run_step(server, 0, 1, warm_up=True))
    idle = tree_pss(server.roots())
    # What the server's processes spend with no user at all (polls, heartbeats, timers).
    time.sleep(IDLE_SETTLE_S)
    before = tree_ticks(server.roots())
    time.sleep(IDLE_S)
    idle_cpu = (tree_ticks(server.roots()) - before) / TICKS_PER_S / IDLE_S
    away = asyncio.run(rejoins(server))
    steps, seen = [], set(outbound(server.roots()))
    for users in LEVELS:
        time.sleep(3)  # the previous step's last replies settle
        step, off_loopback = asyncio.run(run_step(server, users, STEP_S))
        seen |= off_loopback
        steps.append(step)
        print(f"  … {users} users: {step.turns} turns, {len(step.errors)} errors", flush=True)
    return Measured(steps, away, idle, idle_cpu, seen)


@dataclass
class Measured:
    steps: list[Step]
    rejoins: list[Rejoin]
    idle_pss: float
    idle_cpu: float  # seconds of CPU a second
    outbound: set[str]


def peer_venv(log: Path) -> list[str]:
    """The peer's virtualenv with ``PEER_PINS`` (made once, pip's output in ``log``); what
    pip resolved in it."""
    stamp = PEER_VENV / ".pins"
    wanted = "\n".join(PEER_PINS)
    if not stamp.exists() or stamp.read_text() != wanted:
        print(f"making {PEER_VENV.relative_to(BASE_DIR)} (PyPI: {' '.join(PEER_PINS)})", flush=True)
        subprocess.check_call([sys.executable, "-m", "venv", "--clear", str(PEER_VENV)])
        pip = [str(PEER_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        with open(log, "wb") as out:
            if subprocess.call([*pip, *PEER_PINS], stdout=out, stderr=subprocess.STDOUT):
                raise SystemExit(f"pip could not install the peer; see {log}")
        stamp.write_text(wanted)
    frozen = subprocess.check_output(
        [str(PEER_VENV / "bin" / "python"), "-m", "pip", "freeze"], text=True
    ).split()
    words = ("lang", "uvicorn", "starlette", "sse-starlette", "orjson")
    return [line for line in frozen if line.lower().startswith(words)]


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "—"


def report(results: dict[str, Measured]) -> None:
    print()
    print(
        "  users  server      TTFT p50    p95  errors  turns  CPU/turn  net of idle"
        "  PSS peak  client CPU"
    )
    print(
        "                          (ms)   (ms)                  (ms)         (ms)"
        "     (MiB)   (ms/turn)"
    )
    for index, users in enumerate(LEVELS):
        figures = {}
        for name, measured in results.items():
            step = measured.steps[index]
            turns = max(1, step.turns)
            p50 = 1000 * percentile(step.ttft, 0.5) if step.ttft else 0.0
            p95 = 1000 * percentile(step.ttft, 0.95) if step.ttft else 0.0
            cpu = 1000 * step.cpu_s / turns
            net = 1000 * max(0.0, step.cpu_s - measured.idle_cpu * step.elapsed_s) / turns
            figures[name] = (p50, p95, cpu, net, step.pss_peak)
            client_cpu = 1000 * step.client_cpu_s / turns
            print(
                f"  {users:5d}  {name:10s} {p50:7.0f} {p95:6.0f} {len(step.errors):7d}"
                f" {step.turns:6d} {cpu:9.1f} {net:12.1f} {step.pss_peak:9.0f} {client_cpu:11.1f}"
            )
            for line in sorted(set(step.errors))[:3]:
                print(f"           error: {line}")
            spent = sorted(step.cpu_by_process.items(), key=lambda item: -item[1])
            print(
                "           CPU/turn by process: "
                + ", ".join(f"{label} {1000 * s / turns:.1f}" for label, s in spent if s > 0)
            )
        if {"agentsite", "langgraph"} <= figures.keys():
            a, p = figures["agentsite"], figures["langgraph"]
            print(
                f"  {users:5d}  agentsite/langgraph: TTFT p50 {ratio(a[0], p[0])},"
                f" p95 {ratio(a[1], p[1])}, CPU per turn {ratio(a[2], p[2])}"
                f" (net of idle {ratio(a[3], p[3])}), PSS {ratio(a[4], p[4])}"
            )
    print()
    print(f"leave and come back ({REJOINS} runs each, gone {AWAY_S:g} s after the first text):")
    for name, measured in results.items():
        good = [r for r in measured.rejoins if not r.error]
        errors = [r.error for r in measured.rejoins if r.error]
        if good:
            first = [1000 * r.first_event_s for r in good]
            text = [1000 * r.first_text_s for r in good]
            print(
                f"  {name:10s} rejoin → first missed event p50 {percentile(first, 0.5):.1f} ms"
                f" (max {max(first):.1f}), → first missed text p50 {percentile(text, 0.5):.1f} ms;"
                f" lost chars {sum(r.lost_chars for r in good)},"
                f" repeated chars {sum(r.repeated_chars for r in good)},"
                f" repeated events {sum(r.repeated_events for r in good)}; errors {len(errors)}"
            )
        for line in sorted(set(errors))[:3]:
            print(f"             error: {line}")
    print()
    for name, measured in results.items():
        print(
            f"  {name}: idle {1000 * measured.idle_cpu:.1f} ms of CPU a second,"
            f" PSS {measured.idle_pss:.0f} MiB after warm-up;"
            f" connections off loopback: {', '.join(sorted(measured.outbound)) or 'none'}"
        )


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="agentsite-bench-peers-"))
    os.environ.pop("REDIS_URL", None)  # a Redis of its own, counted with agentsite
    owned = scratch_environment(scratch, name="peers")
    os.environ["AGENTSITE_MODEL"] = "offline"
    os.environ["AGENTSITE_OFFLINE_CALL_S"] = f"{CALL_S:g}"
    os.environ["AGENTSITE_OFFLINE_OUTPUT_TOKEN_S"] = f"{TOKEN_S:g}"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    text, pieces = reply()
    resolved = peer_venv(scratch / "pip.log") if "langgraph" in SERVERS else []
    print(
        f"users {', '.join(map(str, LEVELS))}; {STEP_S:g} s a step, a message every 6-10 s;"
        f" the reply: {len(text)} characters, {len(pieces)} pieces,"
        f" {sum(t for _, t in pieces)} tokens, {CALL_S:g} s to the first, {TOKEN_S:g} s per"
        f" token; logs in {scratch}"
    )
    if resolved:
        print(f"peer: {' '.join(resolved)}")
    results = {}
    try:
        if "agentsite" in SERVERS:
            tokens = api_tokens(max([*LEVELS, REJOINS]), username_prefix="peers-user")
            with Agentsite(scratch, owned[0], tokens) as server:
                server.text = text
                results["agentsite"] = measure(server)
        if "langgraph" in SERVERS:
            jobs = max(50, 2 * max([*LEVELS, REJOINS]))
            with LangGraph(scratch, pieces, jobs) as peer:
                peer.text = text
                results["langgraph"] = measure(peer)
    finally:
        processes_stop(owned)
    report(results)
    failed = any(step.errors for measured in results.values() for step in measured.steps)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
