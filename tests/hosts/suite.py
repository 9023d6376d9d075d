"""The production layout on hosts of its own: what a proxy, a lost web host and a lost
Redis primary cost a client — nothing.

Eight network namespaces on one bridge (``tests/hosts/network.py``, the address plan
in docs/development.md): PostgreSQL, a Redis primary, replica and three sentinels,
two web hosts, a worker host and nginx with ``deploy/nginx/agentsite.conf``
(``tests/hosts/layout.py``). The test process is the alice, on the bridge itself.
Every test ends by checking the final state of each job, run and event it caused.
The Redis failover goes last: the primary it kills stays dead.

Run by ``make hosts`` (root, ``ip netns``, nginx, redis-server and PostgreSQL's
programs; it skips, saying which is missing, without them).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest

if "tests.hosts.environment" not in sys.modules:
    pytest.exit(
        "The hosts suite builds hosts of its own: run it with `make hosts` "
        "(pytest -p tests.hosts.environment tests/hosts/suite.py).",
        returncode=4,
    )

from django.contrib.auth import get_user_model
from django.db import close_old_connections, connections
from websockets.sync.client import connect as websocket_connect
from websockets.typing import Subprotocol

from agentsite.core.database import DATABASE_AWAY
from agentsite.ops.health import scheduler_state
from jobs.models import Job
from sessions.models import Event, Run
from tests.agentsite.test_outages import headers_for, send_message, start_job
from tests.conftest import ARTIFACTS, wait_until
from tests.hosts.environment import UNAVAILABLE
from tests.hosts.layout import (
    PROXY,
    WEB_HOSTS,
    WORKER_SKEW_S,
    Layout,
    PostgresPair,
    RedisTrio,
    scratch_clear,
    served_by,
    web_base,
)
from tests.hosts.network import (
    HOSTS,
    RUNNER,
    HostProcesses,
    default_routes,
    host_cut,
    host_mend,
    in_namespace,
    leftovers_remove,
    network_build,
)
from tests.jobs.test_worker_lost import children_of
from tests.sessions.test_stream_clients import sse_events

if UNAVAILABLE:
    pytest.skip(UNAVAILABLE, allow_module_level=True)

pytestmark = pytest.mark.django_db(transaction=True)
# Every request would be a line: only failures and the figures are worth reading.
logging.getLogger("httpx").setLevel(logging.WARNING)

# A client takes a stream for dead after this long without a byte (three heartbeats).
STREAM_SILENT_S = 3
# From the promotion, every process must be on the new primary within this.
REDIS_FOLLOW_S = 15
PG_FOLLOW_S = 30
# How long the PostgreSQL primary is gone before the standby is promoted: about what a
# managed database's failure detection takes (HOSTS_PROMOTE_AFTER_S=0: at once).
PROMOTE_AFTER_S = float(os.environ.get("HOSTS_PROMOTE_AFTER_S", "20"))


# --- the hosts ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def hosts() -> Iterator[HostProcesses]:
    """The namespaces and what runs in them; all of it gone afterwards, whatever happened."""
    # The logs of this run only (they stay for reading after it).
    shutil.rmtree(ARTIFACTS / "hosts", ignore_errors=True)
    running = HostProcesses(logs=ARTIFACTS / "hosts")
    try:
        scratch_clear()
        network_build()
        assert default_routes() == []
        yield running
    finally:
        running.stop_all()
        leftovers_remove()
        scratch_clear()


@pytest.fixture(scope="session")
def postgres(hosts: HostProcesses) -> Iterator[PostgresPair]:
    """The primary on pg1 and its synchronous standby on pg2 (pytest-django creates the
    test database on the primary; the standby has it too)."""
    pair = PostgresPair()
    try:
        pair.start()
        yield pair
    finally:
        pair.remove()


@pytest.fixture(scope="session")
def backends(hosts: HostProcesses, postgres: PostgresPair) -> RedisTrio:
    """The Redis hosts, once PostgreSQL is up."""
    trio = RedisTrio(hosts)
    trio.start()
    return trio


@pytest.fixture(scope="session")
def django_db_setup(backends: RedisTrio, django_db_setup: None) -> None:
    """pytest-django's test database, created once the pg hosts are up."""


