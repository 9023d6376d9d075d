"""An A2A client talks to agentsite over both bindings: send, stream, read, list, cancel.

Real daphne and workers, the offline model, the a2a-sdk client found from the
agent card. A task's artifacts and history are compared with what the
session's log holds; streams are rebuilt chunk by chunk to show nothing is lost
or repeated.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
)
from google.protobuf import json_format

from a2a_api.models import AgentTask
from jobs.models import Job
from sessions.llm.scripted import scripted_open, scripted_push
from sessions.models import AgentSession, Event
from tests.a2a.conftest import BINDINGS, run
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def message(text: str = "", *, task_id: str = "", context_id: str = "", parts: Any = ()) -> Any:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=text)] if text else list(parts),
        task_id=task_id,
        context_id=context_id,
    )


def send(text: str = "", **fields: Any) -> SendMessageRequest:
    return SendMessageRequest(message=message(text, **fields))


def assistant_texts(session_id: str) -> list[str]:
    return [
        e.payload["text"]
        for e in Event.objects.filter(session_id=session_id, kind="assistant_message").order_by(
            "seq"
        )
    ]


def artifact_texts(task: Task) -> list[str]:
    """The texts of the agent's answers (reports aside)."""
    return ["".join(p.text for p in a.parts) for a in task.artifacts if a.name == "answer"]


async def first_task(client: Any, request: SendMessageRequest) -> Task:
    async for event in client.send_message(request):
        assert event.HasField("task"), event
        return event.task
    raise AssertionError("no answer")


def started_in(client: Any, text: str, session_id: str) -> Task:
    """``text`` sent in the session with ``returnImmediately``: the task as it starts."""

    async def start() -> Task:
        async with client as c:
            request = send(text, context_id=session_id)
            request.configuration.return_immediately = True
            return await first_task(c, request)

    return run(start())


def calls_in(task: Task) -> list[dict[str, Any]]:
    """The tool calls and call results a task's history holds, as their data parts say."""
    return [
        json_format.MessageToDict(part.data)
        for m in task.history
        if m.role == Role.ROLE_AGENT
        for part in m.parts
        if part.WhichOneof("content") == "data"
    ]


class Rebuilt:
    """A task as a client following its stream rebuilds it, checking each chunk on the way."""

    def __init__(self) -> None:
        self.task: Task | None = None
        self.texts: dict[str, str] = {}
        self.reports: dict[str, Any] = {}
        self.states: list[int] = []
        self.calls: list[str] = []
        self.progress: list[dict[str, Any]] = []

    def take(self, event: StreamResponse) -> None:
        if event.HasField("task"):
            self.task = event.task
            self.texts = {
                a.artifact_id: "".join(p.text for p in a.parts) for a in event.task.artifacts
            }
            self.states.append(event.task.status.state)
            # Calls made before the task was read come in its history, not as updates.
            self.calls = [call["tool"] for call in calls_in(event.task)]
        elif event.HasField("status_update"):
            status = event.status_update.status
            self.states.append(status.state)
            for part in status.message.parts:
                if part.WhichOneof("content") != "data":
                    continue
                data = json_format.MessageToDict(part.data)
                if "progress" in data:
                    self.progress.append(data)
                elif "tool" in data and "arguments" in data:
                    self.calls.append(data["tool"])
        elif event.HasField("artifact_update") and event.artifact_update.artifact.name != "answer":
            update = event.artifact_update
            assert update.last_chunk and not update.append, "a report comes whole"
            assert update.artifact.artifact_id not in self.reports, "a report sent twice"
            self.reports[update.artifact.artifact_id] = update.artifact
        elif event.HasField("artifact_update"):
            update = event.artifact_update
            text = "".join(p.text for p in update.artifact.parts)
            key = update.artifact.artifact_id
            if update.last_chunk and not update.append:
                # The closing chunk holds the whole answer: what the deltas built must match.
                assert self.texts.get(key, "") == text, (key, self.texts.get(key), text)
            elif update.append:
                assert key in self.texts, f"an append to {key} before its first chunk"
                self.texts[key] += text
            else:
                assert key not in self.texts, f"{key} started twice"
                self.texts[key] = text


