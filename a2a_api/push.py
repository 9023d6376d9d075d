"""A2A push notifications: each task's configurations, and when a task's state may have moved.

A client configures where a task's changes of state go (``push_config_set``,
with its own id, token and credentials; an address webhooks may reach, checked
as a job's callback is). Whenever the log shows an event that may move a task's
state (a run starting or ending, a request asked or decided, a job's end),
``watch`` hands the session to ``a2a_api.notify`` on the ``default`` queue,
which posts each configured task's new state once, through the webhook
deliveries (pinned addresses, retries, the delivery log in the admin). Only the
sessions of tasks with configurations are watched (``sessions.log_watch``): the
others' events cost A2A nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import django_rq
from django.db import transaction

from a2a_api.models import AgentTask, PushConfig
from agentsite.core.errors import Invalid, NotFound
from agentsite.core.ids import new_id
from jobs.live import redis_connection
from jobs.webhooks import callback_url_check
from sessions.log_watch import log_watch_settle

CONFIGS_PER_TASK = 10
# The log events after which a task's state may differ.
MOVES = frozenset(
    {"run_started", "run_finished", "run_requeued", "approval_requested", "approval_decided"}
)
FINAL_JOB_STATUSES = frozenset({"done", "failed", "cancelled", "timed_out"})


def push_config_set(
    *,
    task: AgentTask,
    config_id: str,
    url: str,
    token: str = "",
    auth_scheme: str = "",
    auth_credentials: str = "",
) -> PushConfig:
    """Create the configuration, or replace the one of the same id."""
    callback_url_check(url)
    if len(token) > 500 or len(auth_scheme) > 50 or len(auth_credentials) > 2000:
        raise Invalid("push_config_too_long", "The token or the credentials are too long.")
    if auth_scheme and not auth_scheme.replace("-", "").isalnum():
        raise Invalid("invalid_auth_scheme", "The authentication scheme is one word.")
    if len(config_id) > 100:
        raise Invalid("push_config_too_long", "The configuration id is over 100 characters.")
    fields = {
        "url": url,
        "token": token,
        "auth_scheme": auth_scheme,
        "auth_credentials": auth_credentials,
    }
    with transaction.atomic():
        locked = AgentTask.objects.select_for_update().get(pk=task.pk)
        config_id = config_id or new_id("pnc", 16)
        existing = PushConfig.objects.filter(task=locked, config_id=config_id).first()
        if existing is None and locked.push_configs.count() >= CONFIGS_PER_TASK:
            raise Invalid(
                "too_many_push_configs",
                f"A task takes at most {CONFIGS_PER_TASK} push notification configurations.",
            )
        config, _ = PushConfig.objects.update_or_create(
            task=locked, config_id=config_id, defaults=fields
        )
        _session_watch_settle(locked.session_id)
    return config


def push_config_get(*, task: AgentTask, config_id: str) -> PushConfig:
    config = PushConfig.objects.filter(task=task, config_id=config_id).first()
    if config is None:
        raise NotFound(
            f"No push notification configuration {config_id!r} on this task.",
            details={"param": "id"},
        )
    return config


def push_configs(*, task: AgentTask) -> list[PushConfig]:
    return list(task.push_configs.all())


def push_config_delete(*, task: AgentTask, config_id: str) -> None:
    """Remove the configuration; one that is not there (deleted before) is no error: A2A
    asks a delete to be idempotent. The task itself must be there (``task_for``)."""
    with transaction.atomic():
        locked = AgentTask.objects.select_for_update().get(pk=task.pk)
        deleted, _ = PushConfig.objects.filter(task=locked, config_id=config_id).delete()
        if deleted:
            _session_watch_settle(locked.session_id)


def _session_watch_settle(session_id: str) -> None:
    """Watch the session's log while a task of it has a configuration."""
    log_watch_settle(
        session_id,
        watched=lambda: PushConfig.objects.filter(task__session_id=session_id).exists(),
    )


def push_headers(config: PushConfig) -> dict[str, str]:
    headers = {}
    if config.token:
        headers["X-A2A-Notification-Token"] = config.token
    if config.auth_scheme:
        headers["Authorization"] = f"{config.auth_scheme} {config.auth_credentials}".strip()
    return headers


def moves_state(kind: str, payload: Mapping[str, Any]) -> bool:
    return kind in MOVES or (kind == "job_event" and payload.get("status") in FINAL_JOB_STATUSES)


def watch(session_id: str, kind: str, payload: Mapping[str, Any]) -> None:
    """The log watcher (``sessions.log_watch``), shown the events of the sessions whose
    tasks have configurations: a pass for them when the task's state may have moved.

    A session stays watched when its configured task goes without its configurations
    being removed (the admin deletes it): hence the look, which a watched session alone
    pays."""
    if (
        moves_state(kind, payload)
        and PushConfig.objects.filter(task__session_id=session_id).exists()
    ):
        push_enqueue(session_id)


def push_enqueue(session_id: str) -> None:
    django_rq.get_queue("default", connection=redis_connection(), commit_mode="auto").enqueue(
        "a2a_api.notify.push_pass", session_id, job_timeout=60, result_ttl=60
    )
