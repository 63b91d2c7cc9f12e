"""The operators' approval desk: read a held-back call, then approve or reject it through the services."""

import json
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from approvals.models import (
    ApprovalDecision,
    ApprovalRequest,
    ApprovalRule,
    ApprovalStatus,
    DecisionKind,
    WebhookDelivery,
)
from approvals.services import DECIDE_PERMISSION, approval_approve, approval_may_decide, approval_reject
from toolhub.admin_helpers import ReadOnlyMixin, TenantScopedAdmin, pretty_json
from toolhub.exceptions import ApprovalError, NotInTenantError
from toolhub.selectors import displayed_arguments

Decide = Callable[..., ApprovalRequest]

#: What each decision is called on buttons and in messages, and the service that takes it.
DECISIONS: dict[str, tuple[str, str, Decide]] = {
    "approve": ("Approve", "approved", approval_approve),
    "reject": ("Reject", "rejected", approval_reject),
}


class DecisionForm(forms.Form):
    """The operator's comment; for a rejection it is what the model reads."""

    comment = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60, "placeholder": "Why? (the model reads it on rejection)"}),
    )


class ApprovalDecisionInline(ReadOnlyMixin, admin.TabularInline):
    """The decisions taken so far; they are records, so nobody edits them here."""

    model = ApprovalDecision
    extra = 0
    can_delete = False
    fields = ("round", "decision", "decided_by_name", "comment", "diff", "created_at")
    readonly_fields = fields
    verbose_name_plural = "Decisions so far"


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(TenantScopedAdmin, ReadOnlyMixin, admin.ModelAdmin):
    """Pending and past approval requests of the user's tenants; deciding happens only through the approval services.

    The scoped queryset is what the change page, the decision views and the bulk actions act on, so
    another tenant's request is absent everywhere (its page answers like a missing id).
    """

    list_display = (
        "id",
        "tool_name",
        "status",
        "risk",
        "reason",
        "requested_by",
        "agent_name",
        "tenant",
        "created_at",
        "expires_at",
    )
    list_filter = ("status", "risk", "tool_name", "source")
    search_fields = ("tool_name", "reason", "agent_name", "tenant", "requested_by__username")
    list_select_related = ("requested_by",)
    show_full_result_count = False
    inlines = (ApprovalDecisionInline,)
    actions = ("approve_selected", "reject_selected")
    fieldsets = (
        (None, {"fields": ("tool_name", "status", "risk", "reason", "source", "rule", "required_approvals", "round")}),
        ("The call", {"fields": ("call_link", "call_status", "arguments")}),
        ("Who asked", {"fields": ("requested_by", "agent_name", "tenant", "run_link")}),
        (
            "Who decides",
            {"fields": ("approver_group", "escalation_group", "escalate_at", "escalated_at"), "classes": ["collapse"]},
        ),
        ("When", {"fields": ("created_at", "expires_at", "decided_at")}),
    )
    readonly_fields = tuple(field for _, options in fieldsets for field in options["fields"])

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApprovalRequest]:
        return (
            super()
            .get_queryset(request)
            .select_related("call", "requested_by", "rule", "approver_group", "escalation_group")
        )

    def has_decide_permission(self, request: HttpRequest) -> bool:
        """Whether the user may see the decision buttons and actions; the services check again."""
        return request.user.has_perm(DECIDE_PERMISSION)

    @admin.display(description="Tool call")
    def call_link(self, obj: ApprovalRequest) -> str:
        url = reverse("admin:toolhub_toolcall_change", args=[obj.call_id])
        return format_html('<a href="{}">{}</a>', url, obj.call_id)

    @admin.display(description="Call status")
    def call_status(self, obj: ApprovalRequest) -> str:
        return obj.call.status

    @admin.display(description="Arguments (sensitive values redacted)")
    def arguments(self, obj: ApprovalRequest) -> str:
        return pretty_json(displayed_arguments(obj.call))

    @admin.display(description="Agent run")
    def run_link(self, obj: ApprovalRequest) -> str:
        run_id = obj.call.run_id
        if run_id is None:
            return "-"
        url = reverse("admin:agents_app_agentrun_change", args=[run_id])
        return format_html('<a href="{}">{}</a>', url, run_id)

    # --- deciding one request from its page -------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        custom = [
            path(
                f"<path:object_id>/{decision}/",
                self.admin_site.admin_view(require_POST(self._decision_view(decision))),
                name=f"{info[0]}_{info[1]}_{decision}",
            )
            for decision in DECISIONS
        ]
        return custom + super().get_urls()

    def _decision_view(self, decision: str) -> Callable[[HttpRequest, str], HttpResponse]:
        def view(request: HttpRequest, object_id: str) -> HttpResponse:
            return self.decide_view(request, object_id, decision)

        return view

    def decide_view(self, request: HttpRequest, object_id: str, decision: str) -> HttpResponse:
        """Take one decision posted from the change page and go back to it."""
        if not self.has_decide_permission(request):
            raise PermissionDenied
        obj = self.get_object(request, object_id)
        if obj is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        _, done, service = DECISIONS[decision]
        form = DecisionForm(request.POST)
        if not form.is_valid():
            self.message_user(request, f"Nothing was {done}: {form.errors.as_text()}", level=messages.ERROR)
        else:
            try:
                result = service(request_id=obj.pk, user=request.user, comment=form.cleaned_data["comment"])
            except NotInTenantError:
                # The request left the user's tenants since the page was read: answer as for a missing one.
                return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
            except ApprovalError as exc:
                self.message_user(request, f"Could not {decision} request #{obj.pk}: {exc}", level=messages.ERROR)
            else:
                self.message_user(request, _outcome(result, done), level=messages.SUCCESS)
        change_url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[obj.pk])
        return HttpResponseRedirect(change_url)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: ApprovalRequest | None = None,
    ) -> HttpResponse:
        can_decide = obj is not None and obj.status == ApprovalStatus.PENDING and self.has_decide_permission(request)
        context["can_decide"] = can_decide
        if can_decide:
            # Shown as a warning only: the service has the final word when the button is pressed.
            try:
                context["decision_refusal"] = approval_may_decide(obj, request.user)
            except NotInTenantError as exc:
                context["decision_refusal"] = str(exc)
            context["decision_form"] = DecisionForm()
            context["decision_urls"] = {
                decision: reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_{decision}", args=[obj.pk])
                for decision in DECISIONS
            }
        return super().render_change_form(request, context, add, change, form_url, obj)

    # --- deciding several requests from the list --------------------------------------------

    @admin.action(description="Approve selected requests", permissions=["decide"])
    def approve_selected(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]) -> HttpResponse | None:
        return self._decide_selected(request, queryset, "approve")

    @admin.action(description="Reject selected requests", permissions=["decide"])
    def reject_selected(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]) -> HttpResponse | None:
        return self._decide_selected(request, queryset, "reject")

    def _decide_selected(
        self, request: HttpRequest, queryset: QuerySet[ApprovalRequest], decision: str
    ) -> HttpResponse | None:
        """Ask for a comment on an intermediate page, then decide each request through the service."""
        label, done, service = DECISIONS[decision]
        requests = list(queryset.order_by("pk"))
        form = DecisionForm(request.POST if "apply" in request.POST else None)
        if not form.is_valid():
            context = {
                **self.admin_site.each_context(request),
                "title": f"{label} the selected approval requests",
                "opts": self.opts,
                "requests": requests,
                "form": form,
                "action": f"{decision}_selected",
                "label": label,
                "action_checkbox_name": ACTION_CHECKBOX_NAME,
            }
            request.current_app = self.admin_site.name
            return TemplateResponse(request, "admin/approvals/approvalrequest/decide_selected.html", context)

        comment = form.cleaned_data["comment"]
        succeeded = 0
        failures: list[str] = []
        for item in requests:
            try:
                service(request_id=item.pk, user=request.user, comment=comment)
            except NotInTenantError as exc:
                failures.append(f"#{item.pk}: {exc}")
            except ApprovalError as exc:
                failures.append(f"#{item.pk} ({item.tool_name}): {exc}")
            else:
                succeeded += 1
        if succeeded:
            self.message_user(request, f"{succeeded} request(s) {done}.", level=messages.SUCCESS)
        if failures:
            self.message_user(
                request,
                f"{len(failures)} request(s) could not be {done}: " + "; ".join(failures),
                level=messages.ERROR,
            )
        return None