def test_the_agent_card_is_public_and_names_both_bindings(a2a_url: str) -> None:
    async def fetch() -> Any:
        async with httpx.AsyncClient() as http:
            return await A2ACardResolver(http, a2a_url).get_agent_card()

    card = run(fetch())
    assert card.name == "agentsite"
    # Cacheable, and revalidated by its ETag.
    first = httpx.get(f"{a2a_url}/.well-known/agent-card.json")
    assert first.headers["Cache-Control"] == "public, max-age=300"
    again = httpx.get(
        f"{a2a_url}/.well-known/agent-card.json", headers={"If-None-Match": first.headers["ETag"]}
    )
    assert again.status_code == 304 and again.content == b""
    bindings = {i.protocol_binding: i.url for i in card.supported_interfaces}
    assert bindings == {"JSONRPC": f"{a2a_url}/a2a/jsonrpc", "HTTP+JSON": f"{a2a_url}/a2a"}
    assert card.capabilities.streaming and card.capabilities.extended_agent_card
    assert "bearer" in card.security_schemes


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_message_waits_for_its_task_and_reads_back_as_the_log_has_it(
    client_of: Any, user: Any, other_user: Any, binding: str
) -> None:
    mine, others = client_of(user, binding, streaming=False), client_of(other_user, binding)

    async def talk() -> tuple[Task, Task, Any, str]:
        async with mine as client:
            done = await first_task(client, send("hello"))
            again = await client.get_task(GetTaskRequest(id=done.id))
            listed = await client.list_tasks(ListTasksRequest(context_id=done.context_id))
        async with others as theirs:
            with pytest.raises(TaskNotFoundError) as refused:
                await theirs.get_task(GetTaskRequest(id=done.id))
        return done, again, listed, refused.value.message

    done, again, listed, refused = run(talk())
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    task = AgentTask.objects.get(pk=done.id)
    assert done.context_id == task.session_id
    assert artifact_texts(done) == assistant_texts(task.session_id) != []
    assert again == done or (again.status.state, artifact_texts(again)) == (
        done.status.state,
        artifact_texts(done),
    )
    assert [m.role for m in again.history] == [Role.ROLE_USER, Role.ROLE_AGENT]
    assert again.history[0].parts[0].text == "hello"
    assert [t.id for t in listed.tasks] == [done.id] and listed.total_size == 1
    assert refused == f"No task with id {done.id!r}."


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_stream_carries_the_tool_call_and_the_answer_chunk_by_chunk(
    client_of: Any, user: Any, binding: str
) -> None:
    mine = client_of(user, binding)

    async def talk() -> Rebuilt:
        rebuilt = Rebuilt()
        async with mine as client:
            async for event in client.send_message(send("write a report on the shop library")):
                rebuilt.take(event)
        return rebuilt

    rebuilt = run(talk())
    assert rebuilt.task is not None
    assert rebuilt.states[0] in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    assert rebuilt.states[-1] == TaskState.TASK_STATE_COMPLETED
    assert "start_write_report" in rebuilt.calls
    session_id = rebuilt.task.context_id
    assert list(rebuilt.texts.values()) == assistant_texts(session_id)
    job = Job.objects.get(session_id=session_id, tool="write_report")
    assert job.status == Job.Status.DONE
    # Its progress came as it went, in order.
    fractions = [p["progress"] for p in rebuilt.progress if p["job_id"] == job.id]
    assert fractions and fractions == sorted(fractions) and fractions[-1] == 1.0, fractions
    # The report is an artifact of its own: the markdown as text and as a file.
    report = rebuilt.reports[job.id]
    text, file = report.parts
    markdown = str((job.result or {})["markdown"])
    assert text.text == markdown and text.media_type == "text/markdown"
    assert file.raw == markdown.encode() and file.filename.endswith(f"{job.id}.md")


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_dropped_stream_resubscribed_loses_and_repeats_nothing(
    client_of: Any, user: Any, binding: str
) -> None:
    # The answer streams in pieces, and its turn ends only once the resubscription is
    # live (a subscription to an ended task is refused, as the spec says).
    session = AgentSession.objects.create(owner=user, model="scripted")
    answer = "The shop library has three modules, and two of its tests fail."
    scripted_push(session.id, {"text": answer, "chunk": 6, "delay_s": 0.03, "gate": "end"})
    mine = client_of(user, binding)

    async def talk() -> tuple[Rebuilt, str]:
        async with mine as client:
            first = Rebuilt()
            stream = client.send_message(send("tell me about the shop", context_id=session.id))
            async for event in stream:
                first.take(event)
                # Drop once part of the answer is held: in the task itself when its turn
                # was quicker than the send's answer (no update then follows until the gate
                # opens), else in the first piece after it.
                if any(first.texts.values()):
                    break
            await stream.aclose()
            assert first.task is not None
            task_id = first.task.id
            again = Rebuilt()
            async for event in client.subscribe(SubscribeToTaskRequest(id=task_id)):
                if not again.states:
                    scripted_open(session.id, "end")
                again.take(event)
        return again, task_id

    again, task_id = run(talk())
    assert again.states[-1] == TaskState.TASK_STATE_COMPLETED
    assert AgentTask.objects.get(pk=task_id).session_id == session.id
    assert list(again.texts.values()) == assistant_texts(session.id) == [answer]


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_task_read_after_its_calls_holds_them_in_its_history(
    client_of: Any, user: Any, binding: str
) -> None:
    session = AgentSession.objects.create(owner=user, model="scripted")
    long_call = {"name": "start_sleepy", "input": {"seconds": 30}, "id": "toolu_long"}
    short_call = {"name": "start_sleepy", "input": {"seconds": 0.1}, "id": "toolu_short"}
    scripted_push(
        session.id,
        {"text": "Starting two jobs.", "tool_calls": [long_call, short_call]},
        {"text": "They run in the background."},
    )
    client, reading = client_of(user, binding, streaming=False), client_of(user, binding)

    started = started_in(client, "sleep twice", session.id)

    async def read_then_cancel() -> Task:
        async with reading as c:
            # Read while the long job runs and the short one has ended.
            for _ in range(200):
                task = await c.get_task(GetTaskRequest(id=started.id))
                if any("output" in call for call in calls_in(task)):
                    break
                await asyncio.sleep(0.05)
            await c.cancel_task(CancelTaskRequest(id=started.id))
        return task

    task = run(read_then_cancel())
    assert task.status.state == TaskState.TASK_STATE_WORKING
    calls = calls_in(task)
    assert [c["tool"] for c in calls] == ["start_sleepy"] * 3
    assert [c.get("arguments") for c in calls] == [{"seconds": 30}, {"seconds": 0.1}, None]
    assert calls[2]["error"] is None and calls[2]["output"], calls
    ids = [m.message_id for m in task.history if m.role == Role.ROLE_AGENT]
    assert len(set(ids)) == len(ids), ids
    # The ids a stream's status updates carry: a client merging both keeps each once.
    long_id, short_id, short_done = (m.message_id for m in task.history if len(m.parts) == 2)
    assert short_done == f"{short_id}-done" and long_id.startswith("mcp_")


