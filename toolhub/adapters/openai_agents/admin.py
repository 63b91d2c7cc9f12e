"""Paused SDK runs in the admin: read-only, per tenant; decisions are made on the approval requests."""

from django.contrib import admin

from toolhub.admin_helpers import ReadOnlyMixin, TenantScopedAdmin

from .models import PausedAgentRun


@admin.register(PausedAgentRun)
class PausedAgentRunAdmin(TenantScopedAdmin, ReadOnlyMixin, admin.ModelAdmin):  # type: ignore[type-arg]
    """Which SDK runs wait for which calls; the stored ``RunState`` (the conversation) is not shown.

    Read-only, deletion included: the row is the only record of what an outside run waits for, as an agent run is.
    """

    list_display = ("id", "agent_name", "user", "tenant", "status", "created_at", "resumed_at")
    list_select_related = ("user",)
    list_filter = ("status",)
    search_fields = ("agent_name", "run_key")
    fields = ("id", "run_key", "agent_name", "user", "tenant", "status", "call_ids", "created_at", "resumed_at")
    readonly_fields = fields
