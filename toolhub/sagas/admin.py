"""The operators' view of sagas: steps, compensations, attempts and errors, with retry and resolve-by-hand."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from toolhub.admin_actions import CommentActionMixin, CommentActionPage
from toolhub.admin_helpers import ReadOnlyMixin, TenantScopedAdmin, admin_link, pretty_json
from toolhub.admin_lists import ExactSearchMixin
from toolhub.admin_marks import page_seen, seen_field
from toolhub.admin_tables import admin_table, short_id, time_cell
from toolhub.audit import redact
from toolhub.exceptions import InvalidTransitionError
from toolhub.sagas.admin_trail import trail_html, trail_page
from toolhub.sagas.models import (
    ATTENTION_COMPENSATION_STATUSES,
    Compensation,
    CompensationAttempt,
    Rollback,
    Saga,
    SagaStatus,
)
from toolhub.sagas.recovery import (
    StaleRetryError,
    compensation_mark,
    compensations_resolve,
    compensations_retry,
    retry_marks,
    saga_retry,
)
from toolhub.sagas.selectors import OPERATE_PERMISSION, call_summary
from toolhub.selectors import withheld_names


def _call_link(call_id: Any) -> str:
    return admin_link("admin:toolhub_toolcall_change", call_id, short_id(call_id)) if call_id else "-"


class ResolveForm(forms.Form):
    """What the operator did (or why nothing needs doing); recorded in the audit trail."""

    note = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60, "placeholder": "e.g. refunded by hand in the bank UI"}),
        help_text="Recorded in the audit trail with your name.",
    )


class NeedsAttentionFilter(admin.SimpleListFilter):
    """Sagas where a compensation failed, its outcome is unknown, or a step waits for an operator's decision."""

    title = "needs attention"
    parameter_name = "attention"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Needs attention"), ("no", "Does not")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        field = "status" if queryset.model is Saga else "saga__status"
        if self.value() == "yes":
            return queryset.filter(**{field: SagaStatus.NEEDS_ATTENTION})
        if self.value() == "no":
            return queryset.exclude(**{field: SagaStatus.NEEDS_ATTENTION})
        return queryset


class _OperatorActions(CommentActionMixin):
    """Retry and resolve-by-hand, shared by the saga and compensation lists; both call the services."""

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(OPERATE_PERMISSION)

    #: Whether "Resolve by hand" takes only the compensations needing attention (a saga's) or every selected one.
    resolve_attention_only: bool

    def _scope_of(self, queryset: QuerySet[Any]) -> QuerySet[Compensation]:
        """Every compensation of the selected rows (read again at each request: the page is what binds them)."""
        raise NotImplementedError

    def _retry(self, request: HttpRequest, queryset: QuerySet[Any], action: str) -> HttpResponse | None:
        """List what needs attention with each row's mark; once confirmed, retry exactly that or nothing."""
        scope = self._scope_of(queryset)
        chosen = list(
            scope.filter(status__in=ATTENTION_COMPENSATION_STATUSES)
            .select_related("saga")
            .order_by("saga_id", "-sequence")
        )
        if not chosen and "apply" not in request.POST:
            self.message_user(request, "Nothing to do: no compensation needs attention.", messages.WARNING)  # type: ignore[attr-defined]
            return None
        table = _compensations_table(chosen)
        page = CommentActionPage(
            title="Retry compensations",
            intro=f"These {len(chosen)} compensation(s) will run again, each with a fresh round of attempts. If any "
            "of them (or of the selected rows' compensations needing attention) changes before you confirm, nothing "
            "is retried.",
            table=table,
            submit=f"Retry {len(chosen)} compensation(s)",
            # What the page shows, row by row: the retry is bound to it (``compensations_retry(seen=...)``).
            seen=(compensation_mark(c) for c in chosen),
        )
        form, confirmation = self.comment_form_or_page(  # type: ignore[attr-defined]
            request, forms.Form, action=action, selected=queryset, page=page
        )
        if form is None:
            return confirmation
        actor = f"user:{request.user.get_username()}"
        try:
            retried = compensations_retry(scope=scope, actor=actor, seen=page_seen(request), by=request.user)
        except InvalidTransitionError as exc:  # StaleRetryError included: all or nothing
            self.message_user(request, str(exc), messages.ERROR)  # type: ignore[attr-defined]
            return None
        if retried:
            self.message_user(request, f"{retried} compensation(s) retried.", messages.SUCCESS)  # type: ignore[attr-defined]
        else:
            self.message_user(request, "Nothing to do: no compensation needs attention.", messages.WARNING)  # type: ignore[attr-defined]
        return None

    def _resolve(self, request: HttpRequest, queryset: QuerySet[Any], action: str) -> HttpResponse | None:
        """Ask for a note on a page listing each compensation with its mark; once confirmed, resolve exactly those."""
        scope = self._scope_of(queryset)
        if self.resolve_attention_only:
            scope = scope.filter(status__in=ATTENTION_COMPENSATION_STATUSES)
        chosen = list(scope.select_related("saga").order_by("saga_id", "-sequence"))
        table = _compensations_table(chosen)
        page = CommentActionPage(
            title="Resolve compensations by hand",
            intro=f"These {len(chosen)} compensation(s) will be marked resolved by hand: toolhub will not run them "
            "(again). Say what you did, or why nothing needs doing. If any of them changes before you confirm, "
            "nothing is resolved.",
            table=table,
            submit=f"Resolve {len(chosen)} compensation(s)",
            seen=(compensation_mark(c) for c in chosen),
        )
        form, confirmation = self.comment_form_or_page(  # type: ignore[attr-defined]
            request, ResolveForm, action=action, selected=queryset, page=page
        )
        if form is None:
            return confirmation
        try:
            resolved, refusals = compensations_resolve(
                scope=scope,
                actor=f"user:{request.user.get_username()}",
                note=form.cleaned_data["note"],
                by=request.user,
                seen=page_seen(request),
            )
        except StaleRetryError as exc:
            self.message_user(request, str(exc), messages.ERROR)  # type: ignore[attr-defined]
            return None
        if not chosen and not resolved and not refusals:
            self.message_user(request, "Nothing to do: no compensation needs attention.", messages.WARNING)  # type: ignore[attr-defined]
        if resolved:
            self.message_user(request, f"{resolved} compensation(s) resolved.", messages.SUCCESS)  # type: ignore[attr-defined]
        if refusals:
            self.message_user(request, " ".join(refusals), messages.ERROR)  # type: ignore[attr-defined]
        return None