@pytest.mark.parametrize("binding", BINDINGS)
def test_cancelling_a_task_whose_job_runs_ends_it_canceled_with_its_job(
    client_of: Any, user: Any, binding: str
) -> None:
    session = AgentSession.objects.create(owner=user, model="scripted")
    scripted_push(
        session.id,
        {"text": "Starting a long job.", "tool_calls": [{"name": "start_sleepy", "input": {}}]},
        {"text": "It runs in the background."},
    )

    starting, cancelling = (client_of(user, binding, streaming=False) for _ in range(2))

    started = started_in(starting, "sleep for a while", session.id)
    assert started.context_id == session.id
    assert started.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    job = wait_until(
        lambda: Job.objects.filter(session_id=session.id, status=Job.Status.RUNNING).first()
    )

    async def cancel() -> tuple[Task, str]:
        async with cancelling as client:
            cancelled = await client.cancel_task(CancelTaskRequest(id=started.id))
            with pytest.raises(TaskNotCancelableError) as again:
                await client.cancel_task(CancelTaskRequest(id=started.id))
        return cancelled, again.value.message

    cancelled, again = run(cancel())
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED
    assert again == "The task has ended (canceled)."


@pytest.mark.parametrize("binding", BINDINGS)
def test_without_a_token_every_method_but_the_card_is_refused(a2a_url: str, binding: str) -> None:
    path = "/a2a/jsonrpc" if binding == "JSONRPC" else "/a2a/tasks"
    method = "POST" if binding == "JSONRPC" else "GET"
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    for headers in ({}, {"Authorization": "Bearer nope"}):
        answer = httpx.request(
            method,
            f"{a2a_url}{path}",
            json=body if method == "POST" else None,
            headers={**headers, "A2A-Version": "1.0"},
        )
        assert answer.status_code == 401, answer.text
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        assert answer.json()["error"]["status"] == "UNAUTHENTICATED"


