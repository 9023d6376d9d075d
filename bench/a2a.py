"""A2A against agentsite's own sessions API, in the same run, with many users at once.

1. The turn's start: ``BENCH_A2A_USERS`` (1, 20, 50) users send "hello" to the
   offline model, ``BENCH_A2A_RATE`` (10) messages a second between them all,
   each waiting for its turn to end before its next, in sessions of their own
   (a new one every ``BENCH_A2A_SESSION_TURNS``, 10, turns). Each user takes
   three ways in turn: the sessions API (``POST /api/sessions/{id}/messages``,
   then ``GET /api/runs/{run}/stream``), and A2A's ``SendStreamingMessage`` over
   JSON-RPC (``POST /a2a/jsonrpc``) and over HTTP+JSON (``POST
   /a2a/message:stream``), the A2A message in the same session (its
   ``contextId``), all at once for ``BENCH_A2A_STEP_S`` (24 s). Timed from the
   request to the first status update that says the task works (the ``Task``
   itself when it already does) against the run's first event (``run_started``):
   the same log event, as each surface shows it; also the first event of each
   (the ``Task``; the post's ``202``) and the first text. Prints p50/p95 and the
   ratios (target: A2A's p50 ≤ 1.1x the sessions API's). Then each way alone for
   ``BENCH_A2A_CPU_STEP_S`` (6 s): the CPU a turn costs the web process and the
   turn worker.
2. Resubscribe: as many users each start a task that writes a report
   (``write_report``, ``BENCH_A2A_SECTION_S``, 0.5 s, a section, on
   ``BENCH_A2A_TOOL_WORKERS``, 8, tool workers; the offline model streams its
   text at ``BENCH_A2A_TOKEN_S``, 0.05 s, a token), drop the stream after the
   ``Task``, and then, for ``BENCH_A2A_RESUBSCRIBE_S`` (30 s), call
   ``SubscribeToTask`` (the bindings in turn), follow it for
   ``BENCH_A2A_HOLD_S`` (0.5-2 s) and drop it again, until the task ends, then
   start the next; once the time is up, each follows its task to the end.
   Timed from the call to the first event (the ``Task``), against reconnecting
   to the task's session stream (``GET /api/sessions/{id}/stream``, its first
   replayed event), the two alternating. Every subscription rebuilds the
   answers' text from the ``Task`` and the updates after it; once the task has
   ended, each must be the start of the log's text (whole where its closing
   chunk came, or the stream was followed to the end): the lost and repeated
   are counted (targets: p50 ≤ 50 ms, 0 lost, 0 repeated).

Each part prints the CPU each process used, in cores, and what others used of
the machine meanwhile. One daphne, one turn worker and the tool workers on a
scratch SQLite database (or ``BENCH_DATABASE_URL``) and ``REDIS_URL`` or an
embedded Redis. The users are aiohttp clients in this process (as in
bench/concurrency.py: a light client leaves the two cores to the server),
reading the server-sent events raw. ``--quick`` (a smoke run): 1 and 3 users,
6 s steps, 8 s of resubscribes; ``--only turns|resubscribe``: one part.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bench.support import (
    BASE_DIR,
    api_tokens,
    cpu_seconds,
    cpu_ticks,
    daphne_start,
    live_children_ticks,
    load_average,
    machine_ticks,
    parents,
    percentile,
    process_start,
    processes_stop,
    scratch_environment,
    tool_workers_start,
    workers_wait,
)

RATIO_TARGET = 1.1
RESUBSCRIBE_P50_TARGET_S = 0.050
PATHS = ("sessions", "a2a jsonrpc", "a2a http+json")
PARTS = ("turns", "resubscribe")
WORKING = "TASK_STATE_WORKING"
ENDED = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"}
FINAL = ENDED | {"TASK_STATE_INPUT_REQUIRED"}
TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=60)


@dataclass
class Settings:
    users: list[int]
    rate: float
    step_s: float
    cpu_step_s: float
    resubscribe_s: float
    hold_s: tuple[float, float]
    session_turns: int
    tool_workers: int
    section_s: str
    token_s: str

    @classmethod
    def from_environment(cls, quick: bool) -> Settings:
        def value(name: str, full: str, short: str) -> str:
            return os.environ.get(f"BENCH_A2A_{name}", short if quick else full)

        low, high = value("HOLD_S", "0.5,2", "0.5,1").split(",")
        return cls(
            users=[int(n) for n in value("USERS", "1,20,50", "1,3").split(",")],
            rate=float(value("RATE", "10", "10")),
            step_s=float(value("STEP_S", "24", "6")),
            cpu_step_s=float(value("CPU_STEP_S", "6", "2")),
            resubscribe_s=float(value("RESUBSCRIBE_S", "30", "8")),
            hold_s=(float(low), float(high)),
            session_turns=int(value("SESSION_TURNS", "10", "10")),
            tool_workers=int(value("TOOL_WORKERS", "8", "2")),
            section_s=value("SECTION_S", "0.5", "0.5"),
            token_s=value("TOKEN_S", "0.05", "0.05"),
        )


# --- the wire -------------------------------------------------------------------------------


async def sse(response: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    """The JSON of each server-sent event (its ``data:`` lines joined)."""
    data: list[bytes] = []
    async for raw in response.content:
        line = raw.rstrip(b"\r\n")
        if line.startswith(b"data:"):
            data.append(line[5:].lstrip(b" "))
        elif not line and data:
            yield json.loads(b"\n".join(data))
            data = []


@dataclass
class User:
    http: aiohttp.ClientSession
    base: str
    token: str
    session_id: str = ""
    turns: int = 0  # in its session

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "A2A-Version": "1.0"}

    async def session_new(self) -> None:
        async with self.http.post(
            f"{self.base}/api/sessions", json={"model": "offline"}, headers=self.headers
        ) as created:
            if created.status != 201:
                raise Failure(f"session: {created.status} {(await created.text())[:300]}")
            self.session_id, self.turns = (await created.json())["session_id"], 0


def a2a_message(text: str, context_id: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if context_id:
        message["contextId"] = context_id
    return message


def a2a_stream_call(user: User, binding: str, method: str, params: dict[str, Any]) -> Any:
    """The request that opens an A2A stream: ``SendStreamingMessage`` or ``SubscribeToTask``."""
    headers = {**user.headers, "Accept": "text/event-stream"}
    if binding == "jsonrpc":
        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
        return user.http.post(f"{user.base}/a2a/jsonrpc", json=body, headers=headers)
    if method == "SendStreamingMessage":
        return user.http.post(f"{user.base}/a2a/message:stream", json=params, headers=headers)
    return user.http.get(f"{user.base}/a2a/tasks/{params['id']}:subscribe", headers=headers)


def a2a_event(binding: str, document: dict[str, Any]) -> dict[str, Any]:
    """A stream event as a ``StreamResponse`` (JSON-RPC wraps it in its ``result``)."""
    if binding != "jsonrpc":
        return document
    if "error" in document:
        raise Failure(json.dumps(document["error"])[:300])
    return dict(document["result"])


class Failure(Exception):
    """A call that did not go as the protocol says: counted as an error of its step."""


async def a2a_refusal(response: aiohttp.ClientResponse) -> str | None:
    """The error a stream call was answered with, if it was not a stream."""
    if response.status == 200 and response.content_type == "text/event-stream":
        return None
    return f"{response.status} {(await response.text())[:300]}"


# --- 1. the turn's start --------------------------------------------------------------------


@dataclass
class Turn:
    first_event: float
    started: float
    first_text: float


async def sessions_turn(user: User) -> Turn:
    sent = time.perf_counter()
    async with user.http.post(
        f"{user.base}/api/sessions/{user.session_id}/messages",
        json={"text": "hello"},
        headers=user.headers,
    ) as posted:
        if posted.status != 202:
            raise Failure(f"post: {posted.status} {(await posted.text())[:300]}")
        run_id = (await posted.json())["run_id"]
    acknowledged = time.perf_counter() - sent
    started = first_text = None
    async with user.http.get(f"{user.base}/api/runs/{run_id}/stream", headers=user.headers) as run:
        if run.status != 200:
            raise Failure(f"run stream: {run.status} {(await run.text())[:300]}")
        async for frame in sse(run):
            if started is None and frame["kind"] == "run_started":
                started = time.perf_counter() - sent
            if first_text is None and frame["kind"] == "assistant_delta":
                first_text = time.perf_counter() - sent
    if started is None or first_text is None:
        raise Failure("the run stream ended without its start or its text")
    return Turn(acknowledged, started, first_text)


async def a2a_turn(user: User, binding: str) -> Turn:
    params = {"message": a2a_message("hello", user.session_id)}
    sent = time.perf_counter()
    first = started = first_text = None
    state = ""
    async with a2a_stream_call(user, binding, "SendStreamingMessage", params) as stream:
        if refused := await a2a_refusal(stream):
            raise Failure(refused)
        async for document in sse(stream):
            event = a2a_event(binding, document)
            now = time.perf_counter() - sent
            if "task" in event:
                first = now
                state = event["task"]["status"]["state"]
                if any(part_text(a) for a in event["task"].get("artifacts", [])):
                    first_text = now  # the turn went faster than the task was read
            elif "statusUpdate" in event:
                state = event["statusUpdate"]["status"]["state"]
            elif "artifactUpdate" in event and first_text is None:
                first_text = now
            if started is None and (state == WORKING or state in FINAL):
                started = now
    if state not in ENDED:
        raise Failure(f"the stream ended with the task {state or 'unseen'}")
    if first is None or started is None or first_text is None:
        seen = {"task": first, "start": started, "text": first_text}
        raise Failure(f"the stream ended without its {[k for k, v in seen.items() if v is None]}")
    return Turn(first, started, first_text)


@dataclass
class Step:
    turns: dict[str, list[Turn]] = field(default_factory=dict)  # by path
    errors: list[str] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)  # by role: seconds per turn


async def one_turn(user: User, path: str) -> Turn:
    if path == "sessions":
        return await sessions_turn(user)
    return await a2a_turn(user, "jsonrpc" if path == "a2a jsonrpc" else "rest")


async def turns_step(
    users: list[User], paths: tuple[str, ...], seconds: float, cfg: Settings, pids: dict[str, int]
) -> Step:
    """Every user sends messages for ``seconds``, taking ``paths`` in turn from one of them;
    the step ends once every turn has; the CPU the web process and the turn worker spent
    meanwhile, per turn."""
    step = Step(turns={path: [] for path in paths})
    gap_s = len(users) / cfg.rate  # each user's mean time between messages
    end = time.monotonic() + seconds

    async def user_loop(user: User) -> None:
        await asyncio.sleep(random.uniform(0, gap_s))
        order = itertools.islice(itertools.cycle(paths), random.randrange(len(paths)), None)
        while time.monotonic() < end:
            began, path = time.monotonic(), next(order)
            try:
                if user.turns >= cfg.session_turns:
                    await user.session_new()  # a conversation's length is not measured here
                user.turns += 1
                step.turns[path].append(await one_turn(user, path))
            except (Failure, aiohttp.ClientError, TimeoutError, KeyError) as exc:
                step.errors.append(f"{path}: {type(exc).__name__} {exc}")
            await asyncio.sleep(
                max(0.0, random.uniform(0.5, 1.5) * gap_s - (time.monotonic() - began))
            )

    before = {role: cpu_seconds(pid) for role, pid in pids.items()}
    await asyncio.gather(*(user_loop(u) for u in users))
    done = max(1, sum(map(len, step.turns.values())))
    step.cpu = {role: (cpu_seconds(pid) - before[role]) / done for role, pid in pids.items()}
    return step


# --- 2. resubscribing -----------------------------------------------------------------------


@dataclass
class Rebuilt:
    """What one subscription rebuilt of the task's answers."""

    binding: str
    first_event_s: float = 0.0
    texts: dict[str, str] = field(default_factory=dict)
    closed: set[str] = field(default_factory=set)  # answers whose closing chunk came
    # Chunks that break the stream's rules: a closing chunk that differs from what the
    # chunks built, or an answer started twice.
    bad_chunks: int = 0
    state: str = ""

    @property
    def ended(self) -> bool:
        return self.state in FINAL

    def take(self, event: dict[str, Any]) -> None:
        if "task" in event:
            task = event["task"]
            self.state = task["status"]["state"]
            for artifact in task.get("artifacts", []):
                if artifact.get("name") == "answer":
                    self.texts[artifact["artifactId"]] = part_text(artifact)
        elif "statusUpdate" in event:
            self.state = event["statusUpdate"]["status"]["state"]
        elif "artifactUpdate" in event:
            update = event["artifactUpdate"]
            artifact = update["artifact"]
            if artifact.get("name") != "answer":
                return  # a report: whole, in one update
            key, text = artifact["artifactId"], part_text(artifact)
            if update.get("lastChunk") and not update.get("append"):
                self.closed.add(key)
                self.bad_chunks += self.texts.get(key, "") != text
                self.texts[key] = text
            elif update.get("append"):
                self.bad_chunks += key not in self.texts
                self.texts[key] = self.texts.get(key, "") + text
            else:
                self.bad_chunks += key in self.texts
                self.texts[key] = text