def _compensations_table(chosen: list[Compensation]) -> str:
    """The rows a confirmation page acts on, as its marks bind them: status, attempts and last change."""
    return admin_table(
        "selected-compensations",
        ("Saga", "Step #", "Step", "Compensation", "Status", "Attempts", "Last error", "Last change"),
        (
            (
                short_id(c.saga.key),
                c.sequence,
                c.step_tool,
                c.tool_name,
                c.status,
                f"{c.attempts} / {c.max_attempts}",
                c.last_error or "-",
                time_cell(c.updated_at),
            )
            for c in chosen
        ),
        empty="None of the selected rows has a compensation that needs attention.",
    )


class CompensationInline(ReadOnlyMixin, admin.TabularInline):
    model = Compensation
    fk_name = "saga"
    extra = 0
    can_delete = False
    ordering = ("-sequence",)
    fields = (
        "sequence",
        "step",
        "tool_name",
        "compensation_call",
        "status",
        "attempts_shown",
        "next_attempt_at",
        "last_error",
        "resolution",
    )
    readonly_fields = fields
    show_change_link = True

    def get_queryset(self, request: HttpRequest) -> QuerySet[Compensation]:
        # Each row shows its step's call: read with the rows, not one query per row.
        return super().get_queryset(request).select_related("step_call")

    @admin.display(description="Step (arguments redacted)")
    def step(self, obj: Compensation) -> str:
        return format_html("{}<br>{}", call_summary(obj.step_call), _call_link(obj.step_call_id))

    @admin.display(description="Compensation call")
    def compensation_call(self, obj: Compensation) -> str:
        return _call_link(obj.call_id)

    @admin.display(description="Attempts")
    def attempts_shown(self, obj: Compensation) -> str:
        return f"{obj.attempts} / {obj.max_attempts}"

    @admin.display(description="Resolved")
    def resolution(self, obj: Compensation) -> str:
        return f"{obj.resolved_by}: {obj.resolution_note}" if obj.resolved_by else "-"


class RollbackInline(ReadOnlyMixin, admin.TabularInline):
    model = Rollback
    extra = 0
    can_delete = False
    fields = ("trigger", "failed_step", "held_for_operator", "requested_by", "requested_at", "finished_at", "told_at")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Rollback]:
        # Each row names its saga (its title) and its failed step: read with the rows, not one query per row.
        return super().get_queryset(request).select_related("saga", "failed_call")

    @admin.display(description="Failed step")
    def failed_step(self, obj: Rollback) -> str:
        if obj.failed_call_id is None:
            return "-"
        failed = obj.failed_call
        return format_html("{} ({})<br>{}", failed.tool_name, failed.error, _call_link(obj.failed_call_id))


