"""Posting a message answers 202 with a run; polling it with its token reads the reply."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job
from jobs.services import job_create
from sessions.llm.scripted import scripted_push
from sessions.models import Event, Run
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def new_session(client: Any, model: str = "scripted") -> str:
    response = client.post("/api/sessions", {"model": model}, content_type="application/json")
    return str(response.json()["session_id"])


def post(client: Any, session_id: str, text: str) -> Any:
    return client.post(
        f"/api/sessions/{session_id}/messages", {"text": text}, content_type="application/json"
    )


def test_polling_a_run_until_its_token_is_null_reads_the_whole_reply(
    api_client: Any, rq_workers: Any
) -> None:
    session_id = new_session(api_client)
    reply = "Polling works, piece by piece. " * 6
    scripted_push(session_id, {"text": reply, "chunk": 4, "delay_s": 0.01})
    accepted = post(api_client, session_id, "hello")
    assert accepted.status_code == 202
    body = accepted.json()
    assert set(body) == {"run_id", "continuation_token"}

    text, token, polls = "", body["continuation_token"], 0
    while token is not None:
        polled = api_client.get(f"/api/runs/{body['run_id']}", {"continuation_token": token})
        assert polled.status_code == 200
        page = polled.json()
        assert set(page) == {"run_id", "status", "text", "continuation_token"}
        text += page["text"]
        token, polls = page["continuation_token"], polls + 1
    assert page["status"] == "completed"
    assert text == reply

    # Without a token, the poll reads the run from its start.
    again = api_client.get(f"/api/runs/{body['run_id']}").json()
    assert again["text"] == reply and again["continuation_token"] is None


def test_a_message_during_a_run_names_the_run_that_will_take_it(
    api_client: Any, rq_workers: Any
) -> None:
    session_id = new_session(api_client)
    scripted_push(session_id, {"text": "slow " * 100, "chunk": 5, "delay_s": 0.02})
    first = post(api_client, session_id, "one").json()["run_id"]
    wait_until(lambda: Run.objects.get(pk=first).status == "running")
    second = post(api_client, session_id, "two").json()["run_id"]
    third = post(api_client, session_id, "three").json()["run_id"]
    assert second == third != first
    wait_until(lambda: Run.objects.get(pk=second).status == "completed", timeout=30)
    assert Run.objects.get(pk=second).batch_size == 2


def test_a_run_is_cancelled_through_the_api(api_client: Any, rq_workers: Any) -> None:
    session_id = new_session(api_client)
    scripted_push(session_id, {"text": "never ending " * 200, "chunk": 5, "delay_s": 0.05})
    run_id = post(api_client, session_id, "go").json()["run_id"]
    wait_until(lambda: Event.objects.filter(run_id=run_id, kind="assistant_delta").exists())
    response = api_client.post(f"/api/runs/{run_id}/cancel")
    assert response.status_code == 202
    assert response.json() == {"run_id": run_id, "status": "cancelling"}
    wait_until(lambda: Run.objects.get(pk=run_id).status == "cancelled")
    final = api_client.get(f"/api/runs/{run_id}").json()
    assert final["status"] == "cancelled" and final["continuation_token"] is None
    assert final["text"] and ("never ending " * 200).startswith(final["text"])


def test_events_are_read_after_a_token(api_client: Any, rq_workers: Any) -> None:
    session_id = new_session(api_client)
    scripted_push(session_id, {"text": "Hi!"})
    run_id = post(api_client, session_id, "hello").json()["run_id"]
    wait_until(lambda: Run.objects.get(pk=run_id).status == "completed")

    first = api_client.get(f"/api/sessions/{session_id}/events", {"limit": 2}).json()
    assert [e["kind"] for e in first["events"]] == ["user_message", "run_started"]
    assert set(first["events"][0]) == {"seq", "kind", "payload", "created_at", "token"}
    rest = api_client.get(
        f"/api/sessions/{session_id}/events", {"after": first["next_token"]}
    ).json()
    kinds = [e["kind"] for e in rest["events"]]
    assert kinds[0] == "assistant_delta" and kinds[-2:] == ["assistant_message", "run_finished"]
    assert rest["events"][0]["seq"] == 3
    # Each event's own token resumes right after it.
    after_one = api_client.get(
        f"/api/sessions/{session_id}/events", {"after": first["events"][0]["token"]}
    ).json()
    assert after_one["events"][0]["seq"] == 2
    empty = api_client.get(
        f"/api/sessions/{session_id}/events", {"after": rest["next_token"]}
    ).json()
    assert empty == {"events": [], "next_token": rest["next_token"]}


def test_bad_and_foreign_tokens(api_client: Any, other_api_client: Any, rq_workers: Any) -> None:
    mine = new_session(api_client)
    scripted_push(mine, {"text": "ok"})
    accepted = post(api_client, mine, "hello").json()
    other = new_session(api_client)
    token = api_client.get(f"/api/sessions/{mine}/events").json()["next_token"]

    tampered = token[:-3] + ("abc" if not token.endswith("abc") else "xyz")
    response = api_client.get(f"/api/sessions/{mine}/events", {"after": tampered})
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_token"
    response = api_client.get(f"/api/sessions/{mine}/events", {"after": "garbage"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_token"
    # A genuine token of another session (even one's own) is not found there.
    response = api_client.get(f"/api/sessions/{other}/events", {"after": token})
    assert response.status_code == 404
    # A session token is not a run token.
    response = api_client.get(f"/api/runs/{accepted['run_id']}", {"continuation_token": token})
    assert response.status_code == 404
    response = api_client.get(
        f"/api/runs/{accepted['run_id']}", {"continuation_token": "not-a-token"}
    )
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_token"
    # Someone else's run, token or not, is not found.
    response = other_api_client.get(
        f"/api/runs/{accepted['run_id']}", {"continuation_token": accepted["continuation_token"]}
    )
    assert response.status_code == 404
    assert other_api_client.post(f"/api/runs/{accepted['run_id']}/cancel").status_code == 404


def test_an_invalid_limit_is_refused(api_client: Any) -> None:
    session_id = new_session(api_client)
    for limit in ("0", "-1", "abc", "100000"):
        response = api_client.get(f"/api/sessions/{session_id}/events", {"limit": limit})
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "invalid_request"


def test_deleting_a_session_cancels_its_runs_and_jobs(
    api_client: Any, user: Any, rq_workers: Any
) -> None:
    session_id = new_session(api_client)
    scripted_push(session_id, {"text": "going on " * 300, "chunk": 5, "delay_s": 0.05})
    run_id = post(api_client, session_id, "go").json()["run_id"]
    job, _ = job_create(
        owner=user,
        tool="gated",
        args={"gate": f"{session_id}-never"},
        idempotency_key="d1",
        session_id=session_id,
    )
    wait_until(lambda: Run.objects.get(pk=run_id).status == "running")
    response = api_client.delete(f"/api/sessions/{session_id}")
    assert response.status_code == 200
    assert response.json()["cancelled_runs"] == 1 and response.json()["cancelled_jobs"] == 1
    wait_until(lambda: Run.objects.get(pk=run_id).status == "cancelled")
    wait_until(lambda: Job.objects.get(pk=job.id).status == "cancelled", timeout=30)
    # The job's cancellation event does not start a run on a deleted session.
    assert not Run.objects.filter(session_id=session_id).exclude(pk=run_id).exists()