def part_text(artifact: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for part in artifact.get("parts", []))


@dataclass
class TaskRun:
    task_id: str
    session_id: str
    subscriptions: list[Rebuilt] = field(default_factory=list)


@dataclass
class Resubscribes:
    tasks: list[TaskRun] = field(default_factory=list)
    a2a: list[float] = field(default_factory=list)
    sessions: list[float] = field(default_factory=list)
    ended_between: int = 0  # SubscribeToTask on a task that had just ended: refused, as it must
    errors: list[str] = field(default_factory=list)


async def task_start(user: User, n: int) -> TaskRun:
    """A report task, its stream dropped once the ``Task`` has come."""
    params = {"message": a2a_message(f"write a report on the shop library, part {n}")}
    async with a2a_stream_call(user, "jsonrpc", "SendStreamingMessage", params) as stream:
        if refused := await a2a_refusal(stream):
            raise Failure(refused)
        async for document in sse(stream):
            task = a2a_event("jsonrpc", document)["task"]
            stream.close()  # the client goes away
            return TaskRun(task["id"], task["contextId"])
    raise Failure("the stream ended before the task")


async def resubscribe(user: User, task_id: str, binding: str, hold_s: float | None) -> Rebuilt:
    """``SubscribeToTask``, followed for ``hold_s`` after its first event (to the end if
    None), then dropped."""
    rebuilt = Rebuilt(binding)
    sent = time.perf_counter()
    async with a2a_stream_call(user, binding, "SubscribeToTask", {"id": task_id}) as stream:
        if refused := await a2a_refusal(stream):
            raise Failure(refused)
        events = sse(stream)
        first = a2a_event(binding, await first_of(events))
        rebuilt.first_event_s = time.perf_counter() - sent
        if "task" not in first:
            raise Failure(f"the first event is not the task: {first}")
        rebuilt.take(first)
        try:
            async with asyncio.timeout(hold_s):
                async for document in events:
                    rebuilt.take(a2a_event(binding, document))
        except TimeoutError:
            stream.close()  # dropped while the task works
    return rebuilt


