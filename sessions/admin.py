from __future__ import annotations

from django.contrib import admin

from sessions.models import AgentSession, Event, Run


@admin.register(AgentSession)
class AgentSessionAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "owner", "state", "model", "last_seq", "updated_at"]
    list_filter = ["state", "model"]
    search_fields = ["id", "title", "owner__username"]
    readonly_fields = [
        "id",
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


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "session", "owner", "status", "batch_size", "created_at", "finished_at"]
    list_filter = ["status"]
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
