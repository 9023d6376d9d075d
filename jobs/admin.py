"""Jobs in the admin: read-only state, actions through the lifecycle."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.views.main import SEARCH_VAR
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.safestring import SafeString

from agentsite.core.errors import DomainError
from agentsite.core.queries import count_up_to
from jobs import lifecycle, services
from jobs.models import Job, JobChunk, JobEvent, WebhookAttempt, WebhookDelivery, WebhookSecret
from jobs.registry import all_tools


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class JobChunkInline(ReadOnlyInline):
    model = JobChunk
    fields = readonly_fields = ("index", "item", "created_at")


class JobEventInline(ReadOnlyInline):
    model = JobEvent
    fields = readonly_fields = ("created_at", "event", "payload")


class WebhookDeliveryInline(ReadOnlyInline):
    model = WebhookDelivery
    fields = readonly_fields = (
        "message_id",
        "event_type",
        "url",
        "status",
        "attempts",
        "next_attempt_at",
        "attempt_log",
    )

    @admin.display(description="attempts made")
    def attempt_log(self, obj: WebhookDelivery) -> SafeString:
        rows = [
            format_html(
                "<li>#{} {} — {} {}</li>",
                a.number,
                a.created_at.strftime("%H:%M:%S"),
                a.status_code or "no response",
                a.error[:120],
            )
            for a in obj.attempt_rows.all()
        ]
        return format_html("<ul>{}</ul>", SafeString("".join(rows)))


def progress_bar(job: Job, width_px: int = 120) -> SafeString:
    fraction = job.progress_fraction or 0.0
    return format_html(
        '<div title="{}" style="width:{}px;background:#eee;border-radius:3px">'
        '<div style="width:{}%;background:{};height:10px;border-radius:3px"></div></div>',
        job.progress_message or f"{fraction:.0%}",
        width_px,
        round(fraction * 100),
        "#c33" if job.status in {"failed", "timed_out"} else "#4a4",
    )


def compact_time(moment: datetime | None) -> SafeString:
    """A list cell's time: to the minute, the full timestamp on hover."""
    if moment is None:
        return format_html("{}", "—")
    local = timezone.localtime(moment)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        local.isoformat(),
        local.isoformat(sep=" ", timespec="seconds"),
        local.strftime("%Y-%m-%d %H:%M"),
    )


class ToolFilter(admin.SimpleListFilter):
    """The registered tools, without a DISTINCT over every job ever run."""

    title = "tool"
    parameter_name = "tool"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(tool.name, tool.name) for tool in sorted(all_tools(), key=lambda t: t.name)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        return queryset.filter(tool=self.value()) if self.value() else queryset