async def first_of(events: AsyncIterator[dict[str, Any]]) -> dict[str, Any]:
    """A stream's first event, however long it takes (the client's read timeout aside)."""
    async for event in events:
        return event
    raise Failure("the stream ended before its first event")


async def session_reconnect(user: User, session_id: str, hold_s: float) -> float:
    """The session's stream from its start: the time to the first replayed event."""
    sent = time.perf_counter()
    url = f"{user.base}/api/sessions/{session_id}/stream"
    async with user.http.get(url, headers=user.headers) as stream:
        if stream.status != 200:
            raise Failure(f"session stream: {stream.status} {(await stream.text())[:300]}")
        events = sse(stream)
        await first_of(events)
        first = time.perf_counter() - sent
        try:
            async with asyncio.timeout(hold_s):
                async for _ in events:
                    pass
        except TimeoutError:
            stream.close()
    return first


def ended_refusal(exc: Failure) -> bool:
    return "task_ended" in str(exc)


async def resubscribe_step(users: list[User], cfg: Settings) -> Resubscribes:
    found = Resubscribes()
    end = time.monotonic() + cfg.resubscribe_s
    numbers = itertools.count()

    async def user_loop(user: User) -> None:
        await asyncio.sleep(random.uniform(0, 1))
        bindings = itertools.cycle(random.sample(["jsonrpc", "rest"], 2))
        while time.monotonic() < end:
            try:
                run = await task_start(user, next(numbers))
            except (Failure, aiohttp.ClientError, TimeoutError, KeyError) as exc:
                found.errors.append(f"start: {type(exc).__name__} {exc}")
                await asyncio.sleep(1)
                continue
            found.tasks.append(run)
            while True:
                # Past the step's end, follow the task to its end: the last check.
                hold = random.uniform(*cfg.hold_s) if time.monotonic() < end else None
                try:
                    rebuilt = await resubscribe(user, run.task_id, next(bindings), hold)
                except Failure as exc:
                    if ended_refusal(exc):
                        found.ended_between += 1
                        break
                    found.errors.append(f"subscribe: {exc}")
                    break
                except (aiohttp.ClientError, TimeoutError, KeyError) as exc:
                    found.errors.append(f"subscribe: {type(exc).__name__} {exc}")
                    break
                run.subscriptions.append(rebuilt)
                found.a2a.append(rebuilt.first_event_s)
                if rebuilt.ended:
                    break
                try:
                    found.sessions.append(
                        await session_reconnect(user, run.session_id, random.uniform(*cfg.hold_s))
                    )
                except (Failure, aiohttp.ClientError, TimeoutError) as exc:
                    found.errors.append(f"session stream: {type(exc).__name__} {exc}")

    await asyncio.gather(*(user_loop(u) for u in users))
    return found


