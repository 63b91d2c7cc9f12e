"""The approval desk's decisions: one request from its page, or several from the list, through the services.

Every decision counts against the user's ``decisions`` rate (shared with the API), is bound to the version
the operator saw (round and arguments hash, and the tool's definition that showed it: ``fields_version``), and is
refused, with nothing recorded, when that changed.
"""

import json
import math
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.views.decorators.http import require_POST

from approvals.deciders import approval_may_decide, approvals_in_round, asker_names
from approvals.forms import (
    DEFINITION_CHANGED,
    ApproveForm,
    CommentForm,
    DecisionForm,
    shown_fields_version,
)
from approvals.governing import required_approvals_now
from approvals.models import ApprovalRequest, ApprovalStatus, DecisionKind
from approvals.services import approval_approve, approval_reject
from approvals.versions import shown_arguments
from toolhub.admin_actions import CommentActionPage
from toolhub.admin_helpers import pretty_json
from toolhub.admin_marks import row_bindings, row_mark
from toolhub.admin_tables import admin_table
from toolhub.api.throttling import throttle_wait
from toolhub.exceptions import ApprovalError, EditedArgumentsError, NotInTenantError
from toolhub.execution_checks import unbuildable_problem
from toolhub.selectors import withheld_names
from toolhub.tools.registry import registry

__all__ = ["DECISIONS", "DecisionViewsMixin"]

Decide = Callable[..., ApprovalRequest]

#: Why a selected request the confirmed page did not list (with its version) is not approved.
NOT_LISTED = "it was not listed on the page you confirmed; nothing was recorded. Select it again."

#: What each decision is called on buttons and in messages, and the service that takes it.
DECISIONS: dict[str, tuple[str, str, Decide]] = {
    "approve": ("Approve", "approved", approval_approve),
    "reject": ("Reject", "rejected", approval_reject),
}


class DecisionViewsMixin:
    """For the approval requests' admin: its decide views, its change page's decision form, its list actions."""

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
            if "fields_version" in form.errors:
                # The page is stale as a whole: the operator reads it again as it stands, not with their input.
                problem = form.errors["fields_version"][0]
                self.message_user(request, f"Could not {decision} request #{obj.pk}: {problem}", level=messages.ERROR)
                return HttpResponseRedirect(change_url)
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
                context["decision_refusal"] = approval_may_decide(obj, request.user) or unbuildable_problem(
                    registry.get(obj.tool_name)
                )
            except NotInTenantError as exc:
                context["decision_refusal"] = str(exc)
            context.setdefault(
                "decision_form",
                ApproveForm(initial=_version_shown(obj), tool_name=obj.tool_name, current=_editable(obj)),
            )
            approved = (
                obj.decisions.filter(decided_by=request.user, round=obj.round)
                .exclude(decision=DecisionKind.REJECT)
                .exists()
            )
            # Once the approvals standing reach the quorum, approving again confirms and releases (services._approval).
            confirms = approved and approvals_in_round(obj) >= required_approvals_now(obj)
            context["approved_this_round"] = approved and not confirms
            context["confirmation_releases"] = confirms
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
        # each row's arguments are shown as its call's tool version withholds them: the call comes with it
        requests = list(queryset.order_by("pk").select_related("call").prefetch_related("decisions", "askers"))
        table = admin_table(
            "selected-requests",
            ("#", "Tool", "Status", "Risk", "Reason", "Requested by", "Asked by", "Tenant", "Arguments that will run"),
            (
                (
                    item.pk,
                    item.tool_name,
                    item.status,
                    item.risk,
                    item.reason,
                    item.requested_by or "-",
                    # who asked in the user's name (barred from deciding), as the desk's "Who asked" names them
                    ", ".join(asker_names(item)) or "-",
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
            "arguments or tool change before you confirm, are reported and left as they are.",
            table=table,
            submit=f"{label} {len(requests)} request(s)",
            # Each approval is bound to the version listed on this page, and to the tool's definition it was shown by.
            marks=(row_mark(item.pk, item.arguments_hash, shown_fields_version(item.tool_name)) for item in requests),
        )
        form, confirmation = self.comment_form_or_page(
            request, CommentForm, action=f"{decision}_selected", selected=requests, page=page
        )
        if form is None:
            return confirmation
        comment = form.cleaned_data["comment"]
        succeeded = 0
        # Approvals recorded on requests that still need another approver: said apart, never counted as approved.
        recorded: list[str] = []
        failures: list[str] = []
        shown = row_bindings(request, parts=2)
        for item in requests:
            arguments_hash, fields_version = shown.get(str(item.pk), (None, None))
            if decision == "approve" and arguments_hash is None:
                # Not (or not plainly) on the page confirmed: approving it would approve what nobody was shown.
                failures.append(f"#{item.pk} ({item.tool_name}): {NOT_LISTED}")
                continue
            if decision == "approve" and fields_version != shown_fields_version(item.tool_name):
                # Listed under another definition of its tool (or under none, while it has one): approving it would
                # not approve what was shown. The page always names it, so an empty one is compared, not skipped.
                failures.append(f"#{item.pk} ({item.tool_name}): {DEFINITION_CHANGED}")
                continue
            # Each decision counts against the rate, as one through the API would; the rest wait.
            if (refusal := _over_the_rate(request)) is not None:
                failures.append(f"#{item.pk} and the requests after it were not decided: {refusal}")
                break
            options: dict[str, Any] = {"comment": comment}
            if decision == "approve":
                # Each approval is bound to the version listed on the confirmation page, as listed: an empty hash
                # matches only a request without one (``None`` would bind it to nothing).
                options["expected_arguments_hash"] = arguments_hash
            try:
                result = service(request_id=item.pk, user=request.user, **options)
            except NotInTenantError as exc:
                failures.append(f"#{item.pk}: {exc}")
            except ApprovalError as exc:
                failures.append(f"#{item.pk} ({item.tool_name}): {exc}")
            else:
                if result.status == ApprovalStatus.PENDING:
                    recorded.append(_outcome(result, done))
                else:
                    succeeded += 1
        if succeeded:
            self.message_user(request, f"{succeeded} request(s) {done}.", level=messages.SUCCESS)
        if recorded:
            self.message_user(request, " ".join(recorded), level=messages.WARNING)
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
        remaining = required_approvals_now(request) - approvals_in_round(request)
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
        "fields_version": shown_fields_version(request.tool_name),
        "arguments": json.dumps(_editable(request), indent=2, sort_keys=True, ensure_ascii=False),
    }