class CappedCountPaginator(Paginator):
    """Counts at most ``CAP`` rows: the first page of months of jobs costs what an empty one does.

    Past the cap the admin shows ``CAP`` as the total and pages up to it; filters
    and search narrow the list below it. A filtered list counts its first rows
    in the list's order, from the index its page is read from. The whole list
    counts any ``CAP`` rows, in the table's order (on PostgreSQL reading them in
    order from the index would also visit each recent row in the table); and a
    search reads every job whatever the order (no index finds a substring), so
    its count leaves the order out rather than sort what matched.
    """

    CAP = 10_000
    searched = False

    @cached_property
    def count(self) -> int:
        object_list = self.object_list
        if isinstance(object_list, QuerySet):
            if self.searched or not object_list.query.where:
                object_list = object_list.order_by()
            return count_up_to(object_list, self.CAP)[0]
        return len(object_list)


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    # Compact: status and progress share a column, times read "2026-12-04 15:14".
    list_display = ["id", "tool", "owner", "state", "created", "finished"]
    # No date_hierarchy and no plain "tool" filter: each scans every job on each page.
    list_filter = ["status", ToolFilter, "created_at"]
    search_fields = ["id", "tool", "owner__username"]
    list_select_related = ["owner"]
    paginator = CappedCountPaginator
    show_full_result_count = False
    actions = ["cancel_jobs", "retry_as_new_jobs"]
    inlines = [JobChunkInline, JobEventInline, WebhookDeliveryInline]
    fieldsets = [
        (None, {"fields": ["id", "owner", "tool", "status", "progress", "session", "run"]}),
        ("Request", {"fields": ["arguments", "timeout_s", "deadline", "callback_url"]}),
        ("Dependencies", {"fields": ["depends_on"]}),
        ("Outcome", {"fields": ["output", "error_code", "error_message"]}),
        (
            "Execution",
            {
                "fields": [
                    "idempotency_key",
                    "ready_at",
                    "enqueued_at",
                    "started_at",
                    "heartbeat_at",
                    "worker_name",
                    "cancel_requested_at",
                    "finished_at",
                    "created_at",
                ]
            },
        ),
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # Everything: the lifecycle owns a job's state, the admin only shows it.
        return [str(f) for fs in self.fieldsets for f in fs[1]["fields"]]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def get_paginator(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Paginator:
        paginator = super().get_paginator(request, *args, **kwargs)
        if isinstance(paginator, CappedCountPaginator):
            paginator.searched = bool(request.GET.get(SEARCH_VAR))
        return paginator

    @admin.display(description="progress")
    def progress(self, job: Job) -> SafeString:
        return progress_bar(job)

    @admin.display(description="status", ordering="status")
    def state(self, job: Job) -> SafeString:
        return format_html("{}{}", job.get_status_display(), progress_bar(job, width_px=90))

    @admin.display(description="created", ordering="created_at")
    def created(self, job: Job) -> SafeString:
        return compact_time(job.created_at)

    @admin.display(description="finished", ordering="finished_at")
    def finished(self, job: Job) -> SafeString:
        return compact_time(job.finished_at)

    @admin.display(description="arguments")
    def arguments(self, job: Job) -> SafeString:
        return format_html("<pre>{}</pre>", json.dumps(job.args, indent=2))

    @admin.display(description="output")
    def output(self, job: Job) -> SafeString:
        return format_html("<pre>{}</pre>", json.dumps(job.result, indent=2)[:20000])

    @admin.action(description="Cancel the selected jobs")
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        states = [lifecycle.job_request_cancel(job_id=job.id) for job in queryset]
        summary = ", ".join(f"{states.count(s)} {s}" for s in sorted(set(states)))
        self.message_user(request, f"Cancel requested: {summary}.", messages.SUCCESS)

    @admin.action(description="Retry as new jobs")
    def retry_as_new_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        started = []
        for job in queryset:
            try:
                started.append(services.job_retry(job=job).id)
            except DomainError as exc:
                self.message_user(request, f"{job.id}: {exc.message}", messages.ERROR)
        if started:
            self.message_user(request, f"Started {', '.join(started)}.", messages.SUCCESS)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = [
        "message_id",
        "event_type",
        "owner",
        "job",
        "status",
        "attempts",
        "next_attempt_at",
        "created_at",
    ]
    list_select_related = ["owner", "job"]
    list_filter = ["status"]
    search_fields = ["message_id", "event_type", "job__id", "url"]
    # The headers a receiver asked for hold its secrets (an A2A client's token).
    exclude = ["headers"]
    readonly_fields = [f.name for f in WebhookDelivery._meta.fields if f.name != "headers"]


@admin.register(WebhookAttempt)
class WebhookAttemptAdmin(admin.ModelAdmin):
    list_display = ["delivery", "number", "status_code", "duration_ms", "created_at"]
    search_fields = ["delivery__message_id", "delivery__job__id"]
    readonly_fields = [f.name for f in WebhookAttempt._meta.fields]


@admin.register(WebhookSecret)
class WebhookSecretAdmin(admin.ModelAdmin):
    list_display = ["user", "callback_url", "created_at"]
    fields = ["user", "callback_url", "created_at"]
    # The address is checked when its owner sets it (PUT /api/webhooks), not here.
    readonly_fields = ["user", "callback_url", "created_at"]
