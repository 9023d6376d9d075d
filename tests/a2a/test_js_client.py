"""A second, independent client: the official JavaScript SDK (``@a2a-js/sdk``) talks to agentsite.

``tests/a2a/js/round_trips.mjs`` finds the agent from its card and, over the
binding it is given: sends a message and waits for the task; streams a tool
job's task, drops the stream and resubscribes, rebuilding the answer from its
chunks; cancels a task whose job runs; approves a call through a data part on
the same task. It prints one JSON result per step; each is checked here against
the database, as ``test_round_trips.py`` does for the Python client.

The SDK's version is pinned in ``tests/a2a/js/package-lock.json`` and installed
with ``npm ci`` from the npm registry, once for as long as the lock is unchanged.
Without Node.js 20+ and npm the test skips, saying so.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import queue
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from a2a_api.models import AgentTask
from jobs.models import Job
from sessions.llm.scripted import scripted_push
from sessions.models import AgentSession, Approval, ToolApprovalRule
from tests.a2a.conftest import BINDINGS, token_for
from tests.a2a.test_round_trips import assistant_texts
from tests.conftest import ARTIFACTS, Processes, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

JS_DIR = Path(__file__).parent / "js"
SCRIPT = JS_DIR / "round_trips.mjs"
# Written into node_modules after `npm ci` (which empties the folder first): the lock it
# installed, so a changed lock installs again.
STAMP = JS_DIR / "node_modules" / ".agentsite-installed"
STEP_TIMEOUT_S = 90


def node_missing() -> str:
    """Why the JavaScript client cannot run here, or "" when it can."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return "the JavaScript A2A client needs node and npm (Node.js 20+) on the PATH"
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=False)
    major = version.stdout.strip().lstrip("v").split(".")[0]
    if not major.isdigit() or int(major) < 20:
        return f"@a2a-js/sdk needs Node.js 20+, and node is {version.stdout.strip()!r}"
    return ""


