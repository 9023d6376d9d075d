"""A2A push notifications: a task's changes of state posted to the client's receiver.

A local receiver (an address the tests allow, as the job callbacks' tests do)
records what arrives: each state once, as a ``StreamResponse`` holding the whole
task, with the client's token and credentials; the configurations are the
caller's own, a delete of one is idempotent, and an address webhooks may not
reach is refused.
"""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    InvalidParamsError,
    ListTaskPushNotificationConfigsRequest,
    StreamResponse,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf import json_format

from a2a_api.models import AgentTask
from jobs.models import WebhookDelivery
from tests.a2a.conftest import run
from tests.a2a.test_round_trips import assistant_texts, first_task, send
from tests.conftest import wait_until
from tests.jobs.test_webhooks import Receiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def receiver() -> Any:
    server = Receiver(failures=0)
    yield server
    server.server.shutdown()


def received_states(receiver: Receiver) -> list[str]:
    states = []
    for _, body, _ in receiver.received:
        task = json_format.Parse(body, StreamResponse()).task
        states.append(TaskState.Name(task.status.state))
    return states


def test_a_task_s_states_are_posted_once_each_with_the_client_s_token(
    client_of: Any, user: Any, receiver: Receiver, rq_scheduler: Any
) -> None:
    mine = client_of(user, streaming=False)

    async def talk() -> Any:
        async with mine as client:
            request = send("write a report on the shop library")
            request.configuration.return_immediately = True
            push = request.configuration.task_push_notification_config
            push.url, push.token, push.id = receiver.url, "tok-1", "mine"
            push.authentication.scheme, push.authentication.credentials = "Bearer", "rcv-secret"
            return await first_task(client, request)

    started = run(talk())
    wait_until(lambda: "TASK_STATE_COMPLETED" in received_states(receiver), timeout=60)
    states = received_states(receiver)
    assert states[-1] == "TASK_STATE_COMPLETED"
    assert len(states) == len(set(states)), states  # each state once
    headers, body, _ = receiver.received[-1]
    assert headers["X-A2A-Notification-Token"] == "tok-1"
    assert headers["Authorization"] == "Bearer rcv-secret"
    task = json_format.Parse(body, StreamResponse()).task
    assert task.id == started.id
    answers = [a for a in task.artifacts if a.name == "answer"]
    assert ["".join(p.text for p in a.parts) for a in answers] == assistant_texts(task.context_id)
    assert len(task.artifacts) == len(answers) + 1  # and the report
    deliveries = WebhookDelivery.objects.filter(owner=user, event_type__startswith="a2a.task.")
    assert deliveries.count() == len(states)
    # The receiver has the last post before its sender has recorded the answer.
    wait_until(lambda: {d.status for d in deliveries} == {"delivered"}, timeout=10)
    last = deliveries.order_by("created_at", "id").last()
    assert last is not None and last.payload["task"]["id"] == started.id
    assert AgentTask.objects.get(pk=started.id).pushed_state == "completed"


def test_configurations_are_the_callers_own_and_refuse_unreachable_addresses(
    client_of: Any, user: Any, other_user: Any, receiver: Receiver
) -> None:
    mine, others = client_of(user, streaming=False), client_of(other_user, streaming=False)

    async def talk() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with mine as client:
            task = await first_task(client, send("hello"))
            config = TaskPushNotificationConfig(task_id=task.id, url=receiver.url, token="t")
            made = await client.create_task_push_notification_config(config)
            seen["made"] = made
            seen["got"] = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id=made.id)
            )
            seen["listed"] = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            with pytest.raises(InvalidParamsError) as refused:
                await client.create_task_push_notification_config(
                    TaskPushNotificationConfig(task_id=task.id, url="http://169.254.169.254/")
                )
            seen["refused"] = refused.value
            delete = DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=made.id)
            await client.delete_task_push_notification_config(delete)
            with pytest.raises(TaskNotFoundError):
                await client.get_task_push_notification_config(
                    GetTaskPushNotificationConfigRequest(task_id=task.id, id=made.id)
                )
            # A delete is idempotent: the same one again is no error.
            await client.delete_task_push_notification_config(delete)
        async with others as theirs:
            with pytest.raises(TaskNotFoundError):
                await theirs.list_task_push_notification_configs(
                    ListTaskPushNotificationConfigsRequest(task_id=task.id)
                )
            # Nor is a task of someone else's one to delete from.
            with pytest.raises(TaskNotFoundError):
                await theirs.delete_task_push_notification_config(delete)
        return seen

    seen = run(talk())
    made = seen["made"]
    assert made.id.startswith("pnc_") and made.url == receiver.url and made.token == "t"
    assert seen["got"] == made
    assert [c.id for c in seen["listed"].configs] == [made.id]
    assert seen["refused"].data["code"] == "callback_url_refused"
