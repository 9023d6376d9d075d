"""Faults cost nothing: the scale-out layout under every fault, with work in flight.

The layout of "Scaling out" in docs/operations.md: two daphnes, two tool workers, a turn
worker and the scheduler, on a PostgreSQL cluster and a Redis server of this
run's own (``tests/chaos/environment.py``). A client follows one session over
server-sent events the whole time, resuming with its last token on the other
web process after every drop, and another keeps starting jobs in that session,
so every completion also wakes a model turn. One fault after another is
injected while this goes on, each checked for what docs/operations.md promises of it;
then what must hold after all of them: every job and run ended truthfully, the
follower saw exactly the log (no gap, no duplicate), and every process is alive
and healthy.

A killed process is started again at once, as its supervisor (systemd's
``Restart=always``) would. ``serve`` restarting its children is tested in
tests/agentsite/test_serve.py; this layout has no ``serve``.
Run by ``make chaos``; the phases print how long each took.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import django_rq
import httpx
import pytest

if "tests.chaos.environment" not in sys.modules:
    pytest.exit(
        "The chaos suite needs servers of its own: run it with `make chaos` "
        "(pytest -p tests.chaos.environment tests/chaos/suite.py).",
        returncode=4,
    )

from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection
from rq import Worker

from jobs.models import Job
from sessions.models import Event, Run
from sessions.worker import TURN_WORKER_ARGS
from tests.agentsite.test_outages import headers_for, send_message, start_job
from tests.chaos.environment import POSTGRES, REDIS
from tests.conftest import Processes, wait_until
from tests.jobs.test_worker_lost import children_of
from tests.sessions.test_stream_clients import daphne_serve, sse_events

pytestmark = pytest.mark.django_db(transaction=True)
# Hundreds of requests: only the phases' lines, and failures, are worth reading.
logging.getLogger("httpx").setLevel(logging.WARNING)

T = TypeVar("T")

ENV = {
    "AGENTSITE_REDIS_PREFIX": f"chaos-{uuid.uuid4().hex[:8]}",
    # Followers hear from the server every 2 s, so a dead connection shows quickly.
    "AGENTSITE_SSE_HEARTBEAT_S": "2",
    # A turn takes a couple of seconds, so one can be caught mid-flight.
    "AGENTSITE_OFFLINE_CALL_S": "0.5",
    "AGENTSITE_OFFLINE_OUTPUT_TOKEN_S": "0.05",
    # A request waits this long for a database connection before its 503 (default 10 s).
    "AGENTSITE_DB_POOL_TIMEOUT_S": "3",
}
# The units of the layout: name → manage.py arguments.
WORKERS = {
    "tools-1": ["rqworker", "tools", "default"],
    "tools-2": ["rqworker", "tools", "default"],
    "turns": TURN_WORKER_ARGS,
    "scheduler": ["scheduler"],
}
TRAFFIC_EVERY_S = 1.5
FOLLOWER_HANGS_UP_S = 7
# Longer than the pool timeout above, so that requests meanwhile get their 503.
DB_DOWN_S = 5


def from_db(query: Callable[[], T]) -> T | None:
    """``query``'s answer, or None while the database is away (the connection is renewed)."""
    try:
        return query()
    except DatabaseError:
        connection.close()
        return None


def is_unavailable(response: httpx.Response) -> bool:
    """The answer docs/operations.md promises while Redis or the database is away."""
    return (
        response.status_code == 503
        and response.headers.get("content-type", "").startswith("application/json")
        and response.json().get("error", {}).get("code") == "unavailable"
        and "Retry-After" in response.headers
    )


def describe(response: httpx.Response) -> str:
    return (
        f"{response.request.method} {response.request.url.path} → {response.status_code} "
        + (response.text[:200])
    )


