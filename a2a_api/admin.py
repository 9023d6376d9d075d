from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from a2a_api.models import AgentTask, PushConfig


class PushConfigInline(admin.TabularInline):
    model = PushConfig
    extra = 0
    can_delete = False
    # The token and the credentials are the client's secrets: not shown.
    fields = readonly_fields = ("config_id", "url", "auth_scheme", "created_at")

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(AgentTask)
class AgentTaskAdmin(admin.ModelAdmin):
    list_display = ["id", "owner", "session", "pushed_state", "canceled_at", "created_at"]
    list_select_related = ["owner", "session"]
    search_fields = ["id", "session__id", "owner__username"]
    readonly_fields = [f.name for f in AgentTask._meta.fields]
    inlines = [PushConfigInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
