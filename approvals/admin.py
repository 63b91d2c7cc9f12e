"""The operators' approval desk: read a held-back call, then approve or reject it through the services."""

import json
import math
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince, timeuntil
from django.views.decorators.http import require_POST

from approvals.forms import ApproveForm, CommentForm, DecisionForm
from approvals.models import (
    ApprovalDecision,
    ApprovalRequest,
    ApprovalStatus,
    DecisionKind,
)
from approvals.selectors import ConversationBefore, approval_progress, conversation_before, pending_count
from approvals.services import DECIDE_PERMISSION, approval_approve, approval_may_decide, approval_reject
from approvals.versions import approvals_in_round, shown_arguments, shown_diff, shown_original_arguments
from toolhub.admin_actions import CommentActionMixin, CommentActionPage
from toolhub.admin_helpers import ReadOnlyMixin, TenantScopedAdmin, pretty_json
from toolhub.admin_tables import admin_table, short_id
from toolhub.api.throttling import throttle_wait
from toolhub.exceptions import ApprovalError, EditedArgumentsError, NotInTenantError
from toolhub.selectors import withheld_names

Decide = Callable[..., ApprovalRequest]

#: What each decision is called on buttons and in messages, and the service that takes it.
DECISIONS: dict[str, tuple[str, str, Decide]] = {
    "approve": ("Approve", "approved", approval_approve),
    "reject": ("Reject", "rejected", approval_reject),
}

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
class ApprovalRequestAdmin(TenantScopedAdmin, ReadOnlyMixin, CommentActionMixin, admin.ModelAdmin):
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
    list_filter = (StatusFilter, "risk", "tool_name", "source")
    search_fields = ("tool_name", "reason", "agent_name", "tenant", "requested_by__username")
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
        ("Who asked", {"fields": ("requested_by", "agent_name", "tenant", "run_link")}),
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
        return f"Round {obj.round}: {approvals_in_round(obj)} of {obj.required_approvals} approval(s)"

    @admin.display(description="Agent run")
    def run_link(self, obj: ApprovalRequest) -> str:
        run_id = obj.call.run_id
        if run_id is None:
            return "-"
        url = reverse("admin:agents_app_agentrun_change", args=[run_id])
        return format_html('<a href="{}">{}</a>', url, short_id(run_id))

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
        """Take one decision posted from the change page and go back to it (with the form's errors, if any)."""
        if not self.has_decide_permission(request):
            raise PermissionDenied
        obj = self.get_object(request, object_id)
        if obj is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        _, done, service = DECISIONS[decision]
        change_url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[obj.pk])
        if (refusal := _over_the_rate(request)) is not None:
            self.message_user(request, f"Nothing was recorded: {refusal}", level=messages.ERROR)
            return HttpResponseRedirect(change_url)
        form = (
            ApproveForm(request.POST, tool_name=obj.tool_name, current=_editable(obj))
            if decision == "approve"
            else DecisionForm(request.POST)
        )
        if not form.is_valid():
            return self._change_page_with_errors(request, object_id, form)
        options: dict[str, Any] = {"comment": form.cleaned_data["comment"]}
        if decision == "approve":
            options.update(
                arguments=form.cleaned_data["edit"],
                expected_round=form.cleaned_data["round"],
                expected_arguments_hash=form.cleaned_data["arguments_hash"] or None,
            )
        try:
            result = service(request_id=obj.pk, user=request.user, **options)
        except NotInTenantError:
            # The request left the user's tenants since the page was read: answer as for a missing one.
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        except EditedArgumentsError as exc:
            form.add_error("arguments", str(exc))
            return self._change_page_with_errors(request, object_id, form)
        except ApprovalError as exc:
            self.message_user(request, f"Could not {decision} request #{obj.pk}: {exc}", level=messages.ERROR)
        else:
            self.message_user(request, _outcome(result, done), level=messages.SUCCESS)
        return HttpResponseRedirect(change_url)

    def _change_page_with_errors(self, request: HttpRequest, object_id: str, form: DecisionForm) -> HttpResponse:
        """Show the change page again with the operator's input and what was wrong with it; nothing was recorded."""
        self.message_user(request, "Nothing was recorded: correct the errors below.", level=messages.ERROR)
        # The page itself is read-only: render it as for a GET, with the bound decision form.
        request.method = "GET"
        return self.change_view(request, object_id, extra_context={"decision_form": form})

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
            context.setdefault(
                "decision_form",
                ApproveForm(initial=_version_shown(obj), tool_name=obj.tool_name, current=_editable(obj)),
            )
            context["approved_this_round"] = (
                obj.decisions.filter(decided_by=request.user, round=obj.round)
                .exclude(decision=DecisionKind.REJECT)
                .exists()
            )
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
        """Ask for one comment on an intermediate page, then decide each request through the service."""
        label, done, service = DECISIONS[decision]
        requests = list(queryset.order_by("pk").prefetch_related("decisions"))
        table = admin_table(
            "selected-requests",
            ("#", "Tool", "Status", "Risk", "Reason", "Requested by", "Tenant", "Arguments that will run"),
            (
                (
                    item.pk,
                    item.tool_name,
                    item.status,
                    item.risk,
                    item.reason,
                    item.requested_by or "-",
                    item.tenant,
                    pretty_json(shown_arguments(item)),
                )
                for item in requests
            ),
        )
        page = CommentActionPage(
            title=f"{label} the selected approval requests",
            intro=f"You are about to {label.lower()} these {len(requests)} request(s). Each is decided on its own: "
            "requests that are no longer pending, that you may not decide (for example your own), or whose "
            "arguments change before you confirm, are reported and left as they are.",
            table=table,
            submit=f"{label} {len(requests)} request(s)",
            # Each approval is bound to the version listed on this page.
            hidden={f"arguments_hash_{item.pk}": item.arguments_hash for item in requests},
        )
        form, confirmation = self.comment_form_or_page(
            request, CommentForm, action=f"{decision}_selected", selected=requests, page=page
        )
        if form is None:
            return confirmation
        comment = form.cleaned_data["comment"]
        succeeded = 0
        failures: list[str] = []
        for item in requests:
            # Each decision counts against the rate, as one through the API would; the rest wait.
            if (refusal := _over_the_rate(request)) is not None:
                failures.append(f"#{item.pk} and the requests after it were not decided: {refusal}")
                break
            options: dict[str, Any] = {"comment": comment}
            if decision == "approve":
                # Each approval is bound to the version listed on the confirmation page.
                options["expected_arguments_hash"] = request.POST.get(f"arguments_hash_{item.pk}") or None
            try:
                service(request_id=item.pk, user=request.user, **options)
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