@dataclass
class Checked:
    subscriptions: int = 0
    lost: int = 0
    repeated: int = 0
    to_the_end: int = 0
    unfinished_tasks: int = 0
    examples: list[str] = field(default_factory=list)


def is_subsequence(short: str, long: str) -> bool:
    rest = iter(long)
    return all(char in rest for char in short)


def resubscribes_check(found: Resubscribes) -> Checked:
    """Each subscription's answers against the log's, once its task has ended."""
    from a2a_api.models import AgentTask
    from a2a_api.services import TERMINAL, task_view
    from sessions.models import Event

    checked = Checked()
    for run in found.tasks:
        state = task_view(AgentTask.objects.get(pk=run.task_id)).state
        if state not in TERMINAL:
            checked.unfinished_tasks += 1
            continue
        logged = list(
            Event.objects.filter(session_id=run.session_id, kind="assistant_message")
            .order_by("seq")
            .values_list("payload__text", flat=True)
        )
        for sub in run.subscriptions:
            checked.subscriptions += 1
            checked.to_the_end += sub.ended
            texts = list(sub.texts.items())
            wrong = sub.bad_chunks > 0 or len(texts) > len(logged)
            for (key, text), expected in zip(texts, logged, strict=False):
                # A closed answer, or one of a stream followed to the end, is whole.
                whole = sub.ended or key in sub.closed
                wrong |= text != expected if whole else not expected.startswith(text)
            if sub.ended:
                wrong |= len(texts) != len(logged)
            if not wrong:
                continue
            got, want = "".join(t for _, t in texts), "".join(logged)
            if len(texts) > len(logged) or not is_subsequence(got, want):
                checked.repeated += 1
            else:
                checked.lost += 1
            if len(checked.examples) < 3:
                checked.examples.append(
                    f"{run.task_id} ({sub.binding}): {sub.texts!r} vs {logged!r}"
                )
    return checked