@pytest.fixture(scope="session")
def layout(
    hosts: HostProcesses, backends: RedisTrio, postgres: PostgresPair, django_db_setup: None
) -> Iterator[Layout]:
    site = Layout(hosts=hosts, redis=backends, postgres=postgres)
    try:
        site.start()
        yield site
    finally:
        # Before the test database is dropped: nothing may hold a connection to it.
        hosts.stop(site.units())


@pytest.fixture
def alice(layout: Layout, transactional_db: None) -> dict[str, str]:
    """An API token's headers, for a user of the test's own."""
    user = get_user_model().objects.create_user(username=f"u{uuid.uuid4().hex[:8]}")
    return headers_for(user)


def session_open(headers: dict[str, str]) -> str:
    r = httpx.post(f"{PROXY}/api/sessions", json={}, headers=headers, timeout=10)
    assert r.status_code == 201, r.text
    return str(r.json()["session_id"])


def accepted(r: httpx.Response, key: str) -> str:
    assert r.status_code == 202, r.text
    return str(r.json()[key])


def jobs_ended(job_ids: list[str], timeout: float) -> list[Job]:
    if not job_ids:
        return []

    def ended() -> list[Job] | None:
        jobs = list(Job.objects.filter(pk__in=job_ids, status__in=Job.TERMINAL))
        return jobs if len(jobs) == len(job_ids) else None

    return list(wait_until(ended, timeout=timeout, interval=0.2))


def runs_ended(run_ids: list[str], timeout: float) -> list[Run]:
    if not run_ids:
        return []

    def ended() -> list[Run] | None:
        runs = list(Run.objects.filter(pk__in=run_ids, status__in=Run.TERMINAL))
        return runs if len(runs) == len(run_ids) else None

    return list(wait_until(ended, timeout=timeout, interval=0.2))


def session_log(session_id: str) -> list[int]:
    return list(
        Event.objects.filter(session_id=session_id).order_by("seq").values_list("seq", flat=True)
    )


def finished_truthfully(job_ids: list[str], run_ids: list[str], timeout: float = 60) -> None:
    """Every job done with its result, every run completed with its answer."""
    jobs = jobs_ended(job_ids, timeout)
    assert [(j.status, j.error_code) for j in jobs] == [(Job.Status.DONE, "")] * len(jobs)
    assert all(j.result is not None for j in jobs)
    runs = runs_ended(run_ids, timeout)
    assert [r.status for r in runs] == [Run.Status.COMPLETED] * len(runs)
    for run in runs:
        assert Event.objects.filter(run=run, kind=Event.Kind.ASSISTANT_MESSAGE).count() == 1


# --- (1) a stream outlives its web host ----------------------------------------------


