from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from agentsite.core.errors import DomainError
from sessions.approvals import approval_decide
from sessions.models import AgentSession, Approval, Event, Run, ToolApprovalRule
from sessions.runs import run_request_cancel


@admin.register(AgentSession)
class AgentSessionAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "title",
        "owner",
        "state",
        "pending_approvals",
        "model",
        "last_seq",
        "updated_at",
    ]
    list_filter = ["state", "model"]
    search_fields = ["id", "title", "owner__username"]
    # callback_url: checked when its owner sets it (the API), not here.
    readonly_fields = [
        "id",
        "callback_url",
        "state",
        "pending_approvals",
        "allowed_tools",
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


def _decide_selected(
    modeladmin: Any, request: HttpRequest, queryset: QuerySet[Approval], decision: str
) -> None:
    """Decide each selected request as the staff user, through the one writer."""
    decided, refused = 0, []
    for approval in queryset.select_related("decided_by"):
        try:
            approval_decide(
                approval=approval,
                by=request.user,
                decision=decision,
                reason=f"{decision}d in the admin by {request.user.get_username()}",
            )
            decided += 1
        except DomainError as exc:
            refused.append(f"{approval.id}: {exc.message}")
    modeladmin.message_user(request, f"{decided} request(s) {decision}d.", messages.INFO)
    if refused:
        modeladmin.message_user(request, "Not decided: " + "; ".join(refused), messages.WARNING)


@admin.action(description="Approve the selected tool calls")
def approvals_approve(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Approval]) -> None:
    _decide_selected(modeladmin, request, queryset, "approve")


@admin.action(description="Reject the selected requests")
def approvals_reject(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Approval]) -> None:
    _decide_selected(modeladmin, request, queryset, "reject")


@admin.register(Approval)
class ApprovalAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "kind",
        "status",
        "owner",
        "session",
        "tool",
        "job_id",
        "decided_by",
        "created_at",
        "expires_at",
    ]
    list_filter = ["status", "kind", "tool"]
    search_fields = ["id", "session__id", "owner__username", "job_id", "tool"]
    actions = [approvals_approve, approvals_reject]
    list_select_related = ["owner", "session", "decided_by"]
    readonly_fields = [f.name for f in Approval._meta.fields]

    def has_add_permission(self, request: object) -> bool:
        return False  # agents ask, in their turns

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False  # decided through the actions, never edited


@admin.register(ToolApprovalRule)
class ToolApprovalRuleAdmin(admin.ModelAdmin):
    list_display = ["user", "tool", "mode"]
    list_filter = ["mode", "tool"]
    search_fields = ["user__username", "tool"]
    raw_id_fields = ["user"]
