"""The approval policy's pages beside the desk: operators' approval rules and the webhook's deliveries."""

import json

from django.contrib import admin

from approvals.models import ApprovalRule, WebhookDelivery
from approvals.rule_checks import rule_problems
from toolhub.admin_governance_audit import GovernanceAudited
from toolhub.admin_helpers import ProblemsColumn, ReadOnlyMixin, TenantScopedAdmin, pretty_json
from toolhub.admin_lists import ExactSearchMixin


@admin.register(ApprovalRule)
class ApprovalRuleAdmin(GovernanceAudited, ProblemsColumn, TenantScopedAdmin, admin.ModelAdmin):
    """Operators' approval rules, evaluated by priority after the code's own rule.

    Tenant-scoped staff manage the rules of their tenants and read the global ones (bound to no
    tenant, they apply to every tenant), which only people who cross the boundary change.
    """

    small_table = True  # configuration: sorts by any column (GuardedLookups)

    tenant_field = "tenant__slug"
    global_rows_visible = True

    list_display = (
        "name",
        "enabled",
        "priority",
        "tool_name",
        "tool_group",
        "tenant",
        "min_risk",
        "condition",
        "required_approvals",
        "timeout_seconds",
        "problems",
    )
    list_editable = ("enabled", "priority")
    list_filter = ("enabled", "min_risk", "tool_group", "tenant")
    search_fields = ("name", "tool_name", "argument")
    list_select_related = ("tool_group", "tenant")
    fieldsets = (
        (None, {"fields": ("name", "enabled", "priority")}),
        ("Which calls", {"fields": ("tool_name", "tool_group", "tenant", "min_risk")}),
        ("Condition on an argument (optional)", {"fields": ("argument", "operator", "value")}),
        ("What it asks for", {"fields": ("required_approvals", "timeout_seconds")}),
    )

    def row_problems(self, obj: ApprovalRule) -> dict[str, str]:
        """An enabled rule that can no longer match (saved before the code changed), as ``approvals.W001`` says."""
        return rule_problems(obj) if obj.enabled else {}

    @admin.display(description="Condition")
    def condition(self, obj: ApprovalRule) -> str:
        if not obj.argument:
            return "-"
        return f"{obj.argument} {obj.operator} {json.dumps(obj.value)}"


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ExactSearchMixin, TenantScopedAdmin, ReadOnlyMixin, admin.ModelAdmin):
    """Notifications sent to the configured webhook; delivered and retried by workers, so read-only here.

    Each payload names the tenant of its request: staff see their tenants' deliveries only.
    """

    tenant_field = "payload__tenant"

    list_display = ("id", "event", "status", "attempts", "next_attempt_at", "delivered_at", "created_at")
    list_filter = ("status", "event")
    search_fields = ("message_id",)  # draws the box; ExactSearchMixin matches exactly on indexes
    search_help_text = "A message id, exact."
    exact_search_fields = ("message_id",)
    show_full_result_count = False
    fields = (
        "message_id",
        "event",
        "status",
        "attempts",
        "next_attempt_at",
        "delivered_at",
        "last_error",
        "shown_payload",
    )
    readonly_fields = fields

    @admin.display(description="Payload")
    def shown_payload(self, obj: WebhookDelivery) -> str:
        return pretty_json(obj.payload)