# --- printing -------------------------------------------------------------------------------


def ms(values: list[float], q: float) -> str:
    return f"{1000 * percentile(values, q):,.1f}" if values else "—"


def pair(values: list[float]) -> str:
    return f"{ms(values, 0.5):>7} {ms(values, 0.95):>7}"


def print_turns(users: int, mixed: Step, alone: dict[str, Step], box: str) -> bool:
    """One row a path; the ratios to the sessions API's; whether the target was met."""
    for path in PATHS:
        turns = mixed.turns[path]
        cpu = alone[path].cpu
        errors = sum(1 for e in mixed.errors + alone[path].errors if e.startswith(f"{path}:"))
        print(
            f"  {users:>5}  {path:<14}{len(turns):>6}   {pair([t.first_event for t in turns])}"
            f"   {pair([t.started for t in turns])}   {pair([t.first_text for t in turns])}"
            f"   {1000 * cpu['web']:>6.1f} {1000 * cpu['turns']:>6.1f} {errors:>7}",
            flush=True,
        )
    for line in [e for step in (mixed, *alone.values()) for e in step.errors][:3]:
        print(f"         error: {line}")
    met = True
    base = [t.started for t in mixed.turns["sessions"]]
    for path in PATHS[1:]:
        starts = [t.started for t in mixed.turns[path]]
        if not base or not starts:
            met = False
            continue
        p50 = statistics.median(starts) / statistics.median(base)
        p95 = percentile(starts, 0.95) / percentile(base, 0.95)
        web = alone[path].cpu["web"] / alone["sessions"].cpu["web"]
        met &= p50 <= RATIO_TARGET
        print(
            f"         {path} / sessions: turn start p50 {p50:.2f}x, p95 {p95:.2f}x"
            f" (target p50 ≤ {RATIO_TARGET}x: {'met' if p50 <= RATIO_TARGET else 'MISSED'});"
            f" web CPU a turn {web:.2f}x"
        )
    print(f"         {box}", flush=True)
    return met and not mixed.errors and not any(step.errors for step in alone.values())


