"""Paused SDK runs in the admin: read-only, per tenant; decisions are made on the approval requests."""

from django.contrib import admin

from toolhub.admin_helpers import ReadOnlyMixin, TenantScopedAdmin
from toolhub.admin_lists import ExactSearchMixin, LeanChangeListMixin

from .models import PausedAgentRun


@admin.register(PausedAgentRun)
class PausedAgentRunAdmin(
    LeanChangeListMixin,
    ExactSearchMixin,
    TenantScopedAdmin,
    ReadOnlyMixin,
    admin.ModelAdmin,  # type: ignore[type-arg]
):
    """Which SDK runs wait for which calls; the stored ``RunState`` (the conversation) is not shown.

    Read-only, deletion included: the row is the only record of what an outside run waits for, as an agent run is.
    One row per pause, kept for ever: listed as the agent runs are (exact search on indexes, bounded count, only the
    columns shown fetched: never the stored state).
    """

    list_display = ("id", "agent_name", "user", "tenant", "status", "created_at", "resumed_at")
    list_select_related = ("user",)
    list_only_fields = ("id", "agent_name", "user__username", "tenant", "status", "created_at", "resumed_at")
    list_filter = ("status",)
    search_fields = ("id",)  # draws the box; ExactSearchMixin matches exactly on indexes
    search_help_text = "A paused run's id, run key, tenant or username (exact)."
    uuid_search_fields = ("pk",)
    exact_search_fields = ("run_key", "tenant", "user__username")
    fields = ("id", "run_key", "agent_name", "user", "tenant", "status", "call_ids", "created_at", "resumed_at")
    readonly_fields = fields