class Follower(threading.Thread):
    """A client following a session through the proxy, as a browser's EventSource does:
    a connection silent for ``STREAM_SILENT_S`` is dropped and opened again with
    ``Last-Event-ID``."""

    def __init__(self, session_id: str, headers: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.url = f"{PROXY}/api/sessions/{session_id}/stream"
        self.headers = headers
        self.seqs: list[int] = []
        self.last_id = ""
        # The web host that served each connection, in order.
        self.served_by: list[str] = []
        self.refused: list[int] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        timeout = httpx.Timeout(10, read=STREAM_SILENT_S)
        while not self.stopping.is_set():
            resume = {"Last-Event-ID": self.last_id} if self.last_id else {}
            try:
                with httpx.stream(
                    "GET", self.url, headers={**self.headers, **resume}, timeout=timeout
                ) as r:
                    if r.status_code != 200:
                        self.refused.append(r.status_code)
                        time.sleep(0.5)
                        continue
                    self.served_by.append(served_by(r.headers))
                    for event in sse_events(r.iter_lines()):
                        if self.stopping.is_set():
                            return
                        if event["data"] is not None:
                            self.seqs.append(event["data"]["seq"])
                            self.last_id = event["id"]
            except httpx.HTTPError:
                pass  # silent, or cut: again, from the last event seen


def test_a_stream_cut_off_with_its_web_host_resumes_on_the_other(
    layout: Layout, alice: dict[str, str]
) -> None:
    session_id = session_open(alice)
    follower = Follower(session_id, alice)
    follower.start()
    wait_until(lambda: follower.served_by, timeout=10)
    serving = follower.served_by[0]
    other = next(host for host in WEB_HOSTS if host != serving)
    runs = [accepted(send_message(PROXY, alice, session_id, "tell me a story"), "run_id")]
    jobs = [
        accepted(
            start_job(
                PROXY, alice, uuid.uuid4().hex, "sleepy", seconds=3, steps=12, session_id=session_id
            ),
            "job_id",
        )
    ]
    # Mid-stream: the turn streams its answer, the job its progress.
    wait_until(lambda: len(follower.seqs) >= 6, timeout=30)
    host_cut(serving)
    cut = time.monotonic()
    seen_before_cut = len(follower.seqs)
    try:
        wait_until(lambda: len(follower.served_by) >= 2, timeout=30)
        print(
            f"\nhosts: the stream resumed on {other} {time.monotonic() - cut:.1f} s after the cut"
        )
        assert follower.served_by[1:] == [other] * (len(follower.served_by) - 1)
        # More work while the host is away: the proxy passes it to the other one.
        runs.append(accepted(send_message(PROXY, alice, session_id, "and then?"), "run_id"))
        job = start_job(PROXY, alice, uuid.uuid4().hex, "noop", session_id=session_id)
        jobs.append(accepted(job, "job_id"))
        assert served_by(job.headers) == other

        finished_truthfully(jobs, runs)
        log = session_log(session_id)
        wait_until(lambda: follower.seqs[-1:] == log[-1:], timeout=30)
    finally:
        follower.stopping.set()
        host_mend(serving)
        follower.join(10)
    assert follower.seqs == log  # not one missing, not one twice
    assert 0 < seen_before_cut < len(log)
    assert log == list(range(1, len(log) + 1))
    assert follower.refused == []
    # The cut host comes back as it was: nothing restarted, everything alive.
    wait_until(lambda: httpx.get(f"{web_base(serving)}/healthz", timeout=5).status_code == 200)
    assert set(layout.alive().values()) == {None}, layout.alive()


# --- (2) websockets ------------------------------------------------------------------


def test_a_websocket_is_upgraded_through_the_proxy(layout: Layout, alice: dict[str, str]) -> None:
    session_id = session_open(alice)
    token = alice["Authorization"].removeprefix("Bearer ")
    url = f"ws://{HOSTS['proxy']}:{PROXY.rsplit(':', 1)[1]}/ws/sessions/{session_id}/"
    protocols = [Subprotocol("agentsite"), Subprotocol(f"agentsite.bearer.{token}")]
    seqs: list[int] = []
    with websocket_connect(url, subprotocols=protocols, open_timeout=10) as ws:
        assert ws.subprotocol == "agentsite"
        assert ws.response is not None
        assert served_by(ws.response.headers) in WEB_HOSTS
        run_id = accepted(send_message(PROXY, alice, session_id, "hello socket"), "run_id")
        (run,) = runs_ended([run_id], timeout=30)
        last = session_log(session_id)[-1]
        while last not in seqs:
            frame = json.loads(ws.recv(timeout=10))
            if "seq" in frame:
                seqs.append(frame["seq"])
    assert run.status == Run.Status.COMPLETED
    assert seqs == session_log(session_id)
    finished_truthfully([], [run_id])


# --- (3) a job and a turn through the proxy -----------------------------------------


def polled_until(path: str, headers: dict[str, str], status: str) -> dict[str, Any]:
    """GET ``path`` through the proxy until its document says ``status``; the document."""

    def polled() -> dict[str, Any] | None:
        doc: dict[str, Any] = httpx.get(f"{PROXY}{path}", headers=headers, timeout=10).json()
        return doc if doc["status"] == status else None

    return dict(wait_until(polled, timeout=30, interval=0.2))


def test_a_job_and_a_turn_go_round_through_the_proxy(layout: Layout, alice: dict[str, str]) -> None:
    session_id = session_open(alice)
    started = start_job(PROXY, alice, uuid.uuid4().hex, "noop")
    job_id = accepted(started, "job_id")
    # The web host saw the client's address, not the proxy's (X-Forwarded-For).
    log = f"daphne-{served_by(started.headers)}"
    wait_until(
        lambda: any(
            line.startswith(f"{RUNNER}:") and "POST /api/jobs" in line
            for line in layout.hosts.log(log).splitlines()
        ),
        timeout=10,
    )
    assert polled_until(f"/api/jobs/{job_id}", alice, "done")["job_id"] == job_id
    result = httpx.get(f"{PROXY}/api/jobs/{job_id}/result", headers=alice, timeout=10)
    assert result.status_code == 200, result.text
    run_id = accepted(send_message(PROXY, alice, session_id, "hello proxy"), "run_id")
    assert polled_until(f"/api/runs/{run_id}", alice, "completed")["text"]
    finished_truthfully([job_id], [run_id])
    # A body over the app's limit is refused by the proxy, before any web host.
    big = httpx.post(
        f"{PROXY}/api/jobs", content=b"x" * (1024 * 1024 + 1), headers=alice, timeout=10
    )
    assert big.status_code == 413
    assert Job.objects.count() == 1


# --- (4) the worker host's clock runs 30 s ahead -------------------------------------


def worker_host_time(layout: Layout) -> float:
    """The time as the worker host's processes read it."""
    argv = in_namespace("worker", [sys.executable, "-c", "import time; print(time.time())"])
    env = {**os.environ, **layout.worker_clock()}
    return float(subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout)


def test_a_worker_host_whose_clock_is_ahead_loses_no_live_work_and_is_still_caught_dying(
    layout: Layout, alice: dict[str, str], settings: Any
) -> None:
    if layout.worker_offset.total_seconds() == 0:
        pytest.skip(
            "libfaketime is not installed (Debian: faketime): the worker host's clock is true"
        )
    ahead = worker_host_time(layout) - time.time()
    assert abs(ahead - WORKER_SKEW_S) < 2, ahead
    stale_s = settings.AGENTSITE_JOB_HEARTBEAT_STALE_S
    # Live work longer than the stale limit, on a host 30 s ahead, judged meanwhile by the
    # scheduler on the web hosts' time: nothing declared lost.
    session_id = session_open(alice)
    live = accepted(
        start_job(PROXY, alice, uuid.uuid4().hex, "sleepy", seconds=stale_s + 4, steps=20),
        "job_id",
    )
    run_id = accepted(send_message(PROXY, alice, session_id, "take your time"), "run_id")
    finished_truthfully([live], [run_id], timeout=60)

    # A job whose worker dies with its horse is found in the usual time, not 30 s late.
    doomed = accepted(
        start_job(PROXY, alice, uuid.uuid4().hex, "sleepy", seconds=60, steps=120), "job_id"
    )
    wait_until(lambda: job_running(doomed), timeout=30, interval=0.2)
    worker = layout.hosts.running["tools"]
    horses = wait_until(lambda: children_of(worker.pid))
    killed = time.monotonic()
    for pid in horses:
        os.kill(pid, signal.SIGKILL)
    layout.hosts.kill("tools")
    (job,) = wait_until(
        lambda: list(Job.objects.filter(pk=doomed, status__in=Job.TERMINAL)), timeout=40
    )
    found_after = time.monotonic() - killed
    print(
        f"\nhosts: worker host {ahead:.1f} s ahead; a job lasting {stale_s + 4} s ended done, "
        f"a turn completed; the killed job was found lost {found_after:.1f} s after the kill"
    )
    assert (job.status, job.error_code) == (Job.Status.FAILED, "worker_lost")
    # The stale limit and a sweep or two, not the 30 s of skew on top.
    assert found_after < stale_s + 8
    # Restarted as its unit's Restart=always would: the host works again.
    layout.start_worker_unit("tools", layout.worker_cwd)
    again = accepted(start_job(PROXY, alice, uuid.uuid4().hex, "noop"), "job_id")
    finished_truthfully([again], [])
    wait_until(layout.healthy, timeout=30, interval=0.5)


def job_running(job_id: str) -> bool:
    return Job.objects.filter(pk=job_id, status=Job.Status.RUNNING).exists()


# --- (6) the Redis primary is lost for good ------------------------------------------


def test_every_host_follows_a_redis_failover(layout: Layout, alice: dict[str, str]) -> None:
    session_id = session_open(alice)
    before = accepted(
        start_job(PROXY, alice, uuid.uuid4().hex, "sleepy", seconds=3, steps=6), "job_id"
    )
    wait_until(lambda: Job.objects.filter(pk=before, status=Job.Status.RUNNING).exists())

    killed_at = datetime.now().astimezone()
    killed = time.monotonic()
    layout.redis.kill_primary()
    # Accepted while there is no primary: kept in the database, handed over later.
    during = accepted(start_job(PROXY, alice, uuid.uuid4().hex, "noop"), "job_id")
    wait_until(lambda: layout.redis.primary() == "redis2", timeout=30, interval=0.1)
    promoted = time.monotonic()

    after = accepted(start_job(PROXY, alice, uuid.uuid4().hex, "noop"), "job_id")
    run_id = accepted(send_message(PROXY, alice, session_id, "still there?"), "run_id")

    # When each part was first seen working against the new primary.
    seen: dict[str, float] = {}
    checks: dict[str, Callable[[], bool]] = {
        "web hosts healthy": layout.healthy,
        "scheduler beating": lambda: scheduler_beat_since(killed_at + layout.worker_offset),
        "job accepted after promotion done": lambda: job_done(after),
        "job accepted during outage done": lambda: job_done(during),
        "turn completed": lambda: Run.objects.filter(
            pk=run_id, status=Run.Status.COMPLETED
        ).exists(),
    }

    def followed() -> bool:
        for part, check in checks.items():
            if part not in seen and check():
                seen[part] = time.monotonic()
        return len(seen) == len(checks)

    wait_until(followed, timeout=REDIS_FOLLOW_S, interval=0.2)
    parts = ", ".join(f"{part} +{at - promoted:.1f} s" for part, at in seen.items())
    print(
        f"\nhosts: Redis primary killed; the sentinels promoted the replica after "
        f"{promoted - killed:.1f} s; then {parts}; all followed "
        f"{max(seen.values()) - killed:.1f} s after the kill"
    )
    finished_truthfully([before, during, after], [run_id])
    assert set(layout.alive().values()) == {None}, layout.alive()


def job_done(job_id: str) -> bool:
    return Job.objects.filter(pk=job_id, status=Job.Status.DONE).exists()


def scheduler_beat_since(moment: datetime) -> bool:
    """The scheduler's heartbeat on the current primary is newer than ``moment``."""
    beat: str | None = scheduler_state().get("last_heartbeat")
    return beat is not None and datetime.fromisoformat(beat) > moment


# --- (6) the PostgreSQL primary is lost for good -------------------------------------


def database_read(check: Callable[[], bool]) -> bool:
    """``check()`` from this process, False while the database is away."""
    try:
        return check()
    except DATABASE_AWAY:
        close_old_connections()
        connections.close_all()
        return False


class Client(threading.Thread):
    """A client starting a job through the proxy every half second, as a careful client
    does: an answer other than 202 (or none) is sent again with the same
    ``Idempotency-Key`` until it is accepted. What it saw is kept."""

    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.headers = headers
        self.accepted: list[tuple[float, str]] = []  # (when, job id)
        self.refused: Counter[str] = Counter()
        self.retries = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            key = uuid.uuid4().hex
            while not self.stopping.is_set():
                try:
                    r = start_job(PROXY, self.headers, key, "noop")
                except httpx.TimeoutException:
                    self.refused["timeout"] += 1
                except httpx.HTTPError as exc:
                    self.refused[type(exc).__name__] += 1
                else:
                    if r.status_code == 202:
                        self.accepted.append((time.monotonic(), str(r.json()["job_id"])))
                        break
                    self.refused[str(r.status_code)] += 1
                self.retries += 1
                time.sleep(0.5)
            self.stopping.wait(0.5)

    def seen(self) -> str:
        refused = ", ".join(f"{n} {what}" for what, n in sorted(self.refused.items()))
        total = sum(self.refused.values())
        return f"{total} not accepted ({refused or 'none'}), each sent again until accepted"


def message_until_accepted(headers: dict[str, str], session_id: str, text: str) -> str:
    """POST a message until it is accepted (a 503 while the database is away took nothing)."""

    def sent() -> str | None:
        try:
            r = send_message(PROXY, headers, session_id, text)
        except httpx.HTTPError:
            return None
        return str(r.json()["run_id"]) if r.status_code == 202 else None

    return str(wait_until(sent, timeout=PG_FOLLOW_S, interval=0.5))


def test_every_host_follows_a_postgresql_failover(layout: Layout, alice: dict[str, str]) -> None:
    pair = layout.postgres
    assert pair.replicating() and pair.writable("pg1") and not pair.writable("pg2")
    session_id = session_open(alice)
    # In flight when the primary goes: a job that spans the outage (a partial result and
    # progress every half second), a short one, a turn.
    spanning = accepted(
        start_job(PROXY, alice, uuid.uuid4().hex, "sleepy", seconds=8, steps=16), "job_id"
    )
    wait_until(lambda: job_running(spanning), timeout=30, interval=0.2)
    short = accepted(
        start_job(PROXY, alice, uuid.uuid4().hex, "sleepy", seconds=2, steps=4), "job_id"
    )
    in_flight_run = accepted(send_message(PROXY, alice, session_id, "a long story"), "run_id")
    time.sleep(1)
    client = Client(alice)
    client.start()

    lost = time.monotonic()
    pair.lose_primary()
    time.sleep(PROMOTE_AFTER_S)  # a managed database's failure detection
    pair.promote_standby()
    promoted = time.monotonic()
    promoted_at = pair.ask("pg2", "SELECT now()")[0][0]  # type: ignore[index]
    try:
        run_id = message_until_accepted(alice, session_id, "still there?")
        seen: dict[str, float] = {"turn accepted": time.monotonic()}

        def accepted_since() -> bool:
            return any(at > promoted for at, _ in client.accepted)

        def spanning_beats() -> bool:
            return Job.objects.filter(pk=spanning, heartbeat_at__gt=promoted_at).exists()

        def all_jobs_done() -> bool:
            ids = [spanning, short, *(job_id for _, job_id in client.accepted)]
            return Job.objects.filter(pk__in=ids, status=Job.Status.DONE).count() == len(ids)

        checks: dict[str, Callable[[], bool]] = {
            "job accepted": accepted_since,
            "web 200": layout.healthy,
            "spanning job beating": spanning_beats,
            "turn done": lambda: Run.objects.filter(pk=run_id, status__in=Run.TERMINAL).exists(),
            "jobs done": all_jobs_done,
        }

        def followed() -> bool:
            for part, check in checks.items():
                if part not in seen and database_read(check):
                    seen[part] = time.monotonic()
                    if part == "job accepted":
                        client.stopping.set()  # the jobs to see done are these
            return all(part in seen for part in checks)

        try:
            wait_until(followed, timeout=PG_FOLLOW_S, interval=0.2)
        except AssertionError:
            since = {part: round(at - promoted, 1) for part, at in seen.items()}
            raise AssertionError(f"only these followed (s after the promotion): {since}") from None
    finally:
        client.stopping.set()
        client.join(15)
    parts = ", ".join(f"{part} +{at - promoted:.1f} s" for part, at in seen.items())
    print(
        f"\nhosts: PostgreSQL primary lost; pg2 promoted {promoted - lost:.1f} s later; then "
        f"{parts}; all followed {max(seen.values()) - lost:.1f} s after the loss; "
        f"the client saw {client.seen()}"
    )
    assert pair.writable("pg2")
    # Nothing accepted lost, nothing left in a false state.
    jobs = [spanning, short, *(job_id for _, job_id in client.accepted)]
    finished_truthfully(jobs, [run_id])
    assert Job.objects.filter(pk=spanning).values_list("partial_count", flat=True).get() == 16
    (first,) = runs_ended([in_flight_run], timeout=30)
    assert first.status == Run.Status.COMPLETED, (first.status, first.error)
    assert list(Run.objects.filter(session_id=session_id).exclude(status__in=Run.TERMINAL)) == []
    log = session_log(session_id)
    assert log == list(range(1, len(log) + 1))
    assert set(layout.alive().values()) == {None}, layout.alive()
