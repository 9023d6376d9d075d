"""The simulated users of bench/load.py, for Locust in headless mode (not a benchmark itself).

Each user takes an API token of its own (``BENCH_LOAD_TOKENS``, a JSON list),
opens a session and follows it over the websocket, then for
``BENCH_LOAD_ACTIVE_S`` seconds: sends a message every 10-20 s
(``BENCH_LOAD_MESSAGE_EVERY_S``, "10,20"), starts a 2-5 s ``sleepy`` job in
its session every minute (``BENCH_LOAD_JOB_EVERY_S``, 60; 0 starts none), and
polls that job while it runs and once it has ended. Afterwards it waits up to
``BENCH_LOAD_DRAIN_S`` for the replies and job ends it is owed, checks that the
stored log holds nothing its websocket did not show, and stops.

Measured here, in one process and one clock: time to first token (the message
POST → the first ``assistant_delta`` of the run named in its answer, on the
websocket) and the job's queue wait (``started_at - created_at`` as the job
itself records them, read with ``GET /api/jobs/{id}``). Every error is one
line: an unexpected HTTP status, a websocket that closed under the user, a gap
or repeat in the stream's ``seq``, a reply or job end that never came, a log
event the websocket never delivered. The raw figures go to ``BENCH_LOAD_RESULTS``
(JSON) when the test stops; Locust's own statistics carry them too.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import time
import uuid
from datetime import datetime
from typing import Any
from urllib.parse import quote

import gevent
import websocket
from locust import constant, events, task
from locust.contrib.fasthttp import FastHttpUser

TOKENS: list[str] = json.loads(open(os.environ["BENCH_LOAD_TOKENS"]).read())
RESULTS_PATH = os.environ["BENCH_LOAD_RESULTS"]
ACTIVE_S = float(os.environ.get("BENCH_LOAD_ACTIVE_S", "180"))
DRAIN_S = float(os.environ.get("BENCH_LOAD_DRAIN_S", "30"))
MESSAGE_EVERY_S = tuple(
    float(s) for s in os.environ.get("BENCH_LOAD_MESSAGE_EVERY_S", "10,20").split(",")
)
JOB_EVERY_S = float(os.environ.get("BENCH_LOAD_JOB_EVERY_S", "60"))
JOB_SECONDS = (2.0, 5.0)
TERMINAL_JOB_EVENTS = {"job_completed", "job_failed", "job_cancelled", "job_timed_out"}

RESULTS: dict[str, Any] = {
    "ttft": [],
    "queue_wait": [],
    "errors": [],
    "messages": 0,
    "jobs": 0,
    "frames": 0,
}
NEXT_TOKEN = itertools.count()
STARTED: list[float] = []
FINISHED_USERS: set[int] = set()


@events.test_start.add_listener
def test_start(environment: Any, **kwargs: Any) -> None:
    STARTED.append(time.monotonic())


@events.test_stop.add_listener
def test_stop(environment: Any, **kwargs: Any) -> None:
    with open(RESULTS_PATH, "w") as out:
        json.dump(RESULTS, out)


def parse_time(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


class ChatUser(FastHttpUser):
    wait_time = constant(0)  # the one task paces itself

    def on_start(self) -> None:
        self.number = next(NEXT_TOKEN)
        self.token = TOKENS[self.number % len(TOKENS)]
        self.headers = {"Authorization": f"Bearer {self.token}"}
        self.sent_at: dict[str, float] = {}  # run id → when its message was posted
        self.first_delta_at: dict[str, float] = {}  # run id → its first assistant_delta
        self.measured: set[str] = set()
        self.finished_runs: set[str] = set()
        self.current_run = ""
        self.jobs_started: dict[str, float] = {}  # job id → when it was posted
        self.jobs_ended: dict[str, float] = {}
        self.jobs_read: set[str] = set()
        self.last_seq = 0
        self.last_token = ""
        self.seen_seqs: set[int] = set()
        self.stopping = False
        self.ws: websocket.WebSocket | None = None
        self.session_id = self.create_session()
        self.connect()
        self.reader = gevent.spawn(self.read_stream)
        now = time.monotonic()
        # Spread over a whole period: with jobs every minute on the dot, users that
        # all began within a few seconds would keep sending theirs in one burst.
        self.next_message = now + random.uniform(0, MESSAGE_EVERY_S[0])
        self.next_job = (
            now + random.uniform(5, max(5.0, min(5 + JOB_EVERY_S, ACTIVE_S / 2)))
            if JOB_EVERY_S > 0
            else math.inf
        )
        self.polls: list[tuple[float, str]] = []  # (when, job id)

    def on_stop(self) -> None:
        if self.number not in FINISHED_USERS:
            # Stopped by Locust's run time before its drain ended: what it is still
            # owed is missing, and must count, not vanish with the user.
            self.error(
                "stopped before its replies and job ends came", getattr(self, "session_id", "-")
            )
            self.report_missing()
            FINISHED_USERS.add(self.number)
        self.stopping = True
        if self.ws is not None:
            self.ws.close()
        self.reader.kill(block=False)

    # What went wrong is counted twice: in the results file and in Locust's statistics.
    def error(self, what: str, detail: str) -> None:
        RESULTS["errors"].append(f"{what}: {detail}")
        events.request.fire(
            request_type="CHECK",
            name=what,
            response_time=0,
            response_length=0,
            exception=RuntimeError(detail),
            context={},
        )

    def sample(self, kind: str, name: str, seconds: float) -> None:
        RESULTS[kind].append(seconds)
        events.request.fire(
            request_type="MEASURE",
            name=name,
            response_time=seconds * 1000,
            response_length=0,
            exception=None,
            context={},
        )

    def call(
        self, method: str, path: str, expect: int, *, name: str = "", **kwargs: Any
    ) -> dict[str, Any] | None:
        name = name or path
        headers = {**self.headers, **kwargs.pop("headers", {})}
        with self.client.request(
            method, path, headers=headers, name=name, catch_response=True, **kwargs
        ) as resp:
            if resp.status_code != expect:
                body = (resp.text or "")[:200]
                resp.failure(f"{resp.status_code}")
                self.error(f"HTTP {method} {name}", f"{resp.status_code} {body}")
                return None
            return resp.json()

    def create_session(self) -> str:
        body = self.call("POST", "/api/sessions", 201, json={"title": f"load {self.number}"})
        if body is None:
            raise RuntimeError("could not create a session")
        return str(body["session_id"])

    # The websocket: a script authenticates with the subprotocol, sends no Origin.
    def connect(self) -> None:
        url = self.host.replace("http", "ws", 1) + f"/ws/sessions/{self.session_id}/"
        if self.last_token:
            url += f"?after={quote(self.last_token)}"
        self.ws = websocket.create_connection(
            url,
            subprotocols=["agentsite", f"agentsite.bearer.{self.token}"],
            suppress_origin=True,
            timeout=30,
        )
        self.ws.settimeout(None)

    def read_stream(self) -> None:
        while not self.stopping:
            try:
                assert self.ws is not None
                raw = self.ws.recv()
                if not raw:
                    raise websocket.WebSocketConnectionClosedException("closed by the server")
            except Exception as exc:
                if self.stopping:
                    return
                self.error("websocket drop", f"{self.session_id}: {exc!r}")
                self.reconnect()
                continue
            self.on_frame(json.loads(raw), time.monotonic())

    def reconnect(self) -> None:
        failed = False
        while not self.stopping:
            try:
                self.connect()
                return
            except Exception as exc:
                if not failed:  # one error per outage, not one per attempt
                    self.error("websocket reconnect", f"{self.session_id}: {exc!r}")
                failed = True
                gevent.sleep(1)

    def on_frame(self, frame: dict[str, Any], at: float) -> None:
        if "seq" not in frame:
            return  # a reply to a client frame; this user sends none
        RESULTS["frames"] += 1
        seq = frame["seq"]
        if seq != self.last_seq + 1:
            self.error("stream seq", f"{self.session_id}: {seq} after {self.last_seq}")
        self.last_seq = max(self.last_seq, seq)
        self.seen_seqs.add(seq)
        self.last_token = frame["token"]
        kind, payload = frame["kind"], frame["payload"]
        if kind == "run_started":
            self.current_run = payload["run_id"]
        elif kind == "assistant_delta" and self.current_run not in self.first_delta_at:
            self.first_delta_at[self.current_run] = at
            self.measure(self.current_run)
        elif kind == "run_finished":
            self.finished_runs.add(payload["run_id"])
            if payload.get("status") != "completed":
                self.error("run not completed", f"{payload['run_id']}: {payload}")
        elif kind == "job_event" and payload.get("event") in TERMINAL_JOB_EVENTS:
            self.jobs_ended[payload["job_id"]] = at
            self.polls.append((at, payload["job_id"]))

    def measure(self, run_id: str) -> None:
        """Time to first token, once both ends of it are known (either may come first)."""
        if run_id in self.sent_at and run_id in self.first_delta_at and run_id not in self.measured:
            self.measured.add(run_id)
            self.sample("ttft", "first token", self.first_delta_at[run_id] - self.sent_at[run_id])

    @task
    def act(self) -> None:
        if time.monotonic() - STARTED[0] >= ACTIVE_S:
            self.drain()
            return
        now = time.monotonic()
        if now >= self.next_message:
            self.next_message = now + random.uniform(*MESSAGE_EVERY_S)
            self.send_message()
        if now >= self.next_job:
            self.next_job = now + JOB_EVERY_S
            self.start_job()
        for due in [p for p in self.polls if p[0] <= now]:
            self.polls.remove(due)
            self.poll_job(due[1])
        wake = min([self.next_message, self.next_job, *(p[0] for p in self.polls)])
        gevent.sleep(max(0.0, wake - time.monotonic()))

    def send_message(self) -> None:
        sent = time.monotonic()
        body = self.call(
            "POST",
            f"/api/sessions/{self.session_id}/messages",
            202,
            json={"text": f"hello, this is message {RESULTS['messages']}"},
            name="/api/sessions/{id}/messages",
        )
        RESULTS["messages"] += 1
        if body is not None:
            self.sent_at[body["run_id"]] = sent
            self.measure(body["run_id"])

    def start_job(self) -> None:
        seconds = random.uniform(*JOB_SECONDS)
        body = self.call(
            "POST",
            "/api/jobs",
            202,
            json={
                "tool": "sleepy",
                "args": {"seconds": round(seconds, 2), "steps": math.ceil(seconds)},
                "session_id": self.session_id,
            },
            headers={"Idempotency-Key": uuid.uuid4().hex},
        )
        RESULTS["jobs"] += 1
        if body is not None:
            job_id = body["job_id"]
            self.jobs_started[job_id] = time.monotonic()
            self.polls.append((time.monotonic() + random.uniform(1, 2), job_id))

    def poll_job(self, job_id: str) -> None:
        # Whether its end had reached the websocket before the request left: an end
        # that arrives while the request is out must not be held against its answer.
        ended = job_id in self.jobs_ended
        doc = self.call("GET", f"/api/jobs/{job_id}", 200, name="/api/jobs/{id}")
        if doc is None or not ended or job_id in self.jobs_read:
            return
        self.jobs_read.add(job_id)
        if doc["status"] != "done":
            self.error("job not done", f"{job_id}: {doc['status']} {doc.get('error')}")
        if doc.get("started_at"):
            wait = parse_time(doc["started_at"]) - parse_time(doc["created_at"])
            self.sample("queue_wait", "job queue wait", wait)

    def drain(self) -> None:
        """Wait for what this user is owed, check the log against the stream, then rest."""
        if self.number in FINISHED_USERS:
            gevent.sleep(3600)
            return
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline and self.owed():
            for due in list(self.polls):
                self.polls.remove(due)
                self.poll_job(due[1])
            gevent.sleep(0.2)
        for due in list(self.polls):
            self.poll_job(due[1])
        self.report_missing()
        self.check_tail()
        FINISHED_USERS.add(self.number)
        if len(FINISHED_USERS) >= self.environment.runner.user_count:
            gevent.spawn_later(0.5, self.environment.runner.quit)

    def owed(self) -> bool:
        waiting_runs = [r for r in self.sent_at if r not in self.finished_runs]
        waiting_jobs = [j for j in self.jobs_started if j not in self.jobs_ended]
        return bool(waiting_runs or waiting_jobs or self.polls)

    def report_missing(self) -> None:
        for run_id in self.sent_at:
            if run_id not in self.first_delta_at:
                self.error("no first token", run_id)
            elif run_id not in self.finished_runs:
                self.error("no run_finished", run_id)
        for job_id in self.jobs_started:
            if job_id not in self.jobs_ended:
                self.error("no job end on the stream", job_id)

    def check_tail(self) -> None:
        """Whatever the log holds after the stream's last event must reach the stream too."""
        after = quote(self.last_token)
        body = self.call(
            "GET",
            f"/api/sessions/{self.session_id}/events?after={after}&limit=1000",
            200,
            name="/api/sessions/{id}/events",
        )
        if body is None:
            return
        stored = [e["seq"] for e in body["events"]]
        if stored:
            gevent.sleep(3)  # events still on their way
        unseen = [seq for seq in stored if seq not in self.seen_seqs]
        if unseen:
            self.error("event missing on the websocket", f"{self.session_id}: seq {unseen}")