def npm_ci() -> None:
    """``npm ci`` in tests/a2a/js unless the lock it last installed is the same; one
    process at a time (the suite's xdist workers may all get here at once)."""
    lock = hashlib.sha256((JS_DIR / "package-lock.json").read_bytes()).hexdigest()
    with open(JS_DIR / ".npm-ci.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if STAMP.exists() and STAMP.read_text() == lock:
            return
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
            cwd=JS_DIR,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()[-15:]
            pytest.fail("npm ci in tests/a2a/js failed:\n" + "\n".join(said))
        STAMP.write_text(lock)


@pytest.fixture(scope="session")
def js_client() -> Path:
    """The script, with the pinned SDK installed beside it."""
    why = node_missing()
    if why:
        pytest.skip(why)
    npm_ci()
    return SCRIPT


class Script:
    """The node script running: its JSON lines as they come, and its standard input."""

    def __init__(self, args: list[str], log: IO[bytes]) -> None:
        self.log = log.name
        self.proc = subprocess.Popen(
            ["node", str(SCRIPT), *args],
            cwd=JS_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def next(self, step: str) -> dict[str, Any]:
        """The next result, which must be the step's."""
        try:
            line = self.lines.get(timeout=STEP_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(
                f"the script said nothing for {STEP_TIMEOUT_S}s; see {self.log}"
            ) from None
        if line is None:
            raise AssertionError(f"the script ended (exit {self.proc.wait()}); see {self.log}")
        result: dict[str, Any] = json.loads(line)
        assert result["step"] == step, result
        return result

    def answer(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def stop(self) -> int:
        try:
            return self.proc.wait(timeout=STEP_TIMEOUT_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def script(
    js_client: Path, a2a_url: str, rq_workers: Processes, request: pytest.FixtureRequest
) -> Iterator[Any]:
    """``script(user, binding, cancel_context_id)``: the script started against the daphne."""
    started: list[Script] = []
    log_path = ARTIFACTS / f"a2a-js-{request.node.name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:

        def start(user: Any, binding: str, cancel_context_id: str) -> Script:
            args = [a2a_url, token_for(user), binding, cancel_context_id]
            started.append(Script(args, log))
            return started[-1]

        yield start
        for running in started:
            if running.proc.poll() is None:
                running.proc.kill()
                running.proc.wait()


def sleepy_session(user: Any) -> AgentSession:
    """A session whose scripted model starts a long job, then ends its turn."""
    session = AgentSession.objects.create(owner=user, model="scripted")
    call = {"name": "start_sleepy", "input": {"seconds": 30, "steps": 60}}
    scripted_push(
        session.id,
        {"text": "Starting a long job.", "tool_calls": [call]},
        {"text": "It runs in the background."},
    )
    return session


def texts(artifacts: list[dict[str, Any]]) -> list[str]:
    """The texts of the agent's answers (reports aside)."""
    return [a["text"] for a in artifacts if a["name"] == "answer"]


def check_card(result: dict[str, Any], a2a_url: str, binding: str) -> None:
    assert "error" not in result, result
    assert result["name"] == "agentsite"
    # Both bindings in 1.0 and, on the same endpoints, in 0.3; the client takes 1.0.
    assert sorted((i["binding"], i["url"], i["version"]) for i in result["interfaces"]) == [
        ("HTTP+JSON", f"{a2a_url}/a2a", "0.3"),
        ("HTTP+JSON", f"{a2a_url}/a2a", "1.0"),
        ("JSONRPC", f"{a2a_url}/a2a/jsonrpc", "0.3"),
        ("JSONRPC", f"{a2a_url}/a2a/jsonrpc", "1.0"),
    ]
    # The card the client holds is the extended one, read with the token.
    assert "chat" in result["skills"] and "tool:write_report" in result["skills"]
    assert (result["transport"], result["protocol_version"]) == (binding, "1.0")


def check_send(result: dict[str, Any]) -> None:
    assert "error" not in result, result
    assert result["state"] == "TASK_STATE_COMPLETED", result
    task = AgentTask.objects.get(pk=result["task_id"])
    assert result["context_id"] == task.session_id
    assert texts(result["artifacts"]) == assistant_texts(task.session_id) != []
    assert [m["role"] for m in result["history"]] == ["ROLE_USER", "ROLE_AGENT"]
    assert result["history"][0]["text"] == "hello"
    read_back = {k: v for k, v in result.items() if k in result["read_back"]}
    assert result["read_back"] == read_back
    assert (result["listed"], result["total_size"]) == ([task.id], 1)


def check_resubscribe(result: dict[str, Any]) -> None:
    assert "error" not in result, result
    before, after = result["before_drop"], result
    assert before["problems"] == [] and after["problems"] == [], result
    assert before["task_id"] == after["task_id"]
    # Dropped midway: the first stream never saw the task end.
    assert "TASK_STATE_COMPLETED" not in before["states"]
    assert after["states"][-1] == "TASK_STATE_COMPLETED"
    session_id = AgentTask.objects.get(pk=after["task_id"]).session_id
    assert after["artifacts"] == assistant_texts(session_id) != []
    job = Job.objects.get(session_id=session_id, tool="write_report")
    assert job.status == Job.Status.DONE
    assert after["reports"] == [job.id]  # the report, whole, once


def check_cancel(result: dict[str, Any], session: AgentSession, job: Job) -> None:
    assert "error" not in result, result
    assert result["started_state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    assert result["context_id"] == session.id
    assert result["state"] == "TASK_STATE_CANCELED"
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED
    assert result["cancel_again"] == {
        "name": "TaskNotCancelableError",
        "message": "The task has ended (canceled).",
    }


def check_approval(result: dict[str, Any], user: Any) -> None:
    assert "error" not in result, result
    assert result["waiting_state"] == "TASK_STATE_INPUT_REQUIRED"
    [request] = result["requests"]
    assert (request["kind"], request["tool"]) == ("approval", "run_tests")
    approval = Approval.objects.get(pk=request["approval_request_id"])
    assert (approval.status, approval.decided_by) == (Approval.Status.APPROVED, user)
    assert request["expires_at"] == approval.expires_at.isoformat()
    assert Job.objects.get(pk=approval.job_id).status == Job.Status.DONE
    stream = result["stream"]
    assert stream["task_id"] == result["task_id"] and stream["problems"] == []
    assert stream["states"][-1] == "TASK_STATE_COMPLETED" == result["state"]
    assert "run_tests" in stream["calls"]
    task = AgentTask.objects.get(pk=result["task_id"])
    assert texts(result["artifacts"]) == assistant_texts(task.session_id)
    # The task's history holds the decision as the data part it was sent in.
    decisions = [m["data"] for m in result["history"] if m["role"] == "ROLE_USER"]
    assert decisions == [[], [result["decision"]]]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("binding", BINDINGS)
def test_the_javascript_client_round_trips_with_agentsite(
    script: Any, a2a_url: str, user: Any, binding: str
) -> None:
    ToolApprovalRule.objects.create(user=user, tool="run_tests", mode="always")
    session = sleepy_session(user)
    running = script(user, binding, session.id)

    check_card(running.next("card"), a2a_url, binding)
    check_send(running.next("send"))
    check_resubscribe(running.next("resubscribe"))

    started = running.next("cancel")
    assert started.get("waiting") and "error" not in started, started
    job = wait_until(
        lambda: Job.objects.filter(session_id=session.id, status=Job.Status.RUNNING).first(),
        timeout=60,
    )
    running.answer()
    check_cancel(running.next("cancel"), session, job)

    check_approval(running.next("approval"), user)
    assert running.stop() == 0
