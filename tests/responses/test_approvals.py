"""The agent's requests for approval over ``/v1/responses``, in OpenAI's hosted-MCP shapes.

A call that needs approval ends its response ``completed`` with an
``mcp_approval_request`` item; the client decides it with an ``mcp_approval_response``
input item in a response that continues it (``previous_response_id``), whose output
then carries what the agent made of the decision. Real workers, the offline model.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI
from openai.types.responses import Response, ResponseInputParam
from openai.types.responses.response_input_param import McpApprovalResponse
from openai.types.responses.response_item import (
    McpApprovalResponse as McpApprovalResponseItem,
)
from openai.types.responses.response_output_item import McpApprovalRequest, McpCall

from jobs.models import Job
from responses.models import AgentResponse
from responses.services import response_project
from sessions.approvals import approval_decide
from sessions.models import Approval, Event, ToolApprovalRule
from tests.responses.test_background import retrieve_until_ended

pytestmark = pytest.mark.django_db(transaction=True)


def require_approval(user: Any) -> None:
    ToolApprovalRule.objects.create(user=user, tool="run_tests", mode="always")


def requests_of(response: Response) -> list[McpApprovalRequest]:
    return [item for item in response.output if isinstance(item, McpApprovalRequest)]


def decision(request_id: str, approve: bool, **more: Any) -> ResponseInputParam:
    item: McpApprovalResponse = {
        "type": "mcp_approval_response",
        "approval_request_id": request_id,
        "approve": approve,
        **more,  # type: ignore[typeddict-item]
    }
    return [item]


def ask_for_tests(client: OpenAI, **options: Any) -> tuple[Response, McpApprovalRequest]:
    asked = client.responses.create(model="offline", input="run the tests", **options)
    if options.get("background"):
        asked = retrieve_until_ended(client, asked.id)
    assert asked.status == "completed", asked
    [request] = requests_of(asked)
    return asked, request


def test_an_approved_call_runs_and_the_next_response_reports_its_result(
    client: OpenAI, user: Any
) -> None:
    require_approval(user)
    asked, request = ask_for_tests(client)

    approval = Approval.objects.get(pk=request.id)
    assert (request.type, request.server_label, request.name) == (
        "mcp_approval_request",
        "agentsite",
        "run_tests",
    )
    assert json.loads(request.arguments) == approval.arguments
    call = next(item for item in asked.output if isinstance(item, McpCall))
    assert call.name == "start_run_tests" and call.approval_request_id == request.id
    assert "waits for your approval" in asked.output_text
    job = Job.objects.get(pk=approval.job_id)
    assert job.status == "queued" and job.gate == approval.id  # the response ended without it

    answered = client.responses.create(
        model="offline",
        previous_response_id=asked.id,
        input=decision(request.id, True, reason="Read-only, go ahead."),
    )
    assert answered.status == "completed", answered
    assert answered.output_text.startswith("The tests finished: 31 passed, 2 failed")
    ran = [item for item in answered.output if isinstance(item, McpCall)]
    assert [(c.name, c.approval_request_id, c.status) for c in ran] == [
        ("run_tests", request.id, "completed")
    ]
    assert (ran[0].output or "").startswith("31 passed, 2 failed")
    approval.refresh_from_db()
    assert approval.status == "approved" and approval.decided_by_id == user.pk
    assert approval.reason == "Read-only, go ahead."
    items = client.responses.input_items.list(answered.id).data
    assert len(items) == 1 and isinstance(items[0], McpApprovalResponseItem)
    assert items[0].approval_request_id == request.id and items[0].approve is True


def test_a_rejected_call_never_runs_and_the_agent_says_so(client: OpenAI, user: Any) -> None:
    require_approval(user)
    asked, request = ask_for_tests(client, background=True)

    started = client.responses.create(
        model="offline",
        previous_response_id=asked.id,
        input=decision(request.id, False, reason="not on Fridays"),
        background=True,
    )
    refused = retrieve_until_ended(client, started.id)
    assert refused.status == "completed", refused
    assert "did not run" in refused.output_text and "not on Fridays" in refused.output_text
    assert not [item for item in refused.output if isinstance(item, McpCall)]
    job = Job.objects.get(pk=Approval.objects.get(pk=request.id).job_id)
    assert job.status == "cancelled" and job.error_code == "approval_rejected"


def test_a_streamed_request_resumed_midway_is_neither_lost_nor_repeated(
    client: OpenAI, user: Any
) -> None:
    require_approval(user)
    stream = client.responses.create(model="offline", input="run the tests", stream=True)
    before: list[Any] = []
    for event in stream:
        before.append(event)
        if event.type == "response.mcp_call.in_progress":  # the call, just before its request
            break
    stream.close()
    response_id = before[0].response.id
    last = before[-1].sequence_number

    after = list(client.responses.retrieve(response_id, stream=True, starting_after=last))
    events = before + after
    assert [e.sequence_number for e in events] == list(range(len(events)))
    request_events = [
        (e.type, e.item.id)
        for e in events
        if e.type.startswith("response.output_item.") and e.item.type == "mcp_approval_request"
    ]
    [request_id] = {item_id for _, item_id in request_events}
    assert request_events == [
        ("response.output_item.added", request_id),
        ("response.output_item.done", request_id),
    ]
    assert events[-1].type == "response.completed"
    assert [r.id for r in requests_of(events[-1].response)] == [request_id]
    replay = list(client.responses.retrieve(response_id, stream=True))
    assert [e.model_dump() for e in replay] == [e.model_dump() for e in events]

    # The decision, streamed and cut as soon as its response is under way, then resumed.
    decided = client.responses.create(
        model="offline",
        previous_response_id=response_id,
        input=decision(request_id, True),
        stream=True,
    )
    first: list[Any] = []
    for update in decided:
        first.append(update)
        if update.type == "response.in_progress":
            break
    decided.close()
    with client.responses.stream(
        response_id=first[0].response.id, starting_after=first[-1].sequence_number
    ) as resumed:
        rest = list(resumed)
        final = resumed.get_final_response()
    numbers = [e.sequence_number for e in first + rest]
    assert numbers == list(range(len(numbers)))
    assert final.status == "completed"
    assert final.output_text.startswith("The tests finished:")


def test_a_question_is_a_request_named_ask_user_answered_in_reason(
    client: OpenAI, user: Any
) -> None:
    asked = client.responses.create(
        model="offline", input="ask me which colour the report should be"
    )
    assert asked.status == "completed"
    [request] = requests_of(asked)
    assert request.name == "ask_user"
    assert json.loads(request.arguments) == {
        "question": "Which colour the report should be?",
        "answer_schema": {"type": "string"},
    }

    with pytest.raises(openai.BadRequestError) as unanswered:
        client.responses.create(
            model="offline", previous_response_id=asked.id, input=decision(request.id, True)
        )
    assert unanswered.value.param == "input[0].reason"  # type: ignore[attr-defined]
    answered = client.responses.create(
        model="offline",
        previous_response_id=asked.id,
        input=decision(request.id, True, reason="green"),
    )
    assert answered.status == "completed"
    assert answered.output_text == 'Thank you: answered "green"'
    assert Approval.objects.get(pk=request.id).answer == "green"


def test_a_decision_with_words_posts_them_too_and_waits_for_both(client: OpenAI, user: Any) -> None:
    require_approval(user)
    asked, request = ask_for_tests(client)
    both = client.responses.create(
        model="offline",
        previous_response_id=asked.id,
        input=[*decision(request.id, True), {"role": "user", "content": "hello"}],
    )
    assert both.status == "completed"
    assert "The tests finished: 31 passed, 2 failed" in both.output_text
    record = AgentResponse.objects.get(pk=both.id)
    greeting = Event.objects.get(session_id=record.session_id, kind="user_message", seq__gt=1)
    assert greeting.payload["text"] == "hello"
    assert greeting.consumed_by_id in response_project(record).members


def post(client: OpenAI, body: dict[str, Any]) -> Any:
    return client.post("/responses", body=body, cast_to=httpx.Response)


def test_a_request_decided_already_is_a_conflict_and_the_refusal_writes_nothing(
    client: OpenAI, user: Any
) -> None:
    require_approval(user)
    asked, request = ask_for_tests(client)
    approval_decide(approval=Approval.objects.get(pk=request.id), by=user, decision="reject")

    with pytest.raises(openai.ConflictError) as caught:
        client.responses.create(
            model="offline",
            previous_response_id=asked.id,
            input=[{"role": "user", "content": "and now?"}, *decision(request.id, True)],
        )
    assert caught.value.code == "already_decided"  # type: ignore[attr-defined]
    assert caught.value.param == "input[1].approval_request_id"  # type: ignore[attr-defined]
    body = caught.value.body
    assert isinstance(body, dict) and set(body) == {"message", "type", "param", "code"}
    assert Approval.objects.get(pk=request.id).status == "rejected"


def test_someone_elses_or_an_unknown_request_is_a_400_naming_the_item(
    client: OpenAI, client_for: Any, user: Any, other_user: Any
) -> None:
    require_approval(user)
    asked, request = ask_for_tests(client)
    theirs = client_for(other_user)
    their_response = theirs.responses.create(model="offline", input="hello")
    elsewhere = client.responses.create(model="offline", input="hello")  # another session
    for api, previous, request_id in (
        (theirs, their_response.id, request.id),
        (client, asked.id, "apr_doesnotexist"),
        (client, asked.id, "nonsense"),
        (client, elsewhere.id, request.id),
    ):
        with pytest.raises(openai.BadRequestError) as caught:
            api.responses.create(
                model="offline", previous_response_id=previous, input=decision(request_id, True)
            )
        assert caught.value.param == "input[0].approval_request_id"  # type: ignore[attr-defined]
        assert caught.value.code == "unknown_approval_request"  # type: ignore[attr-defined]
    assert Approval.objects.get(pk=request.id).status == "pending"


@pytest.mark.parametrize(
    ("item", "param"),
    [
        ({"type": "mcp_approval_response", "approve": True}, "input[0].approval_request_id"),
        (
            {"type": "mcp_approval_response", "approval_request_id": "apr_x", "approve": "yes"},
            "input[0].approve",
        ),
        (
            {
                "type": "mcp_approval_response",
                "approval_request_id": "apr_x",
                "approve": False,
                "reason": 3,
            },
            "input[0].reason",
        ),
        (
            {"type": "mcp_approval_request", "id": "apr_x", "name": "run_tests"},
            "input[0].arguments",
        ),
    ],
)
def test_malformed_approval_items_are_a_400_naming_the_field(
    client: OpenAI, item: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        post(client, {"model": "offline", "input": [item], "previous_response_id": "resp_x"})
    assert caught.value.param == param  # type: ignore[attr-defined]


def test_an_approval_response_without_previous_response_id_is_a_400(client: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="offline", input=decision("apr_whatever", True))
    assert caught.value.param == "previous_response_id"  # type: ignore[attr-defined]
