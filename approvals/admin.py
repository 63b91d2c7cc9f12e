"""The operators' approval desk: read a held-back call, then approve or reject it through the services."""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince, timeuntil

from approvals.admin_decisions import DecisionViewsMixin
from approvals.deciders import DECIDE_PERMISSION, approvals_in_round, asker_names
from approvals.governing import required_approvals_now
from approvals.models import (
    ApprovalDecision,
    ApprovalRequest,
    ApprovalStatus,
)
from approvals.selectors import ConversationBefore, approval_progress, conversation_before, pending_count
from approvals.versions import shown_arguments, shown_diff, shown_original_arguments
from toolhub.admin_actions import CommentActionMixin
from toolhub.admin_helpers import ReadOnlyMixin, TenantScopedAdmin, pretty_json
from toolhub.admin_lists import ExactSearchMixin, TenantFilter
from toolhub.admin_tables import short_id

#: Seconds between two refreshes of the queue in the browser (queue-refresh.js).
QUEUE_REFRESH_SECONDS = 15


class StatusFilter(admin.SimpleListFilter):
    """The desk opens on the pending requests; "All" is a choice of its own, not the filter's absence."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [*ApprovalStatus.choices, ("all", "All")]

    def value(self) -> str:
        return super().value() or ApprovalStatus.PENDING

    def queryset(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]) -> QuerySet[ApprovalRequest]:
        if self.value() == "all":
            return queryset
        return queryset.filter(status=self.value())

    def choices(self, changelist: Any) -> Any:
        for lookup, title in self.lookup_choices:
            yield {
                "selected": self.value() == str(lookup),
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }


class ApprovalDecisionInline(ReadOnlyMixin, admin.TabularInline):
    """The decisions taken so far; they are records, so nobody edits them here."""

    model = ApprovalDecision
    extra = 0
    can_delete = False
    fields = ("round", "decision", "decided_by_name", "comment", "diff_shown", "version", "created_at")
    readonly_fields = fields
    verbose_name_plural = "Decisions so far"

    @admin.display(description="Changes (sensitive values redacted)")
    def diff_shown(self, obj: ApprovalDecision) -> str:
        return pretty_json(obj.diff) if obj.diff else "-"

    @admin.display(description="Version decided on")
    def version(self, obj: ApprovalDecision) -> str:
        return short_id(obj.arguments_hash)


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(
    ExactSearchMixin, DecisionViewsMixin, TenantScopedAdmin, ReadOnlyMixin, CommentActionMixin, admin.ModelAdmin
):
    """Pending and past approval requests of the user's tenants; deciding happens only through the approval services.

    The scoped queryset is what the change page, the decision views and the bulk actions act on, so
    another tenant's request is absent everywhere (its page answers like a missing id).
    """

    list_display = (
        "request_id",
        "risk_shown",
        "tool",
        "agent",
        "requested_by",
        "tenant",
        "age",
        "expires_in",
        "status",
    )
    list_display_links = ("request_id",)
    list_filter = (StatusFilter, TenantFilter, "risk", "tool_name", "source")
    search_fields = ("id",)  # draws the box; ExactSearchMixin matches exactly on indexes
    search_help_text = "The held call's id or the username of who asked (exact)."
    uuid_search_fields = ("call_id",)
    exact_search_fields = ("requested_by__username",)
    list_select_related = ("requested_by",)
    list_per_page = 50
    show_full_result_count = False
    inlines = (ApprovalDecisionInline,)
    actions = ("approve_selected", "reject_selected")
    fieldsets = (
        (None, {"fields": ("tool_name", "status", "risk", "reason", "source", "rule", "required_approvals", "round")}),
        (
            "The arguments under approval",
            {
                "fields": (
                    "arguments_to_run",
                    "arguments_diff",
                    "original_arguments_shown",
                    "approvals_so_far",
                    "still_to_approve",
                    "arguments_hash_short",
                )
            },
        ),
        ("Before the call", {"fields": ("user_input", "model_message")}),
        ("The call", {"fields": ("call_link", "call_status")}),
        ("Who asked", {"fields": ("requested_by", "asked_by", "agent_name", "tenant", "run_link")}),
        (
            "Who decides",
            {"fields": ("approver_group", "escalation_group", "escalate_at", "escalated_at"), "classes": ["collapse"]},
        ),
        ("When", {"fields": ("created_at", "expires_at", "decided_at")}),
    )
    readonly_fields = tuple(field for _, options in fieldsets for field in options["fields"])

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        """The queue is worked oldest first; decided requests are read newest first."""
        if request.GET.get(StatusFilter.parameter_name, ApprovalStatus.PENDING) == ApprovalStatus.PENDING:
            return ("created_at", "pk")
        return ("-created_at", "-pk")

    def get_list_display(self, request: HttpRequest) -> tuple[str, ...]:
        """The queue of pending requests has no status column (they all are); other views show it."""
        shown = tuple(super().get_list_display(request))
        if request.GET.get(StatusFilter.parameter_name, ApprovalStatus.PENDING) == ApprovalStatus.PENDING:
            return tuple(name for name in shown if name != "status")
        return shown

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        """The desk's title carries the number of pending requests of the user's tenants (also in the tab)."""
        count = pending_count(request.user)
        context = {
            "title": f"Approval desk: {count} pending",
            "pending_count": count,
            "refresh_seconds": QUEUE_REFRESH_SECONDS,
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context=context)

    @admin.display(description="Request", ordering="pk")
    def request_id(self, obj: ApprovalRequest) -> str:
        return f"#{obj.pk}"

    @admin.display(description="Risk", ordering="risk")
    def risk_shown(self, obj: ApprovalRequest) -> str:
        return format_html('<span class="toolhub-risk toolhub-risk-{}">{}</span>', obj.risk, obj.risk or "-")

    @admin.display(description="Age", ordering="created_at")
    def age(self, obj: ApprovalRequest) -> str:
        return format_html(
            '<span title="{}">{}</span>',
            obj.created_at.isoformat(timespec="seconds"),
            timesince(obj.created_at, depth=1),
        )

    @admin.display(description="Expires in", ordering="expires_at")
    def expires_in(self, obj: ApprovalRequest) -> str:
        if obj.status != ApprovalStatus.PENDING:
            return "-"
        when = obj.expires_at.isoformat(timespec="seconds")
        if obj.expires_at <= timezone.now():
            return format_html('<span class="toolhub-overdue" title="{}">overdue</span>', when)
        return format_html('<span title="{}">{}</span>', when, timeuntil(obj.expires_at, depth=1))

    @admin.display(description="Tool", ordering="tool_name")
    def tool(self, obj: ApprovalRequest) -> str:
        # Why it was held is on the request's page, and here on hover: the queue stays one line per request.
        return format_html('<span title="{}">{}</span>', obj.reason, obj.tool_name)

    @admin.display(description="Agent", ordering="agent_name")
    def agent(self, obj: ApprovalRequest) -> str:
        return obj.agent_name or "-"

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApprovalRequest]:
        return (
            super()
            .get_queryset(request)
            .select_related("call", "requested_by", "rule", "approver_group", "escalation_group")
            .prefetch_related("askers")
        )

    def has_decide_permission(self, request: HttpRequest) -> bool:
        """Whether the user may see the decision buttons and actions; the services check again."""
        return request.user.has_perm(DECIDE_PERMISSION)

    @admin.display(description="Tool call")
    def call_link(self, obj: ApprovalRequest) -> str:
        url = reverse("admin:toolhub_toolcall_change", args=[obj.call_id])
        return format_html('<a href="{}">{}</a>', url, short_id(obj.call_id))

    @admin.display(description="Binding of this version (arguments hash)")
    def arguments_hash_short(self, obj: ApprovalRequest) -> str:
        return short_id(obj.arguments_hash)

    @admin.display(description="Still to approve")
    def still_to_approve(self, obj: ApprovalRequest) -> str:
        progress = approval_progress(obj)
        if obj.status != ApprovalStatus.PENDING:
            return f"Nothing: the request is {obj.status}."
        given = ", ".join(progress.given_by) or "nobody yet"
        who = ", ".join(progress.may_approve) or "nobody who can decide it is available"
        if not progress.remaining:
            # Standing came back: the approvals reach the quorum, and an approver's confirmation releases the call.
            return format_html(
                "No more approvals needed: the approvals of this round stand ({}). May still approve: {} (approving "
                "again confirms their approval and releases the call).",
                given,
                who,
            )
        group = f" (approver group: {progress.group})" if progress.group else ""
        return format_html(
            "{} more approval(s) needed{}. Approved in this round by: {}. May still approve: {}.",
            progress.remaining,
            group,
            given,
            who,
        )

    @staticmethod
    def _before(obj: ApprovalRequest) -> ConversationBefore:
        """The conversation before the call, read once per page (two fields show it)."""
        if not hasattr(obj, "_conversation_before"):
            obj._conversation_before = conversation_before(obj)  # type: ignore[attr-defined]
        return obj._conversation_before  # type: ignore[attr-defined]

    @admin.display(description="The user's input")
    def user_input(self, obj: ApprovalRequest) -> str:
        before = self._before(obj)
        if not before.found:
            return "Not from an agent run."
        return format_html('<div class="toolhub-text">{}</div>', before.user_input or "-")

    @admin.display(description="What the model said with the call")
    def model_message(self, obj: ApprovalRequest) -> str:
        before = self._before(obj)
        if not before.found:
            return "-"
        return format_html(
            '<div class="toolhub-text">{}</div>', before.model_message or "(nothing: the model only called the tool)"
        )

    @admin.display(description="Call status")
    def call_status(self, obj: ApprovalRequest) -> str:
        return obj.call.status

    @admin.display(description="Arguments that will run (sensitive values redacted)")
    def arguments_to_run(self, obj: ApprovalRequest) -> str:
        # Not named after the model field: the admin would show that field's raw value, secrets included.
        return pretty_json(shown_arguments(obj))

    @admin.display(description="Changed from the model's original")
    def arguments_diff(self, obj: ApprovalRequest) -> str:
        diff = shown_diff(obj)
        return pretty_json(diff) if diff else "Not edited: these are the model's own arguments."

    @admin.display(description="The model's original arguments")
    def original_arguments_shown(self, obj: ApprovalRequest) -> str:
        return pretty_json(shown_original_arguments(obj))

    @admin.display(description="Approvals in this round")
    def approvals_so_far(self, obj: ApprovalRequest) -> str:
        return f"Round {obj.round}: {approvals_in_round(obj)} of {required_approvals_now(obj)} approval(s)"

    @admin.display(description="Asked by")
    def asked_by(self, obj: ApprovalRequest) -> str:
        """Everyone who asked for the call in its user's name (who retried its run, a compensation's), barred."""
        return ", ".join(asker_names(obj)) or "-"

    @admin.display(description="Agent run")
    def run_link(self, obj: ApprovalRequest) -> str:
        run_id = obj.call.run_id
        if run_id is None:
            return "-"
        url = reverse("admin:agents_app_agentrun_change", args=[run_id])
        return format_html('<a href="{}">{}</a>', url, short_id(run_id))


# The rules' and the webhook deliveries' pages (platform and tenant configuration, not the desk).
from approvals import admin_config  # noqa: E402, F401
