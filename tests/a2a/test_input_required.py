"""A task that needs the user's approval or answer waits ``input-required``, holding nothing,
and goes on when a message with the decision continues it (the same task id).

Real daphne and workers, the offline model, the a2a-sdk client over both bindings.
"""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import (
    CancelTaskRequest,
    ContentTypeNotSupportedError,
    InvalidParamsError,
    Part,
    SendMessageRequest,
    Task,
    TaskState,
    UnsupportedOperationError,
)
from google.protobuf import json_format

from jobs.models import Job
from sessions.models import Approval, ToolApprovalRule
from tests.a2a.conftest import BINDINGS, run
from tests.a2a.test_round_trips import Rebuilt, first_task, message, send
from tests.responses.test_approvals import require_approval

pytestmark = pytest.mark.django_db(transaction=True)


def decision(request_id: str, approve: bool, reason: str = "") -> Part:
    part = Part(media_type="application/json")
    json_format.ParseDict(
        {"approval_request_id": request_id, "approve": approve, "reason": reason}, part.data
    )
    return part


def requests_in(task: Task) -> list[dict[str, Any]]:
    """The data parts of the status message: one per request the task waits on."""
    return [
        json_format.MessageToDict(part.data)
        for part in task.status.message.parts
        if part.WhichOneof("content") == "data"
    ]


def continuing(task: Task, *parts: Part, text: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=message(text, task_id=task.id, context_id=task.context_id, parts=parts)
    )


@pytest.mark.parametrize("binding", BINDINGS)
def test_an_approval_leaves_the_task_waiting_and_the_decision_continues_it(
    client_of: Any, user: Any, binding: str
) -> None:
    require_approval(user)
    asking, deciding = client_of(user, binding, streaming=False), client_of(user, binding)

    async def ask() -> Task:
        async with asking as client:
            return await first_task(client, send("run the tests"))

    waiting = run(ask())
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    [request] = requests_in(waiting)
    assert request["tool"] == "run_tests" and request["kind"] == "approval"
    approval = Approval.objects.get(pk=request["approval_request_id"])
    assert approval.status == Approval.Status.PENDING
    # Waiting holds no job: the call waits behind its gate.
    job = Job.objects.get(pk=approval.job_id)
    assert job.status == Job.Status.QUEUED and job.gate

    async def decide() -> Rebuilt:
        rebuilt = Rebuilt()
        async with deciding as client:
            parts = [decision(approval.pk, True, "Read-only, go ahead.")]
            async for event in client.send_message(continuing(waiting, *parts)):
                rebuilt.take(event)
        return rebuilt

    rebuilt = run(decide())
    assert rebuilt.task is not None and rebuilt.task.id == waiting.id
    assert rebuilt.states[-1] == TaskState.TASK_STATE_COMPLETED
    approval.refresh_from_db()
    job.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED and approval.decided_by == user
    assert approval.reason == "Read-only, go ahead."
    assert job.status == Job.Status.DONE


def test_a_question_is_answered_in_plain_text(client_of: Any, user: Any) -> None:
    asking, answering = client_of(user, streaming=False), client_of(user, streaming=False)

    async def ask() -> Task:
        async with asking as client:
            return await first_task(client, send("ask me which colour the report should be"))

    waiting = run(ask())
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    [request] = requests_in(waiting)
    assert request["kind"] == "question" and request["question"]

    async def answer() -> Task:
        async with answering as client:
            return await first_task(client, continuing(waiting, text="green"))

    done = run(answer())
    assert done.id == waiting.id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    approval = Approval.objects.get(pk=request["approval_request_id"])
    assert approval.status == Approval.Status.ANSWERED and approval.answer == "green"
    # The history holds both user messages and what the agent said.
    assert [m.parts[0].text for m in done.history if m.role == 1][:1] == [
        "ask me which colour the report should be"
    ]


def test_what_a_waiting_or_ended_task_refuses(client_of: Any, user: Any) -> None:
    require_approval(user)
    client_cm = client_of(user, streaming=False)

    async def talk() -> list[tuple[type, str]]:
        refused = []
        async with client_cm as client:
            waiting = await first_task(client, send("run the tests"))
            attempts = [
                continuing(waiting, text="yes please"),  # a decision is needed
                continuing(waiting, decision("apr_nosuchrequest00000000", True)),
                continuing(waiting, Part(url="https://example.com/a.pdf")),
            ]
            for request in attempts:
                with pytest.raises(Exception) as caught:
                    await first_task(client, request)
                refused.append((type(caught.value), getattr(caught.value, "message", "")))
            # A task that has ended takes no more messages.
            done = await first_task(client, send("hello"))
            with pytest.raises(UnsupportedOperationError) as ended:
                await first_task(client, continuing(done, text="and again"))
            refused.append((type(ended.value), ended.value.message))
        return refused

    refused = run(talk())
    assert [kind for kind, _ in refused] == [
        InvalidParamsError,
        InvalidParamsError,
        ContentTypeNotSupportedError,
        UnsupportedOperationError,
    ]
    assert "decision on each of its requests" in refused[0][1]
    assert "No pending request with id 'apr_nosuchrequest00000000'" in refused[1][1]
    assert refused[3][1].startswith("The task is completed")


def test_cancelling_a_waiting_task_cancels_its_request_and_the_held_call(
    client_of: Any, user: Any
) -> None:
    ToolApprovalRule.objects.create(user=user, tool="run_tests", mode="always")
    client_cm = client_of(user, streaming=False)

    async def talk() -> tuple[Task, Task]:
        async with client_cm as client:
            waiting = await first_task(client, send("run the tests"))
            return waiting, await client.cancel_task(CancelTaskRequest(id=waiting.id))

    waiting, cancelled = run(talk())
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    [request] = requests_in(waiting)
    approval = Approval.objects.get(pk=request["approval_request_id"])
    assert approval.status == Approval.Status.CANCELLED
    assert Job.objects.get(pk=approval.job_id).status == Job.Status.CANCELLED
