"""A Responses-API response: which session it speaks in and where its input sits in the log.

Nothing the agent produces is stored here. A response's status, output and
stream events are derived from the session's event log (``responses.projection``);
this row only maps the OpenAI id onto that log.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from agentsite.core.ids import new_id


def new_response_id() -> str:
    return new_id("resp", 24)


class AgentResponse(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_response_id, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_responses"
    )
    session = models.ForeignKey(
        "agent_sessions.AgentSession", on_delete=models.CASCADE, related_name="responses"
    )
    # Where the response's input starts in the log: the user_message event that carries
    # it, or, when the input decides requests, the first decision's event (the message,
    # if any, follows in the same transaction).
    input_seq = models.PositiveBigIntegerField()
    # The input items as the client sent them (for GET …/input_items).
    input_items = models.JSONField(default=list)
    model = models.CharField(max_length=100)
    instructions = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # The function tools the client declared (also in its message, as the session's
    # client tools), as the Response shows them.
    tools = models.JSONField(default=list, blank=True)
    background = models.BooleanField(default=False)
    previous_response_id = models.CharField(max_length=40, blank=True)
    # The session's last seq when a cancel was asked for: from there on the
    # response ends as soon as its runs and jobs have ended.
    cancel_seq = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    deleted_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name = "response"
        verbose_name_plural = "responses"
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "-created_at"])]

    def __str__(self) -> str:
        return self.id