class Follower(threading.Thread):
    """A client following a session over SSE, resuming after every drop with its last token.

    It also hangs up by itself every ``FOLLOWER_HANGS_UP_S``, as a flaky network
    would, so that resumes happen during every fault. Each connection goes to
    the next web process, so a resume also crosses processes. Every refused
    reconnection is kept for the final check.
    """

    def __init__(self, bases: list[str], session_id: str, headers: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.bases, self.session_id, self.headers = bases, session_id, headers
        self.seqs: list[int] = []
        self.last_token = ""
        self.connections = 0
        self.refusals: list[httpx.Response] = []
        self.drops: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            base = self.bases[self.connections % len(self.bases)]
            self.connections += 1
            try:
                self.follow(base)
            except httpx.HTTPError as exc:
                self.drops.append(f"{base}: {exc!r}")
            self.stopping.wait(0.5)

    def follow(self, base: str) -> None:
        headers = {**self.headers, "Last-Event-ID": self.last_token}
        url = f"{base}/api/sessions/{self.session_id}/stream"
        hang_up_at = time.monotonic() + FOLLOWER_HANGS_UP_S
        with httpx.stream("GET", url, headers=headers, timeout=httpx.Timeout(10, read=15)) as r:
            if r.status_code != 200:
                r.read()
                self.refusals.append(r)
                return
            for event in sse_events(r.iter_lines()):
                if self.stopping.is_set() or time.monotonic() > hang_up_at:
                    return
                if event["data"] is not None:
                    self.seqs.append(event["data"]["seq"])
                    self.last_token = event["id"]


class Traffic(threading.Thread):
    """A client starting a short job in the session every ``TRAFFIC_EVERY_S``, on each web
    process in turn, and keeping every answer."""

    def __init__(self, bases: list[str], session_id: str, headers: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.bases, self.session_id, self.headers = bases, session_id, headers
        self.accepted: list[str] = []
        self.unavailable: list[httpx.Response] = []
        self.wrong: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        for n in range(10**6):
            if self.stopping.wait(TRAFFIC_EVERY_S):
                return
            base = self.bases[n % len(self.bases)]
            try:
                r = start_job(
                    base,
                    self.headers,
                    f"traffic-{n}",
                    "sleepy",
                    seconds=1.5,
                    steps=3,
                    session_id=self.session_id,
                )
            except httpx.HTTPError as exc:
                self.wrong.append(f"{base}: {exc!r}")
                continue
            if r.status_code == 202:
                self.accepted.append(r.json()["job_id"])
            elif is_unavailable(r):
                self.unavailable.append(r)
            else:
                self.wrong.append(describe(r))


@dataclass
class Layout:
    processes: Processes
    bases: list[str]
    headers: dict[str, str]
    session_id: str
    follower: Follower
    traffic: Traffic
    units: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    # Jobs this suite started itself, and the workers it killed with their horse.
    jobs: list[str] = field(default_factory=list)
    killed_with_horse: set[str] = field(default_factory=set)

    def start(self, name: str) -> subprocess.Popen[bytes]:
        self.units[name] = self.processes.start(f"chaos-{name}", *WORKERS[name], env=ENV)
        return self.units[name]

    def job(self, tool: str = "sleepy", base: str | None = None, **args: Any) -> str:
        r = start_job(
            base or self.bases[0],
            self.headers,
            uuid.uuid4().hex,
            tool,
            session_id=self.session_id,
            **args,
        )
        assert r.status_code == 202, describe(r)
        self.jobs.append(r.json()["job_id"])
        return str(r.json()["job_id"])

    def alive(self) -> dict[str, int | None]:
        return {name: proc.poll() for name, proc in self.units.items()}

    def healthy(self) -> bool:
        return all(httpx.get(f"{b}/healthz", timeout=5).status_code == 200 for b in self.bases)

    def tool_worker_running(self, job_id: str) -> tuple[str, subprocess.Popen[bytes], list[int]]:
        """The unit whose worker runs ``job_id``, and the pids of its work horse."""
        job = wait_until(
            lambda: from_db(lambda: Job.objects.filter(pk=job_id, status="running").first())
        )
        worker = wait_until(lambda: registered_worker_named(job.worker_name))
        name = next(n for n, p in self.units.items() if p.pid == worker.pid)
        horses = wait_until(lambda: children_of(worker.pid))
        return name, self.units[name], horses


def registered_worker_named(name: str) -> Any:
    return next(
        (w for w in Worker.all(connection=django_rq.get_connection("tools")) if w.name == name),
        None,
    )


def run_of(session_id: str, run_id: str) -> Run | None:
    return from_db(lambda: Run.objects.filter(pk=run_id, session_id=session_id).first())


def ended(job_ids: list[str], timeout: float) -> list[Job]:
    """Wait until every job is in a final state; the jobs. Names the stuck ones otherwise."""

    def all_ended() -> list[Job] | None:
        jobs = from_db(lambda: list(Job.objects.filter(pk__in=job_ids, status__in=Job.TERMINAL)))
        return jobs if jobs is not None and len(jobs) == len(set(job_ids)) else None

    try:
        return list(wait_until(all_ended, timeout=timeout, interval=0.2))
    except AssertionError:
        stuck = Job.objects.filter(pk__in=job_ids).exclude(status__in=Job.TERMINAL)
        raise AssertionError(
            f"jobs not ended within {timeout}s: "
            + repr(list(stuck.values("id", "status", "worker_name", "heartbeat_at")))
        ) from None


@pytest.fixture
def layout(processes: Processes, transactional_db: None) -> Iterator[Layout]:
    """The layout, up and healthy, with a follower and traffic under way."""
    user = get_user_model().objects.create_user(username="chaos", password="chaos-pw")
    headers = headers_for(user)
    bases = [daphne_serve(processes, f"chaos-web-{i}", env=ENV) for i in (1, 2)]
    session = httpx.post(f"{bases[0]}/api/sessions", json={}, headers=headers, timeout=10)
    assert session.status_code == 201, describe(session)
    session_id = session.json()["session_id"]
    chaos = Layout(
        processes=processes,
        bases=bases,
        headers=headers,
        session_id=session_id,
        follower=Follower(bases[::-1], session_id, headers),
        traffic=Traffic(bases, session_id, headers),
    )
    chaos.units.update({f"web-{i}": processes.named(f"chaos-web-{i}") for i in (1, 2)})
    for name in WORKERS:
        chaos.start(name)
    wait_until(chaos.healthy, timeout=60, interval=0.5)
    chaos.follower.start()
    chaos.traffic.start()
    try:
        yield chaos
    finally:
        chaos.traffic.stopping.set()
        chaos.follower.stopping.set()
        chaos.traffic.join(10)
        chaos.follower.join(20)
        for proc in chaos.units.values():
            processes.stop(proc)
        connection.close()


@pytest.mark.timeout(420)
def test_every_fault_costs_nothing(layout: Layout) -> None:
    for fault in (
        redis_dies_for_4_s_and_comes_back_empty,
        a_turn_worker_dies_mid_turn,
        a_tool_worker_dies_but_not_its_horse,
        a_tool_worker_dies_with_its_horse,
        the_database_restarts,
    ):
        began = time.monotonic()
        fault(layout)
        print(f"chaos: {fault.__name__}: {time.monotonic() - began:.1f}s")
    everything_ended_truthfully_and_the_follower_saw_the_log(layout)


def redis_dies_for_4_s_and_comes_back_empty(layout: Layout) -> None:
    """Work is accepted meanwhile (202: kept as queued, handed over once Redis answers),
    no process exits, /healthz is 200 again within 10 s, and every job ends done."""
    before = [layout.job(seconds=5, steps=10) for _ in range(3)]
    wait_until(lambda: from_db(lambda: Job.objects.filter(pk__in=before, status="running")))

    REDIS.kill()
    killed = time.monotonic()
    # The product keeps new work while Redis is away: committed as queued, handed over later.
    during = [layout.job(seconds=1, steps=2, base=base) for base in layout.bases]
    message = send_message(layout.bases[1], layout.headers, layout.session_id, "are you there?")
    assert message.status_code == 202, describe(message)
    for base in layout.bases:
        assert httpx.get(f"{base}/healthz", timeout=5).status_code == 503
    time.sleep(max(0.0, 4 - (time.monotonic() - killed)))
    assert all(code is None for code in layout.alive().values()), layout.alive()
    REDIS.start()  # empty

    assert wait_until(layout.healthy, timeout=10, interval=0.2), "healthz not 200 within 10 s"
    jobs = ended(before + during, timeout=60)
    assert {job.status for job in jobs} == {Job.Status.DONE}, [(j.pk, j.status) for j in jobs]
    run = wait_until(
        lambda: (r := run_of(layout.session_id, message.json()["run_id"])) and r.is_terminal and r,
        timeout=60,
    )
    assert run.status == Run.Status.COMPLETED
    assert all(code is None for code in layout.alive().values()), layout.alive()


def a_turn_worker_dies_mid_turn(layout: Layout) -> None:
    """Its run fails as worker_lost within 30 s, and the session's next message is answered."""
    message = send_message(layout.bases[0], layout.headers, layout.session_id, "tell me a story")
    assert message.status_code == 202, describe(message)
    run_id = message.json()["run_id"]
    # Mid-flight: the turn has begun to stream its answer.
    wait_until(
        lambda: from_db(
            lambda: (
                Event.objects.filter(run_id=run_id, kind="assistant_delta").exists()
                and Run.objects.filter(pk=run_id, status="running").exists()
            )
        ),
        timeout=30,
    )
    layout.units["turns"].kill()
    layout.units["turns"].wait()
    layout.start("turns")

    run = wait_until(
        lambda: (r := run_of(layout.session_id, run_id)) and r.is_terminal and r, timeout=30
    )
    assert run.status == Run.Status.FAILED
    assert Event.objects.get(run_id=run_id, kind="error").payload["code"] == "worker_lost"
    nxt = send_message(layout.bases[1], layout.headers, layout.session_id, "and now?")
    assert nxt.status_code == 202, describe(nxt)
    # Its run may queue behind one the lost run's end routed (the news of the jobs
    # that ended while it ran, 5-20 s with this model): answered, not in a set time.
    answered = wait_until(
        lambda: (r := run_of(layout.session_id, nxt.json()["run_id"])) and r.is_terminal and r,
        timeout=90,
    )
    assert answered.status == Run.Status.COMPLETED
    assert Event.objects.filter(run=answered, kind="assistant_message").exists()


def a_tool_worker_dies_but_not_its_horse(layout: Layout) -> None:
    """The horse finishes the tool and its result is recorded: the job ends done."""
    job_id = layout.job(seconds=6, steps=12)
    name, worker, horses = layout.tool_worker_running(job_id)
    worker.kill()  # the worker's main process only; its horse runs on
    worker.wait()
    layout.start(name)
    assert all(os.path.exists(f"/proc/{pid}") for pid in horses)

    (job,) = ended([job_id], timeout=30)
    assert (job.status, job.error_code) == (Job.Status.DONE, "")
    assert job.result is not None


def a_tool_worker_dies_with_its_horse(layout: Layout) -> None:
    """The whole machine goes: the job ends failed with worker_lost within 15 s."""
    job_id = layout.job(seconds=60, steps=60)
    name, worker, horses = layout.tool_worker_running(job_id)
    layout.killed_with_horse.add(Job.objects.get(pk=job_id).worker_name)
    for pid in [worker.pid, *horses]:
        os.kill(pid, signal.SIGKILL)
    worker.wait()
    layout.start(name)

    (job,) = ended([job_id], timeout=15)
    assert (job.status, job.error_code) == (Job.Status.FAILED, "worker_lost")


def the_database_restarts(layout: Layout) -> None:
    """Down for DB_DOWN_S under load: requests meanwhile wait up to the pool's timeout for
    a connection, then answer 503; afterwards every process finds the database again."""
    in_flight = [layout.job(seconds=6, steps=12) for _ in range(2)]
    wait_until(lambda: from_db(lambda: Job.objects.filter(pk__in=in_flight, status="running")))

    POSTGRES.stop("fast")
    stopped = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        asked = [
            pool.submit(request, base)
            for base in layout.bases
            for request in (
                lambda base: httpx.get(f"{base}/api/jobs", headers=layout.headers, timeout=30),
                lambda base: start_job(base, layout.headers, uuid.uuid4().hex, "noop"),
                lambda base: send_message(base, layout.headers, layout.session_id, "anyone?"),
            )
        ]
        health = [pool.submit(httpx.get, f"{base}/healthz", timeout=30) for base in layout.bases]
        time.sleep(max(0.0, DB_DOWN_S - (time.monotonic() - stopped)))
        POSTGRES.start()
        answers = [future.result() for future in asked]
    assert all(is_unavailable(r) for r in answers), [describe(r) for r in answers]
    assert all(h.result().status_code == 503 for h in health)

    def answers_again() -> bool:
        return all(
            httpx.get(f"{base}/api/jobs", headers=layout.headers, timeout=15).status_code == 200
            for base in layout.bases
        )

    assert wait_until(answers_again, timeout=10, interval=0.2)
    assert wait_until(layout.healthy, timeout=10, interval=0.2)
    jobs = ended(in_flight, timeout=60)
    assert {job.status for job in jobs} == {Job.Status.DONE}, [
        (j.pk, j.status, j.error_code, j.error_message) for j in jobs
    ]
    assert all(code is None for code in layout.alive().values()), layout.alive()


def everything_ended_truthfully_and_the_follower_saw_the_log(layout: Layout) -> None:
    layout.traffic.stopping.set()
    layout.traffic.join(15)
    assert layout.traffic.wrong == []
    assert layout.traffic.accepted, "the traffic never got a job in"

    jobs = ended(layout.jobs + layout.traffic.accepted, timeout=90)
    untruthful = [
        (job.pk, job.status, job.error_code, job.error_message, job.worker_name)
        for job in jobs
        if job.status != Job.Status.DONE
        and not (
            (job.status, job.error_code) == (Job.Status.FAILED, "worker_lost")
            and job.worker_name in layout.killed_with_horse
        )
    ]
    assert untruthful == []

    def all_runs_ended() -> bool:
        return not Run.objects.filter(
            session_id=layout.session_id, status__in=["queued", "running"]
        ).exists()

    wait_until(all_runs_ended, timeout=60, interval=0.2)
    failed = Run.objects.filter(session_id=layout.session_id, status=Run.Status.FAILED)
    codes = {
        run.pk: [e.payload.get("code") for e in Event.objects.filter(run=run, kind="error")]
        for run in failed
    }
    assert all(c == ["worker_lost"] for c in codes.values()), codes

    log = list(
        Event.objects.filter(session_id=layout.session_id)
        .order_by("seq")
        .values_list("seq", flat=True)
    )
    assert log == list(range(1, len(log) + 1))
    wait_until(lambda: layout.follower.seqs[-1:] == log[-1:], timeout=30, interval=0.2)
    layout.follower.stopping.set()
    layout.follower.join(20)
    assert layout.follower.seqs == log
    assert all(is_unavailable(r) for r in layout.follower.refusals), [
        describe(r) for r in layout.follower.refusals
    ]

    assert all(code is None for code in layout.alive().values()), layout.alive()
    assert wait_until(layout.healthy, timeout=10, interval=0.2)
    print(
        f"chaos: {len(log)} session events followed over {layout.follower.connections} "
        f"connections ({len(layout.follower.refusals)} refused with 503, "
        f"{len(layout.follower.drops)} dropped); "
        f"{len(jobs)} jobs ({len(layout.traffic.unavailable)} more refused with 503), "
        f"{Run.objects.filter(session_id=layout.session_id).count()} runs"
    )
