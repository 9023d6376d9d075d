"""Bad input over either binding gets the spec's error and agentsite's reason, never a 500.

Raw HTTP against a real daphne, as a client with bugs would send it.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from accounts.models import UserQuota
from tests.a2a.conftest import token_for
from tests.sessions.test_quotas import fresh_windows  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def rpc(url: str, token: str, body: Any, version: str | None = "1.0") -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    if version:
        headers["A2A-Version"] = version
    raw = body if isinstance(body, bytes) else None
    answer = httpx.post(
        f"{url}/a2a/jsonrpc",
        headers=headers,
        content=raw,
        json=None if raw is not None else body,
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def call(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}


def user_message(text: str, **more: Any) -> dict[str, Any]:
    return {
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
            **more,
        }
    }


def test_malformed_json_rpc_gets_the_spec_s_codes(a2a_url: str, user: Any) -> None:
    token = token_for(user)
    cases = [
        (b"{not json", -32700),
        (b"[]", -32600),
        ({"jsonrpc": "2.0", "id": 1}, -32600),
        (call("NoSuchMethod", {}), -32601),
        (call("GetTask", {"id": 5, "historyLength": "many"}), -32602),
        (call("GetTask", {"id": "task_nosuchtask000000000000000", "historyLength": -1}), -32602),
        (call("GetTask", {"id": "task_nosuchtask000000000000000"}), -32001),
        (call("CancelTask", {"id": "../etc/passwd"}), -32001),
        (call("ListTasks", {"pageSize": 1000}), -32602),
        (call("ListTasks", {"pageToken": "not-a-token"}), -32602),
        (call("SendMessage", user_message("")), -32602),
        (call("SendMessage", {"message": {"messageId": "m", "role": "ROLE_AGENT"}}), -32602),
        (call("SendMessage", user_message("hi", contextId="ses_nosuchsession00000")), -32602),
        (call("SendMessage", user_message("hi", taskId="task_nosuchtask000000000000000")), -32001),
    ]
    for body, code in cases:
        answer = rpc(a2a_url, token, body)
        assert answer["error"]["code"] == code, (body, answer)
        assert answer["error"]["message"], (body, answer)
    missing_version = rpc(a2a_url, token, call("ListTasks", {}), version=None)
    assert missing_version["error"]["code"] == -32009


def test_another_user_s_context_is_not_yours_to_continue(
    a2a_url: str, user: Any, other_user: Any, rq_workers: Any
) -> None:
    mine = rpc(a2a_url, token_for(user), call("SendMessage", user_message("hello")))
    context_id = mine["result"]["task"]["contextId"]
    theirs = rpc(
        a2a_url,
        token_for(other_user),
        call("SendMessage", user_message("hello", contextId=context_id)),
    )
    assert theirs["error"]["code"] == -32602
    assert theirs["error"]["data"][0]["metadata"]["code"] == "context_not_found" or (
        "context_not_found" in str(theirs["error"])
    )


@pytest.mark.usefixtures("fresh_windows")
def test_a_message_over_the_quota_is_refused_with_its_code(
    a2a_url: str, user: Any, rq_workers: Any
) -> None:
    UserQuota.objects.create(user=user, messages_per_minute=1)
    token = token_for(user)
    first = rpc(a2a_url, token, call("SendMessage", user_message("hello")))
    assert first["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    second = rpc(a2a_url, token, call("SendMessage", user_message("hello again")))
    assert second["error"]["code"] == -32600
    assert "quota_exceeded" in str(second["error"])


def test_the_http_json_binding_answers_errors_with_statuses(a2a_url: str, user: Any) -> None:
    headers = {"Authorization": f"Bearer {token_for(user)}", "A2A-Version": "1.0"}
    missing = httpx.get(f"{a2a_url}/a2a/tasks/task_nosuchtask000000000000000", headers=headers)
    assert missing.status_code == 404, missing.text
    assert missing.json()["error"]["message"] == (
        "No task with id 'task_nosuchtask000000000000000'."
    )
    broken = httpx.post(
        f"{a2a_url}/a2a/message:send",
        headers={**headers, "Content-Type": "application/json"},
        content=b"{broken",
    )
    assert broken.status_code == 400, broken.text
    huge = httpx.post(
        f"{a2a_url}/a2a/message:send",
        headers={**headers, "Content-Type": "application/json"},
        content=b'{"message": {"parts": [{"text": "' + b"x" * 3_000_000 + b'"}]}}',
    )
    assert huge.status_code == 413, huge.status_code
