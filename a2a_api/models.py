"""An A2A task: which responses carry one exchange of a session.

An A2A ``contextId`` is an agentsite session; a task is one exchange in it: the
response that answered the message that opened the task, then one more response
each time the task needed the user's input (an approval, an answer) and got it.
Nothing the agent produces is stored here: a task's state, history and artifacts
are derived from those responses, and so from the session's log
(``responses.projection``).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from agentsite.core.ids import new_id


def new_task_id() -> str:
    return new_id("task", 24)


class AgentTask(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_task_id, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="a2a_tasks"
    )
    session = models.ForeignKey(
        "agent_sessions.AgentSession", on_delete=models.CASCADE, related_name="a2a_tasks"
    )
    # The ids of the responses that carry the exchange, oldest first: the last one
    # is the task's current step.
    response_ids = models.JSONField(default=list)
    # The message ids the client gave its messages, in the same order (history).
    message_ids = models.JSONField(default=list)
    # The last state the task's push notifications told ("" before the first).
    pushed_state = models.CharField(max_length=20, blank=True, editable=False)
    # When a cancel was asked for while the task waited for input: it ends canceled.
    canceled_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "A2A task"
        verbose_name_plural = "A2A tasks"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner", "-created_at", "-id"])]

    def __str__(self) -> str:
        return self.id

    @property
    def current_response_id(self) -> str:
        return str(self.response_ids[-1])


class PushConfig(models.Model):
    """Where a client wants a task's changes of state posted (A2A push notifications)."""

    task = models.ForeignKey(AgentTask, on_delete=models.CASCADE, related_name="push_configs")
    # The client's id for the configuration, or one given when it named none.
    config_id = models.CharField(max_length=100)
    url = models.URLField(max_length=2000)
    # Sent back as X-A2A-Notification-Token, so the client knows the post is its own.
    token = models.CharField(max_length=500, blank=True)
    # How to authenticate to the client's receiver: "Authorization: <scheme> <credentials>".
    auth_scheme = models.CharField(max_length=50, blank=True)
    auth_credentials = models.CharField(max_length=2000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "A2A push notification configuration"
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["task", "config_id"], name="a2a_push_config_unique_id")
        ]

    def __str__(self) -> str:
        return f"{self.task_id}/{self.config_id}"