def _over_the_rate(request: HttpRequest) -> str | None:
    """Count one decision against the user's ``decisions`` rate (shared with the API); why not, when over it."""
    wait = throttle_wait(request, "decisions")
    if wait is None:
        return None
    return f"you are deciding too fast; try again in {math.ceil(wait)} second(s)."


def _outcome(request: ApprovalRequest, done: str) -> str:
    """Say what the decision did; a critical or edited call may still wait for more approvers."""
    if request.status == ApprovalStatus.PENDING:
        remaining = request.required_approvals - approvals_in_round(request)
        return (
            f"Your approval of request #{request.pk} was recorded (round {request.round}); "
            f"it needs {remaining} more approver(s)."
        )
    return f"Request #{request.pk} ({request.tool_name}) was {done}."


def _editable(request: ApprovalRequest) -> dict[str, Any]:
    """The version under approval without its sensitive values (never sent to the browser)."""
    arguments = request.arguments or {}
    withheld = withheld_names(request.tool_name, arguments, version=request.call.tool_version)
    return {key: value for key, value in arguments.items() if key not in withheld}


def _version_shown(request: ApprovalRequest) -> dict[str, Any]:
    """The decision form's initial values: the version on the page, its editable (non-sensitive) arguments."""
    return {
        "round": request.round,
        "arguments_hash": request.arguments_hash,
        "arguments": json.dumps(_editable(request), indent=2, sort_keys=True, ensure_ascii=False),
    }


# The rules' and the webhook deliveries' pages (platform and tenant configuration, not the desk).
from approvals import admin_config  # noqa: E402, F401
