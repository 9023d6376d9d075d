from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from sessions.models import AgentSession, Event, Run
from sessions.runs import run_request_cancel


@admin.register(AgentSession)
class AgentSessionAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "owner", "state", "model", "last_seq", "updated_at"]
    list_filter = ["state", "model"]
    search_fields = ["id", "title", "owner__username"]
    # callback_url: checked when its owner sets it (the API), not here.
    readonly_fields = [
        "id",
        "callback_url",
        "state",
        "last_seq",
        "seen_seq",
        "created_at",
        "updated_at",
        "deleted_at",
    ]


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["session", "seq", "kind", "pending", "run", "consumed_by", "created_at"]
    list_filter = ["kind", "pending"]
    search_fields = ["session__id", "run__id"]
    readonly_fields = [
        "session",
        "seq",
        "kind",
        "payload",
        "pending",
        "run",
        "consumed_by",
        "created_at",
    ]

    def has_add_permission(self, request: object) -> bool:
        return False  # the log is append-only through event_append


@admin.action(description="Interrupt the selected runs")
def runs_interrupt(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Run]) -> None:
    # Through the run lifecycle, like every other status change.
    reached = [
        run_request_cancel(run_id=run_id) for run_id in queryset.values_list("id", flat=True)
    ]
    modeladmin.message_user(
        request, f"{len(reached)} run(s): {', '.join(sorted(set(reached)))}", messages.INFO
    )


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "session",
        "owner",
        "status",
        "batch_size",
        "time_to_first_token_ms",
        "decision_ms",
        "created_at",
        "finished_at",
    ]
    list_filter = ["status"]
    actions = [runs_interrupt]
    search_fields = ["id", "session__id", "owner__username"]
    readonly_fields = [
        "id",
        "status",
        "batch_size",
        "start_seq",
        "usage",
        "error",
        "cancel_requested_at",
        "created_at",
        "started_at",
        "first_token_at",
        "finished_at",
        "heartbeat_at",
    ]