def print_resubscribes(users: int, found: Resubscribes, checked: Checked, box: str) -> bool:
    p50 = statistics.median(found.a2a) if found.a2a else float("inf")
    print(
        f"  {users:>5}  SubscribeToTask → Task     {len(found.a2a):>6}   {pair(found.a2a)}"
        f"   (target p50 ≤ {1000 * RESUBSCRIBE_P50_TARGET_S:.0f} ms:"
        f" {'met' if p50 <= RESUBSCRIBE_P50_TARGET_S else 'MISSED'})",
        flush=True,
    )
    print(
        f"  {users:>5}  session stream → first     {len(found.sessions):>6}"
        f"   {pair(found.sessions)}"
    )
    print(
        f"         {len(found.tasks)} tasks, {checked.subscriptions} subscriptions checked"
        f" against the log ({checked.to_the_end} followed to the end):"
        f" {checked.lost} lost, {checked.repeated} repeated;"
        f" {found.ended_between} refused as ended between two subscriptions;"
        f" {checked.unfinished_tasks} tasks unfinished; {len(found.errors)} errors"
    )
    print(f"         {box}")
    for line in checked.examples + found.errors[:3]:
        print(f"         error: {line}")
    return (
        p50 <= RESUBSCRIBE_P50_TARGET_S
        and checked.lost == checked.repeated == 0
        and not found.errors
        and not checked.unfinished_tasks
    )


class Box:
    """The CPU each role used from now on, in cores, and how busy the machine was: what
    is not this benchmark's (its clients and the server's processes) is others' work."""

    def __init__(self, roles: dict[str, list[int]]) -> None:
        self.roles = roles
        self.ticks = machine_ticks()
        self.used = self._used()

    def _used(self) -> dict[str, int]:
        """Each role's ticks, its processes' children included (a tool worker's horse);
        the clients' are this process's own (the servers are its children)."""
        table = parents()
        used = {
            role: sum(sum(cpu_ticks(pid)) + live_children_ticks(pid, table) for pid in pids)
            for role, pids in self.roles.items()
        }
        return used | {"clients": cpu_ticks(os.getpid())[0]}

    def __str__(self) -> str:
        busy, every = machine_ticks()
        cores = os.cpu_count() or 1
        elapsed = max(1, every - self.ticks[1]) / cores  # ticks of one core
        used = self._used()
        shares = {role: (used[role] - self.used[role]) / elapsed for role in used}
        busy_cores = (busy - self.ticks[0]) / elapsed
        others = max(0.0, busy_cores - sum(shares.values()))
        return (
            "CPU (cores): "
            + ", ".join(f"{role} {share:.2f}" for role, share in shares.items())
            + f"; others' {others:.2f}; the box {busy_cores:.2f} of {cores} busy"
        )


# --- the run --------------------------------------------------------------------------------


async def users_make(http: aiohttp.ClientSession, base: str, tokens: list[str]) -> list[User]:
    users = [User(http, base, token) for token in tokens]
    for user in users:
        await user.session_new()
    return users