@admin.register(ApprovalRule)
class ApprovalRuleAdmin(TenantScopedAdmin, admin.ModelAdmin):
    """Operators' approval rules, evaluated by priority after the code's own rule.

    Tenant-scoped staff manage the rules of their tenants and read the global ones (bound to no
    tenant, they apply to every tenant), which only people who cross the boundary change.
    """

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

    @admin.display(description="Condition")
    def condition(self, obj: ApprovalRule) -> str:
        if not obj.argument:
            return "-"
        return f"{obj.argument} {obj.operator} {json.dumps(obj.value)}"


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(TenantScopedAdmin, ReadOnlyMixin, admin.ModelAdmin):
    """Notifications sent to the configured webhook; delivered and retried by workers, so read-only here.

    Each payload names the tenant of its request: staff see their tenants' deliveries only.
    """

    tenant_field = "payload__tenant"

    list_display = ("id", "event", "status", "attempts", "next_attempt_at", "delivered_at", "created_at")
    list_filter = ("status", "event")
    show_full_result_count = False
    fields = ("event", "status", "attempts", "next_attempt_at", "delivered_at", "last_error", "shown_payload")
    readonly_fields = fields

    @admin.display(description="Payload")
    def shown_payload(self, obj: WebhookDelivery) -> str:
        return pretty_json(obj.payload)


def _outcome(request: ApprovalRequest, done: str) -> str:
    """Say what the decision did; a critical call may still wait for a second approver."""
    if request.status == ApprovalStatus.PENDING:
        remaining = request.required_approvals - request.decisions.exclude(decision=DecisionKind.REJECT).count()
        return f"Your approval of request #{request.pk} was recorded; it needs {remaining} more approver(s)."
    return f"Request #{request.pk} ({request.tool_name}) was {done}."
