"""Posting a task's new state to the clients that asked (RQ entry point, ``default`` queue).

The notification body is A2A's ``StreamResponse`` holding the whole ``Task``, as
``GetTask`` would answer it: a receiver that missed one still learns everything
from the next. Each state is posted once per task (``AgentTask.pushed_state``,
moved under the task's row lock), however many passes the log's events start.
"""

from __future__ import annotations

from a2a.types import StreamResponse
from django.db import transaction
from google.protobuf.json_format import MessageToDict

from a2a_api.mapping import task_of
from a2a_api.models import AgentTask
from a2a_api.push import push_headers
from a2a_api.services import TERMINAL, task_view
from jobs.webhooks import webhook_document_send


def push_pass(session_id: str) -> int:
    """Post the new state of each configured task of the session; how many were posted."""
    tasks = (
        AgentTask.objects.filter(session_id=session_id, push_configs__isnull=False)
        .exclude(pushed_state__in=TERMINAL)
        .values_list("id", flat=True)
        .distinct()
    )
    return sum(push_task(task_id) for task_id in list(tasks))


def push_task(task_id: str) -> bool:
    with transaction.atomic():
        task = AgentTask.objects.select_for_update().get(pk=task_id)
        view = task_view(task)
        if view.state == task.pushed_state:
            return False
        AgentTask.objects.filter(pk=task_id).update(pushed_state=view.state)
        document = MessageToDict(StreamResponse(task=task_of(view)))
        for config in task.push_configs.all():
            webhook_document_send(
                owner_id=task.owner_id,
                url=config.url,
                event_type=f"a2a.task.{view.state}",
                document=document,
                headers=push_headers(config),
            )
    return True