async def turns_phase(base: str, tokens: list[str], cfg: Settings, pids: dict[str, int]) -> bool:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=TIMEOUT) as http:
        everyone = await users_make(http, base, tokens)
        for path in PATHS:  # warm each path up
            await one_turn(everyone[0], path)
        print(
            "\nthe turn's start (ms)         turns   first event     turn start      first text"
            "     CPU/turn (ms)  errors\n"
            "   users  path                 p50     p95     p50     p95     p50     p95"
            "    web  turns",
            flush=True,
        )
        met = True
        for n in cfg.users:
            box = Box({role: [pid] for role, pid in pids.items()})
            mixed = await turns_step(everyone[:n], PATHS, cfg.step_s, cfg, pids)
            busy = str(box)
            alone = {
                path: await turns_step(everyone[:n], (path,), cfg.cpu_step_s, cfg, pids)
                for path in PATHS
            }
            met &= print_turns(n, mixed, alone, busy)
        return met


async def resubscribe_phase(
    base: str, tokens: list[str], cfg: Settings, roles: dict[str, list[int]]
) -> bool:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=TIMEOUT) as http:
        everyone = [User(http, base, token) for token in tokens]
        print(
            "\nresubscribe (ms)                     count     p50     p95",
            flush=True,
        )
        met = True
        for n in cfg.users:
            box = Box(roles)
            found = await resubscribe_step(everyone[:n], cfg)
            busy = str(box)
            checked = await asyncio.to_thread(resubscribes_check, found)
            met &= print_resubscribes(n, found, checked, busy)
        return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: small and short")
    parser.add_argument("--only", choices=PARTS, help="one part of the two")
    args = parser.parse_args()
    cfg = Settings.from_environment(args.quick)
    parts = [args.only] if args.only else list(PARTS)
    scratch = Path(tempfile.mkdtemp(prefix="agentsite-bench-a2a-"))
    owned = scratch_environment(scratch, name="a2a")
    os.environ["AGENTSITE_MODEL"] = "offline"
    os.environ["AGENTSITE_REPORT_SECTION_DELAY_S"] = cfg.section_s
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from sessions.worker import TURN_WORKER_ARGS

    call_command("migrate", interactive=False, verbosity=0)
    tokens = api_tokens(max(cfg.users), username_prefix="a2a-user")
    manage = str(BASE_DIR / "manage.py")
    database = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(
        f"users {', '.join(map(str, cfg.users))}; {cfg.rate:g} messages/s in all,"
        f" {cfg.step_s:g} s a step, then {cfg.cpu_step_s:g} s a path alone; resubscribes for"
        f" {cfg.resubscribe_s:g} s, streams held {cfg.hold_s[0]:g}-{cfg.hold_s[1]:g} s;"
        f" 1 daphne, 1 turn worker, {cfg.tool_workers} tool workers; {database};"
        f" load average {load_average()} at the start; logs in {scratch}",
        flush=True,
    )
    turn_worker = process_start([manage, *TURN_WORKER_ARGS], log=scratch / "worker-turns.log")
    owned.append(turn_worker)
    daphne, port = daphne_start(scratch)
    owned.append(daphne)
    base = f"http://127.0.0.1:{port}"
    passed = True
    try:
        workers_wait("turns")
        if "turns" in parts:
            pids = {"web": daphne.pid, "turns": turn_worker.pid}
            passed &= asyncio.run(turns_phase(base, tokens, cfg, pids))
        if "resubscribe" not in parts:
            return 0 if passed else 1
        # The answers streamed a token at a time, so subscriptions join them midway.
        processes_stop([turn_worker])
        owned.remove(turn_worker)
        env = {**os.environ, "AGENTSITE_OFFLINE_OUTPUT_TOKEN_S": cfg.token_s}
        turn_worker = process_start(
            [manage, *TURN_WORKER_ARGS], log=scratch / "worker-turns.log", env=env
        )
        tool_workers = tool_workers_start(scratch, cfg.tool_workers)
        owned += [turn_worker, *tool_workers]
        workers_wait("turns")
        workers_wait("tools", cfg.tool_workers)
        roles = {
            "web": [daphne.pid],
            "turns": [turn_worker.pid],
            "tools": [p.pid for p in tool_workers],
        }
        passed &= asyncio.run(resubscribe_phase(base, tokens, cfg, roles))
        print(f"\nload average {load_average()} at the end")
    finally:
        processes_stop(owned)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
