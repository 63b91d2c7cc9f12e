"""Paused SDK runs in the admin: read-only, per tenant; decisions are made on the approval requests."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from toolhub.admin_helpers import TenantScopedAdmin

from .models import PausedAgentRun


@admin.register(PausedAgentRun)
class PausedAgentRunAdmin(TenantScopedAdmin, admin.ModelAdmin):  # type: ignore[type-arg]
    """Which SDK runs wait for which calls; the stored ``RunState`` (the conversation) is not shown."""

    list_display = ("id", "agent_name", "user", "tenant", "status", "created_at", "resumed_at")
    list_select_related = ("user",)
    list_filter = ("status",)
    search_fields = ("agent_name", "run_key")
    fields = ("id", "run_key", "agent_name", "user", "tenant", "status", "call_ids", "created_at", "resumed_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