def test_tasks_list_newest_first_in_pages_by_state_and_by_time(client_of: Any, user: Any) -> None:
    from sessions.models import ToolApprovalRule

    ToolApprovalRule.objects.create(user=user, tool="run_tests", mode="always")
    mine = client_of(user, streaming=False)

    async def talk() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with mine as client:
            first = await first_task(client, send("hello"))
            waiting = await first_task(client, send("run the tests"))
            last = await first_task(client, send("hello", context_id=first.context_id))
            seen["ids"] = [last.id, waiting.id, first.id]
            page = await client.list_tasks(ListTasksRequest(page_size=2))
            rest = await client.list_tasks(
                ListTasksRequest(page_size=2, page_token=page.next_page_token)
            )
            seen["pages"] = [[t.id for t in page.tasks], [t.id for t in rest.tasks]]
            seen["tokens"] = [page.next_page_token, rest.next_page_token]
            seen["total"] = page.total_size
            waiting_only = await client.list_tasks(
                ListTasksRequest(status=TaskState.TASK_STATE_INPUT_REQUIRED)
            )
            seen["waiting"] = [t.id for t in waiting_only.tasks]
            in_context = await client.list_tasks(ListTasksRequest(context_id=first.context_id))
            seen["context"] = [t.id for t in in_context.tasks]
            after = ListTasksRequest()
            after.status_timestamp_after.CopyFrom(first.status.timestamp)
            seen["after"] = [t.id for t in (await client.list_tasks(after)).tasks]
        return seen

    seen = run(talk())
    newest, waiting, oldest = seen["ids"]
    assert seen["pages"] == [[newest, waiting], [oldest]]
    assert seen["tokens"][0] and seen["tokens"][1] == ""
    assert seen["total"] == 3
    assert seen["waiting"] == [waiting]
    assert seen["context"] == [newest, oldest]
    assert seen["after"] == [newest, waiting]


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_task_joined_mid_answer_holds_the_answer_so_far(
    client_of: Any, user: Any, binding: str
) -> None:
    session = AgentSession.objects.create(owner=user, model="scripted")
    so_far = "The first half of the answer, "
    scripted_push(session.id, {"text": so_far, "chunk": 6, "gate": "rest"})
    starting, joining = client_of(user, binding, streaming=False), client_of(user, binding)

    started = started_in(starting, "answer in two halves", session.id)

    def written() -> str:
        deltas = Event.objects.filter(session_id=session.id, kind="assistant_delta")
        return "".join(e.payload["text"] for e in deltas.order_by("seq"))

    wait_until(lambda: written() == so_far)

    async def join() -> Rebuilt:
        rebuilt = Rebuilt()
        async with joining as client:
            async for event in client.subscribe(SubscribeToTaskRequest(id=started.id)):
                rebuilt.take(event)
                if rebuilt.task is not None and len(rebuilt.states) == 1:
                    # The answer is open, its text held beside its item: the task has it.
                    assert artifact_texts(rebuilt.task) == [so_far]
                    assert [m.role for m in rebuilt.task.history] == [Role.ROLE_USER]
                    scripted_open(session.id, "rest")
        return rebuilt

    rebuilt = run(join())
    assert rebuilt.states[-1] == TaskState.TASK_STATE_COMPLETED
    assert list(rebuilt.texts.values()) == assistant_texts(session.id) == [so_far]