@admin.register(Saga)
class SagaAdmin(ExactSearchMixin, TenantScopedAdmin, ReadOnlyMixin, _OperatorActions, admin.ModelAdmin):
    """Sagas of the user's tenants for operators: what was done, what was undone, what failed and what needs a decision.

    Retry and resolve act only on the compensations of the selected, tenant-scoped sagas.
    """

    list_display = ("saga_key", "status", "tenant", "run", "steps", "updated_at")
    list_display_links = ("saga_key",)
    list_filter = (NeedsAttentionFilter, "status", "tenant")
    search_fields = ("key",)  # draws the box; ExactSearchMixin matches exactly on indexes
    search_help_text = "A saga's key (a run id or the caller's saga id), exact."
    exact_search_fields = ("key",)
    show_full_result_count = False
    ordering = ("-updated_at",)
    actions = ("retry_selected", "resolve_selected")
    resolve_attention_only = True
    fields = ("key", "status", "tenant", "run", "created_at", "updated_at", "attempts", "audit_events")
    readonly_fields = fields
    inlines = (CompensationInline, RollbackInline)

    def get_urls(self) -> list[URLPattern]:
        retry = path(
            "<path:object_id>/retry/",
            self.admin_site.admin_view(require_POST(self.retry_view)),
            name="sagas_saga_retry",
        )
        trail = path(
            "<path:object_id>/audit-events/",
            self.admin_site.admin_view(self.audit_events_view),
            name="sagas_saga_audit_events",
        )
        return [retry, trail, *super().get_urls()]

    def retry_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Retry, from the saga's own page, the compensations needing attention it showed; then back to the page."""
        if not self.has_operate_permission(request):
            raise PermissionDenied
        saga = self.get_object(request, object_id)  # tenant-scoped: another tenant's saga is absent
        if saga is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        actor = f"user:{request.user.get_username()}"
        try:
            # Bound to what the page showed (its marks): a state that moved since is refused, nothing retried.
            retried = saga_retry(saga=saga, actor=actor, seen=page_seen(request), by=request.user)
        except StaleRetryError as exc:
            self.message_user(request, str(exc), messages.ERROR)
        else:
            if retried:
                self.message_user(request, f"{retried} compensation(s) retried.", messages.SUCCESS)
            else:
                self.message_user(request, "Nothing to do: no compensation needs attention.", messages.WARNING)
        return HttpResponseRedirect(reverse("admin:sagas_saga_change", args=[saga.pk]))

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Saga | None = None,
    ) -> HttpResponse:
        if obj is not None and self.has_operate_permission(request):
            marks = retry_marks(obj)
            context["retry_hidden"] = seen_field(marks)
            context["needing_attention"] = len(marks)
            context["retry_url"] = reverse("admin:sagas_saga_retry", args=[obj.pk])
        return super().render_change_form(request, context, add, change, form_url, obj)

    def _scope_of(self, queryset: QuerySet[Saga]) -> QuerySet[Compensation]:
        return Compensation.objects.filter(saga__in=queryset)

    @admin.action(description="Retry the compensations that need attention", permissions=["operate"])
    def retry_selected(self, request: HttpRequest, queryset: QuerySet[Saga]) -> HttpResponse | None:
        return self._retry(request, queryset, "retry_selected")

    @admin.action(description="Resolve by hand the compensations that need attention", permissions=["operate"])
    def resolve_selected(self, request: HttpRequest, queryset: QuerySet[Saga]) -> HttpResponse | None:
        return self._resolve(request, queryset, "resolve_selected")

    @admin.display(description="Saga", ordering="key")
    def saga_key(self, obj: Saga) -> str:
        # A run's saga is keyed by the run's id: shown short, whole on hover and when copied.
        return short_id(obj.key)

    @admin.display(description="Agent run")
    def run(self, obj: Saga) -> str:
        return admin_link("admin:agents_app_agentrun_change", obj.run_id, short_id(obj.run_id)) if obj.run_id else "-"

    @admin.display(description="Steps")
    def steps(self, obj: Saga) -> int:
        return obj.last_sequence

    @admin.display(description="Attempts of the compensations")
    def attempts(self, obj: Saga) -> str:
        rows = CompensationAttempt.objects.filter(compensation__saga=obj).select_related("compensation")
        return admin_table(
            "saga-attempts",
            ("Step #", "Compensation", "Attempt", "Outcome", "Error", "Worker", "Finished"),
            (
                (
                    a.compensation.sequence,
                    a.compensation.tool_name,
                    a.number,
                    a.outcome,
                    a.error or "-",
                    a.worker or "-",
                    time_cell(a.finished_at),
                )
                for a in rows.order_by("id")
            ),
        )

    @admin.display(description="Audit events")
    def audit_events(self, obj: Saga) -> str:
        return trail_html(obj, trail_page(obj))

    def audit_events_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The saga's trail past the page's first events, a page at a time (``?after=``: the last event read)."""
        saga = self.get_object(request, object_id)  # tenant-scoped: another tenant's saga is absent
        if saga is None or not self.has_view_permission(request, saga):
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "saga": saga,
            "title": f"Audit events of saga {saga.key}",
            "trail": trail_html(saga, trail_page(saga, request.GET.get("after"))),
        }
        return TemplateResponse(request, "admin/sagas/saga/audit_events.html", context)


class CompensationAttemptInline(ReadOnlyMixin, admin.TabularInline):
    model = CompensationAttempt
    extra = 0
    can_delete = False
    fields = ("number", "outcome", "error", "worker", "started_at", "finished_at")
    readonly_fields = fields


@admin.register(Compensation)
class CompensationAdmin(ExactSearchMixin, TenantScopedAdmin, ReadOnlyMixin, _OperatorActions, admin.ModelAdmin):
    """One compensation of the user's tenants: the step it undoes, its arguments, its call, every attempt and error."""

    tenant_field = "tenant"  # its saga's, copied: the list reads its tenant's rows on compensation_tenant_saga

    list_display = ("saga", "sequence", "step_tool", "tool_name", "status", "attempts", "next_attempt_at", "updated_at")
    list_filter = (NeedsAttentionFilter, "status", "tool_name")
    search_fields = ("saga__key",)  # draws the box; ExactSearchMixin matches exactly on indexes
    search_help_text = "Its saga's key, exact."
    exact_search_fields = ("saga__key",)
    # The page's sagas by their keys, in a second query: joined, the planner merge-joins the saga primary key from the
    # newest saga down and reads every newer saga of other tenants to meet the page's few.
    list_select_related = ()
    show_full_result_count = False
    # Grouped by saga, newest saga and step first, on the (saga, sequence) index: the model's ordering goes through
    # the saga's own (its ``created_at``), a join and a sort of every compensation of the viewer's tenants.
    ordering = ("-saga_id", "-sequence")
    actions = ("retry_selected", "resolve_selected")
    resolve_attention_only = False
    fields = (
        "saga",
        "sequence",
        "status",
        "step",
        "tool_name",
        "shown_arguments",
        "mapping_error",
        "compensation_call",
        "attempts",
        "max_attempts",
        "next_attempt_at",
        "last_error",
        "resolved_by",
        "retried_by",
        "resolution_note",
        "rollback",
        "created_at",
        "updated_at",
        "finished_at",
    )
    readonly_fields = fields
    inlines = (CompensationAttemptInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Compensation]:
        return super().get_queryset(request).prefetch_related("saga")

    def _scope_of(self, queryset: QuerySet[Compensation]) -> QuerySet[Compensation]:
        return Compensation.objects.filter(pk__in=queryset.values("pk"))

    @admin.action(description="Retry (or compensate a held step)", permissions=["operate"])
    def retry_selected(self, request: HttpRequest, queryset: QuerySet[Compensation]) -> HttpResponse | None:
        return self._retry(request, queryset, "retry_selected")

    @admin.action(description="Resolve by hand", permissions=["operate"])
    def resolve_selected(self, request: HttpRequest, queryset: QuerySet[Compensation]) -> HttpResponse | None:
        return self._resolve(request, queryset, "resolve_selected")

    @admin.display(description="Step (arguments redacted)")
    def step(self, obj: Compensation) -> str:
        return format_html("{}<br>{}", call_summary(obj.step_call), _call_link(obj.step_call_id))

    @admin.display(description="Arguments (sensitive values redacted)")
    def shown_arguments(self, obj: Compensation) -> str:
        if obj.arguments is None:
            return "-"
        return pretty_json(redact(obj.arguments, withheld_names(obj.tool_name, obj.arguments)))

    @admin.display(description="Compensation call")
    def compensation_call(self, obj: Compensation) -> str:
        return _call_link(obj.call_id)
