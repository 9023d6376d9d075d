from __future__ import annotations

from django.contrib import admin

from accounts.models import ApiToken, UserQuota


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "user", "name", "created_at", "last_used_at", "expires_at"]
    list_filter = ["created_at"]
    search_fields = ["prefix", "user__username", "name"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]

    def has_add_permission(self, request: object) -> bool:
        # The raw value is shown once; issue tokens with `manage.py create_api_token`.
        return False


@admin.register(UserQuota)
class UserQuotaAdmin(admin.ModelAdmin):
    list_display = [
        "user",
        "live_jobs",
        "live_turns",
        "messages_per_minute",
        "mcp_sessions",
        "pending_approvals",
    ]
    search_fields = ["user__username"]
    raw_id_fields = ["user"]
