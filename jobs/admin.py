from __future__ import annotations

from django.contrib import admin

from jobs.models import Job, JobChunk


class JobChunkInline(admin.TabularInline):
    model = JobChunk
    extra = 0
    can_delete = False
    readonly_fields = ["index", "item", "created_at"]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "tool",
        "owner",
        "status",
        "progress_fraction",
        "created_at",
        "finished_at",
    ]
    list_filter = ["status", "tool"]
    search_fields = ["id", "tool", "owner__username"]
    readonly_fields = [
        "id",
        "status",
        "progress_fraction",
        "progress_message",
        "result",
        "error_code",
        "error_message",
        "deadline",
        "cancel_requested_at",
        "heartbeat_at",
        "worker_name",
        "created_at",
        "started_at",
        "finished_at",
    ]
    inlines = [JobChunkInline]
