"""Durable approvals and questions: the agent asks, goes on, and the answer comes later.

Real turn and tool workers; the offline model drives the tools. The suite lets
agents run tools at once (``tests/environment.py``); these tests require approval
per user, as an operator would in the admin.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.test import Client
from django.utils import timezone

from jobs.models import Job
from sessions.approvals import approval_needed, approvals_expire
from sessions.models import AgentSession, Approval, Event, ToolApprovalRule
from sessions.services import message_post, session_delete
from tests.conftest import api_client_for, wait_until
from tests.sessions.factories import make_session, messages, wait_for_idle, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def require_approval(user: Any, *tools: str) -> None:
    for tool in tools or ("run_tests",):
        ToolApprovalRule.objects.create(user=user, tool=tool, mode="always")


def say(session: Any, text: str) -> list[str]:
    _, run = message_post(session=session, text=text)
    return messages(session, wait_for_run(run.id))


def ask_for_tests(user: Any) -> tuple[AgentSession, Approval, Job]:
    require_approval(user)
    session = make_session(user, model="offline")
    said = say(session, "run the tests")
    approval = Approval.objects.get(session=session)
    job = Job.objects.get(pk=approval.job_id)
    assert f"run_tests ({job.id}) waits for your approval" in said[-1]
    return session, approval, job


def decide(client: Client, approval_id: str, key: str = "", **body: Any) -> Any:
    return client.post(
        f"/api/approvals/{approval_id}/decision",
        body,
        content_type="application/json",
        headers={"Idempotency-Key": key} if key else None,
    )


def test_a_call_that_needs_approval_returns_at_once_and_holds_nothing(
    user: Any, api_client: Client, rq_workers: Any
) -> None:
    session, approval, job = ask_for_tests(user)
    wait_for_idle(session)  # the turn ended: no run waits for the answer

    assert approval.status == "pending" and approval.tool == "run_tests"
    assert job.status == "queued" and job.gate == approval.id and job.ready_at is None
    assert job.enqueued_at is None  # not in RQ, no tool worker slot
    requested = Event.objects.get(session=session, kind="approval_requested")
    assert requested.payload["id"] == approval.id and requested.pending is False
    session.refresh_from_db()
    assert session.pending_approvals == 1

    listed = api_client.get("/api/approvals?status=pending").json()
    assert [a["id"] for a in listed["data"]] == [approval.id]
    assert listed["data"][0]["job_id"] == job.id


def test_approving_starts_the_job_and_its_result_reaches_the_agent(
    user: Any, api_client: Client, rq_workers: Any
) -> None:
    session, approval, job = ask_for_tests(user)
    wait_for_idle(session)

    reply = decide(api_client, approval.id, decision="approve")
    assert reply.status_code == 200, reply.content
    assert reply.json()["status"] == "approved" and reply.json()["decided_by"] == user.username

    wait_until(lambda: Job.objects.get(pk=job.id).is_terminal, timeout=90)
    assert Job.objects.get(pk=job.id).status == "done"
    wait_for_idle(session)
    done = Event.objects.get(session=session, payload__event="job_completed")
    assert messages(session, done.consumed_by)[-1].startswith("The tests finished:")
    decided = Event.objects.get(session=session, kind="approval_decided")
    assert decided.payload["status"] == "approved" and decided.pending is False
    session.refresh_from_db()
    assert session.pending_approvals == 0


def test_rejecting_cancels_the_job_and_the_agent_is_told_why(
    user: Any, api_client: Client, rq_workers: Any
) -> None:
    session, approval, job = ask_for_tests(user)
    wait_for_idle(session)

    reply = decide(api_client, approval.id, decision="reject", reason="not on Fridays")
    assert reply.status_code == 200 and reply.json()["status"] == "rejected"

    job.refresh_from_db()
    assert job.status == "cancelled" and job.error_code == "approval_rejected"
    wait_for_idle(session)
    cancelled = Event.objects.get(session=session, payload__event="job_cancelled")
    assert messages(session, cancelled.consumed_by) == [
        f"The run_tests job {job.id} did not run. Not approved by {user.username}: not on Fridays"
    ]


def test_an_edit_runs_the_call_with_the_new_arguments_checked_like_the_models(
    user: Any, api_client: Client, rq_workers: Any
) -> None:
    _session, approval, job = ask_for_tests(user)

    bad = decide(api_client, approval.id, decision="edit", arguments={"nope": 1})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_arguments"
    missing = decide(api_client, approval.id, decision="edit")
    assert missing.status_code == 422 and missing.json()["error"]["code"] == "arguments_required"
    assert Approval.objects.get(pk=approval.id).status == "pending"

    edited = decide(api_client, approval.id, decision="edit", arguments={"path": "tests"})
    assert edited.status_code == 200, edited.content
    assert edited.json()["edited_arguments"]["path"] == "tests"
    wait_until(lambda: Job.objects.get(pk=job.id).is_terminal, timeout=90)
    job.refresh_from_db()
    assert job.args["path"] == "tests" and job.status == "done"


def test_two_decisions_at_once_one_wins_and_the_other_is_told_the_winner(
    user: Any, rq_workers: Any
) -> None:
    _session, approval, job = ask_for_tests(user)
    replies: list[Any] = []
    start = threading.Barrier(2)

    def send(decision: str) -> None:
        try:
            client = api_client_for(user)
            start.wait()
            replies.append(decide(client, approval.id, decision=decision, reason="race"))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send, args=(d,)) for d in ("approve", "reject")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    statuses = sorted(r.status_code for r in replies)
    assert statuses == [200, 409]
    won = next(r for r in replies if r.status_code == 200).json()
    lost = next(r for r in replies if r.status_code == 409).json()["error"]
    assert lost["code"] == "already_decided"
    assert lost["details"]["status"] == won["status"]
    assert Approval.objects.get(pk=approval.id).status == won["status"]
    job.refresh_from_db()
    assert (job.gate == "") == (won["status"] == "approved")


def test_the_same_decision_again_with_its_key_is_answered_not_refused(
    user: Any, api_client: Client, rq_workers: Any
) -> None:
    _, approval, _ = ask_for_tests(user)
    first = decide(api_client, approval.id, key="k1", decision="approve")
    again = decide(api_client, approval.id, key="k1", decision="approve")
    other = decide(api_client, approval.id, key="k2", decision="approve")
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()
    assert other.status_code == 409


def test_a_decision_after_expiry_is_refused_and_the_call_never_runs(
    user: Any, api_client: Client, rq_workers: Any
) -> None:
    session, approval, job = ask_for_tests(user)
    wait_for_idle(session)
    Approval.objects.filter(pk=approval.id).update(expires_at=timezone.now())

    reply = decide(api_client, approval.id, decision="approve")
    assert reply.status_code == 409 and reply.json()["error"]["code"] == "expired"
    assert Approval.objects.get(pk=approval.id).status == "expired"
    job.refresh_from_db()
    assert job.status == "cancelled" and job.error_code == "approval_expired"
    wait_for_idle(session)
    cancelled = Event.objects.get(session=session, payload__event="job_cancelled")
    assert "expired" in messages(session, cancelled.consumed_by)[0]


def test_the_expiry_pass_ends_requests_past_their_time(user: Any, rq_workers: Any) -> None:
    _session, approval, job = ask_for_tests(user)
    Approval.objects.filter(pk=approval.id).update(expires_at=timezone.now() - timedelta(1))
    assert approvals_expire() == 1
    assert approvals_expire() == 0
    assert Approval.objects.get(pk=approval.id).status == "expired"
    assert Job.objects.get(pk=job.id).status == "cancelled"


def test_another_users_request_is_not_found(
    user: Any, other_api_client: Client, rq_workers: Any
) -> None:
    _, approval, _ = ask_for_tests(user)
    assert other_api_client.get(f"/api/approvals/{approval.id}").status_code == 404
    reply = decide(other_api_client, approval.id, decision="approve")
    assert reply.status_code == 404
    assert other_api_client.get("/api/approvals").json()["data"] == []
    assert Approval.objects.get(pk=approval.id).status == "pending"


def test_deleting_the_session_cancels_its_requests_and_their_jobs(
    user: Any, rq_workers: Any
) -> None:
    session, approval, job = ask_for_tests(user)
    session_delete(session=session)
    assert Approval.objects.get(pk=approval.id).status == "cancelled"
    assert Job.objects.get(pk=job.id).status == "cancelled"


def test_cancelling_the_job_cancels_its_request(
    user: Any, api_client: Client, rq_workers: Any
) -> None:
    _, approval, job = ask_for_tests(user)
    assert api_client.delete(f"/api/jobs/{job.id}").status_code == 202
    assert Approval.objects.get(pk=approval.id).status == "cancelled"
    assert decide(api_client, approval.id, decision="approve").status_code == 409


def test_a_question_is_answered_with_json_that_meets_its_schema(
    user: Any, api_client: Client, rq_workers: Any
) -> None:
    session = make_session(user, model="offline")
    say(session, "ask me which colour the report should be")
    question = Approval.objects.get(session=session, kind="question")
    assert question.question == "Which colour the report should be?"
    wait_for_idle(session)

    wrong = decide(api_client, question.id, decision="answer", answer=12)
    assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "invalid_answer"
    approve = decide(api_client, question.id, decision="approve")
    assert approve.status_code == 422 and approve.json()["error"]["code"] == "invalid_decision"

    reply = decide(api_client, question.id, decision="answer", answer="green")
    assert reply.status_code == 200 and reply.json()["answer"] == "green"
    wait_for_idle(session)
    answered = Event.objects.get(session=session, kind="approval_decided")
    assert messages(session, answered.consumed_by) == ['Thank you: answered "green"']


def test_allowing_a_tool_for_the_session_skips_later_approvals_unless_an_operator_requires_it(
    user: Any, settings: Any
) -> None:
    settings.AGENTSITE_TOOL_APPROVALS = {}
    session = make_session(user, model="offline")
    from jobs.registry import get_tool

    run_tests = get_tool("run_tests")
    clock = get_tool("now")
    assert run_tests is not None and clock is not None
    assert approval_needed(session=session, tool=run_tests)  # the tool's own default
    assert not approval_needed(session=session, tool=clock)
    session.allowed_tools = ["run_tests"]
    assert not approval_needed(session=session, tool=run_tests)

    settings.AGENTSITE_TOOL_APPROVALS = {"run_tests": "always"}
    assert approval_needed(session=session, tool=run_tests)  # the operator's word stands
    ToolApprovalRule.objects.create(user=user, tool="run_tests", mode="never")
    assert not approval_needed(session=session, tool=run_tests)  # the admin's, for this user


def test_allow_for_the_session_is_refused_where_an_operator_requires_every_call(
    user: Any, api_client: Client, rq_workers: Any
) -> None:
    _, approval, _ = ask_for_tests(user)
    reply = decide(api_client, approval.id, decision="approve", allow_for_session=True)
    assert reply.status_code == 422 and reply.json()["error"]["code"] == "allow_refused"
    assert Approval.objects.get(pk=approval.id).status == "pending"


def test_pending_requests_per_user_are_bounded(user: Any, rq_workers: Any, settings: Any) -> None:
    from accounts.models import UserQuota

    UserQuota.objects.create(user=user, pending_approvals=1)
    session, _, _ = ask_for_tests(user)
    said = say(session, "run the tests")
    assert "did not work" in said[-1] and "limit of 1 requests" in said[-1]
    assert Approval.objects.filter(session=session).count() == 1


def test_staff_decide_in_the_admin_and_the_decision_records_who(
    user: Any, make_user: Any, rq_workers: Any
) -> None:
    _, approval, job = ask_for_tests(user)
    staff = make_user("operator", is_staff=True, is_superuser=True)
    admin = Client()
    admin.force_login(staff)
    listed = admin.get("/admin/agent_sessions/approval/?status__exact=pending")
    assert listed.status_code == 200 and approval.id in listed.content.decode()

    admin.post(
        "/admin/agent_sessions/approval/",
        {"action": "approvals_reject", "_selected_action": [approval.id]},
    )
    approval.refresh_from_db()
    assert approval.status == "rejected" and approval.decided_by == staff
    assert Job.objects.get(pk=job.id).error_code == "approval_rejected"
    again = admin.post(
        "/admin/agent_sessions/approval/",
        {"action": "approvals_approve", "_selected_action": [approval.id]},
        follow=True,
    )
    assert "already decided" in again.content.decode()


def test_requests_and_decisions_are_posted_signed_to_the_sessions_address(
    user: Any, api_client: Client, rq_workers: Any
) -> None:
    from jobs.webhooks import webhook_verify
    from tests.jobs.test_webhooks import Receiver

    receiver = Receiver(failures=0)
    try:
        require_approval(user)
        secret = api_client.get("/api/webhook-secret").json()["secret"]
        session = make_session(user, model="offline", callback_url=receiver.url)
        say(session, "run the tests")
        approval = Approval.objects.get(session=session)
        assert decide(api_client, approval.id, decision="reject", reason="later").status_code == 200

        wait_until(lambda: len(receiver.received) >= 2, timeout=30)
        posted = {}
        for headers, body, _ in receiver.received:
            assert webhook_verify(secret, headers, body)
            message = json.loads(body)
            posted[message["type"]] = message["data"]
        assert posted["approval.requested"]["id"] == approval.id
        assert posted["approval.requested"]["status"] == "pending"
        assert posted["approval.decided"]["status"] == "rejected"
        assert posted["approval.decided"]["reason"] == "later"
        assert posted["approval.decided"]["session_id"] == session.id
    finally:
        receiver.server.shutdown()
