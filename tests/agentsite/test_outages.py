"""Outages cost nothing: the API and every process while Redis or the database is away.

The Redis tests run against a Redis server of the test's own, which they kill
and start again empty, as an operator saw happen: a real web server, real
workers and the real scheduler.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentsite.core.embedded_redis import free_port
from jobs.models import Job
from sessions.models import Run
from sessions.worker import TURN_WORKER_ARGS
from tests.conftest import Processes, api_client_for, wait_until
from tests.servers import OwnRedis
from tests.sessions.test_stream_clients import daphne_serve

pytestmark = pytest.mark.django_db(transaction=True)


def headers_for(user: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_client_for(user).raw_token}"}  # type: ignore[attr-defined]


def start_job(
    base: str,
    headers: dict[str, str],
    key: str,
    tool: str = "noop",
    *,
    session_id: str | None = None,
    **args: Any,
) -> httpx.Response:
    """POST /api/jobs: ``tool`` with ``args``, in ``session_id`` if given."""
    body: dict[str, Any] = {"tool": tool, "args": args}
    if session_id is not None:
        body["session_id"] = session_id
    return httpx.post(
        f"{base}/api/jobs",
        json=body,
        headers={**headers, "Idempotency-Key": key},
        timeout=10,
    )


def send_message(base: str, headers: dict[str, str], session_id: str, text: str) -> httpx.Response:
    return httpx.post(
        f"{base}/api/sessions/{session_id}/messages",
        json={"text": text},
        headers=headers,
        timeout=10,
    )


def test_work_accepted_while_redis_is_down_runs_once_it_is_back(
    processes: Processes, own_redis: OwnRedis, user: Any
) -> None:
    env = {"REDIS_URL": own_redis.url, "AGENTSITE_REDIS_PREFIX": f"outage-{uuid.uuid4().hex}"}
    base = daphne_serve(processes, "daphne-outage", env=env)
    headers = headers_for(user)
    session = httpx.post(f"{base}/api/sessions", json={}, headers=headers, timeout=10).json()

    own_redis.kill()
    # Before: "Server Error (500)" as an HTML page, and the job was not handed over.
    job = start_job(base, headers, "during-outage")
    assert job.status_code == 202, job.text
    job_id = job.json()["job_id"]
    message = send_message(base, headers, session["session_id"], "hello while redis is down")
    assert message.status_code == 202, message.text
    run_id = message.json()["run_id"]
    # Kept in the database. (The suite's own scheduler shares this database and may
    # hand them to the suite's workers on the other Redis at any moment from now on,
    # so "queued" is not all they can be by the time we look.)
    assert Job.objects.get(pk=job_id).status not in Job.TERMINAL - {Job.Status.DONE}
    assert Run.objects.get(pk=run_id).status not in Run.TERMINAL - {Run.Status.COMPLETED}

    own_redis.start()  # empty: it knows nothing of either
    workers = [
        processes.start("outage-tools", "rqworker", "tools", "default", env=env),
        processes.start("outage-turns", *TURN_WORKER_ARGS, env=env),
        processes.start("outage-scheduler", "scheduler", env=env),
        processes.named("daphne-outage"),
    ]
    try:
        done = wait_until(
            lambda: Job.objects.filter(pk=job_id, status__in=Job.TERMINAL).first(), timeout=60
        )
        assert done.status == Job.Status.DONE
        finished = wait_until(
            lambda: Run.objects.filter(pk=run_id, status__in=Run.TERMINAL).first(), timeout=60
        )
        assert finished.status == Run.Status.COMPLETED
        # And the web process, which never restarted, talks to the new Redis.
        again = start_job(base, headers, "after-outage")
        assert again.status_code == 202, again.text
        assert wait_until(
            lambda: Job.objects.filter(pk=again.json()["job_id"], status=Job.Status.DONE).exists(),
            timeout=30,
        )
    finally:
        for proc in workers:
            processes.stop(proc)


def test_unexpected_errors_answer_in_the_api_error_format(rf: Any) -> None:
    """An error no handler expected is a JSON 500 with a code, never Django's HTML page:
    inside an API operation, and around one (middleware, routing)."""
    from agentsite.api import on_unexpected_error
    from agentsite.web.error_pages import server_error

    inside = on_unexpected_error(rf.get("/api/jobs"), RuntimeError("boom"))
    around = server_error(rf.get("/api/jobs"))
    for response in (inside, around):
        assert response.status_code == 500
        assert response["Content-Type"].startswith("application/json")
        assert json.loads(response.content)["error"]["code"] == "internal_error"
    assert b"boom" not in inside.content  # no internals leak to the client
    page = server_error(rf.get("/sessions/"))
    assert page.status_code == 500 and page["Content-Type"].startswith("text/html")


def test_every_process_rides_out_redis_dying_and_coming_back_empty(
    processes: Processes, own_redis: OwnRedis, user: Any
) -> None:
    """Before: both tool workers and the scheduler exited; /healthz stayed 503 for good."""
    env = {"REDIS_URL": own_redis.url, "AGENTSITE_REDIS_PREFIX": f"outage-{uuid.uuid4().hex}"}
    base = daphne_serve(processes, "daphne-rides-out", env=env)
    stack = [
        processes.start("rides-out-tools", "rqworker", "tools", "default", env=env),
        processes.start("rides-out-turns", *TURN_WORKER_ARGS, env=env),
        processes.start("rides-out-scheduler", "scheduler", env=env),
        processes.named("daphne-rides-out"),
    ]
    headers = headers_for(user)

    def healthy() -> bool:
        return httpx.get(f"{base}/healthz", timeout=5).status_code == 200

    try:
        assert wait_until(healthy, timeout=30)
        # One tool worker: the first sleeps through the outage in its horse, the
        # others wait in a queue that Redis is about to lose.
        before = [
            start_job(base, headers, f"before-{i}", "sleepy", seconds=2, steps=20).json()["job_id"]
            for i in range(5)
        ]
        wait_until(lambda: Job.objects.filter(pk__in=before, status=Job.Status.RUNNING).exists())
        own_redis.kill()
        time.sleep(4)
        assert [proc.poll() for proc in stack] == [None, None, None, None]
        assert httpx.get(f"{base}/healthz", timeout=5).status_code == 503
        own_redis.start()  # empty
        restarted = time.monotonic()
        assert wait_until(healthy, timeout=10), "healthz not back within 10 s"
        assert time.monotonic() - restarted <= 10
        assert [proc.poll() for proc in stack] == [None, None, None, None]

        # Every job accepted before the outage reaches a truthful end: the ones Redis
        # forgot are handed over again by the sweep.
        ended = wait_until(
            lambda: Job.objects.filter(pk__in=before, status__in=Job.TERMINAL).count() == 5,
            timeout=60,
        )
        assert ended
        outcomes = Job.objects.filter(pk__in=before).values_list(
            "status", "error_code", "error_message"
        )
        assert {o[0] for o in outcomes} == {Job.Status.DONE}, list(outcomes)
        # New work goes through every process.
        session = httpx.post(f"{base}/api/sessions", json={}, headers=headers, timeout=10).json()
        reply = send_message(base, headers, session["session_id"], "hello again")
        assert reply.status_code == 202, reply.text
        run = wait_until(
            lambda: Run.objects.filter(pk=reply.json()["run_id"], status__in=Run.TERMINAL).first(),
            timeout=30,
        )
        assert run.status == Run.Status.COMPLETED
    finally:
        for proc in stack:
            processes.stop(proc)


@pytest.mark.parametrize(
    ("method", "url", "status", "code"),
    [
        ("get", "/api/no-such-operation", 404, "not_found"),
        ("put", "/api/jobs", 405, "method_not_allowed"),
        ("delete", "/api/me", 405, "method_not_allowed"),
    ],
)
def test_an_unknown_api_path_or_method_answers_in_the_api_error_format(
    api_client: Any, method: str, url: str, status: int, code: str
) -> None:
    # Before: Django's HTML "Not Found" page, and a plain-text "Method not allowed".
    response = getattr(api_client, method)(url)
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == code
    if status == 405:
        assert response["Allow"]  # which methods the path does take


def test_the_database_being_away_is_a_503_with_retry_after(api_client: Any) -> None:
    from django.db import connection

    original = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "sqlite":
        connection.settings_dict["NAME"] = "/nonexistent-directory/agentsite.sqlite3"
    else:
        connection.settings_dict["PORT"] = str(free_port())  # nothing listens there
    try:
        response = api_client.get("/api/jobs")
    finally:
        connection.close()
        connection.settings_dict.update(original)
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json()["error"]["code"] == "unavailable"


def test_a_tool_whose_worker_alone_is_killed_still_records_its_result(
    processes: Processes, own_redis: OwnRedis, user: Any
) -> None:
    """Before: the horse went on with the tool, and its result was thrown away (worker_lost)."""
    from tests.jobs.test_worker_lost import children_of

    env = {"REDIS_URL": own_redis.url, "AGENTSITE_REDIS_PREFIX": f"orphan-{uuid.uuid4().hex}"}
    base = daphne_serve(processes, "daphne-orphan", env=env)
    worker = processes.start("orphan-tools", "rqworker", "tools", "default", env=env)
    scheduler = processes.start("orphan-scheduler", "scheduler", env=env)
    try:
        created = start_job(base, headers_for(user), "orphaned", "sleepy", seconds=8, steps=80)
        assert created.status_code == 202, created.text
        job_id = created.json()["job_id"]
        # Progress is reported by the tool in the horse: the job has been handed over. (The
        # worker marks the job running before it hands it to its warm horse: killed in
        # between, the job is the worker's loss, which tests/jobs/test_worker_lost.py covers.)
        wait_until(lambda: Job.objects.filter(pk=job_id, progress_fraction__gt=0).exists())
        horses = wait_until(lambda: children_of(worker.pid))
        worker.kill()  # the worker's main process only; its horse runs on
        worker.wait()
        assert all(Path(f"/proc/{pid}").exists() for pid in horses)

        job = wait_until(
            lambda: Job.objects.filter(pk=job_id, status__in=Job.TERMINAL).first(), timeout=30
        )
        assert (job.status, job.error_code) == (Job.Status.DONE, "")
        assert job.result is not None
    finally:
        processes.stop(scheduler)
        processes.stop(worker)
        processes.stop(processes.named("daphne-orphan"))


def test_the_web_process_pool_switch_is_not_inherited_by_the_processes_it_starts() -> None:
    """Before: importing the ASGI app left AGENTSITE_DB_POOL=true in the environment, so
    every worker started afterwards (by the tests, or by anything that imports the app)
    took a connection pool, which breaks in a forked work horse."""
    import os

    import agentsite.asgi  # noqa: F401

    assert "AGENTSITE_DB_POOL" not in os.environ
