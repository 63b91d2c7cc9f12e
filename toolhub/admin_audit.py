"""The audit console: tool calls and the audit trail, read-only, scoped to the viewer's tenants, fast at scale.

Calls are filtered by tool, risk, tenant, status, kind, agent, user and date range, and found by call
id, run id or the provider's call id (the correlation id), or a tool name's beginning: every filter
and search is an exact match on an index (a tool prefix is resolved against the catalogue). Each
call's page re-verifies its audit events (:mod:`toolhub.audit_console`); any filtered list of calls
streams out as CSV or JSON Lines (:mod:`toolhub.exports`), and each export is itself audited. Operators
(``toolhub.change_toolcall``) may cancel selected calls that have not started; nobody edits a call.
"""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import Q, QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotAllowed,
)
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from toolhub.admin_actions import CommentActionMixin, CommentActionPage
from toolhub.admin_audit_export import audit_export_view
from toolhub.admin_helpers import ReadOnlyMixin, TenantScopedAdmin, admin_link, pretty_json, run_trail_link
from toolhub.admin_lists import (
    AgentFilter,
    CatalogueToolFilter,
    DateRangeFilter,
    LeanChangeListMixin,
    RiskFilter,
    TenantFilter,
    UsernameFilter,
    as_uuid,
)
from toolhub.admin_tables import admin_table
from toolhub.admin_verify import audit_verify_view
from toolhub.audit_console import call_timeline, own_chain_position, own_positions_shown
from toolhub.caller_view import CHAIN_POSITION_FIELDS
from toolhub.calls import settling_together
from toolhub.downloads import StreamedResponse
from toolhub.exports import EXPORT_FORMATS, export_record, export_rows, export_stream
from toolhub.models import AuditEvent, ToolCall, ToolDefinition
from toolhub.rights_recheck import console_reader_allowed, while_permitted
from toolhub.selectors import OPERATE_CALL_PERMISSION, displayed_arguments
from toolhub.tenancy import tenant_scope
from toolhub.waiting import WITHDRAWABLE_STATUSES, CallNotWithdrawableError, CancelReasonError, tool_call_cancel

__all__ = ["ToolCallAdmin", "AuditEventAdmin"]


def _catalogue_prefix(term: str) -> list[str]:
    """The catalogue's tool names that begin with ``term`` (case-insensitive): a search by tool on its index."""
    lowered = term.lower()
    return [name for name in ToolDefinition.objects.values_list("name", flat=True) if name.lower().startswith(lowered)]


class CancelCallsForm(forms.Form):
    """Why the calls are withdrawn; what a waiting run's model reads, and kept in the audit trail."""

    reason = forms.CharField(
        max_length=500,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60, "placeholder": "e.g. sent to the wrong account"}),
        help_text="A waiting run's model reads it; recorded in the audit trail with your name.",
    )


@admin.register(ToolCall)
class ToolCallAdmin(LeanChangeListMixin, TenantScopedAdmin, ReadOnlyMixin, CommentActionMixin, admin.ModelAdmin):
    """Every governed call of the user's tenants, for operators and auditors; only the pipeline writes these rows."""

    list_display = ("id", "tool_name", "status", "kind", "tenant", "agent_name", "user", "created_at", "finished_at")
    list_only_fields = (
        "id",
        "tool_name",
        "status",
        "kind",
        "tenant",
        "agent_name",
        "user",
        "created_at",
        "finished_at",
    )
    list_filter = (
        "status",
        CatalogueToolFilter,
        RiskFilter,
        TenantFilter,
        "kind",
        AgentFilter,
        UsernameFilter,
        DateRangeFilter,
    )
    search_fields = ("id",)  # shows the search box; get_search_results matches exactly on indexes
    search_help_text = "A call id, run id or the provider's call id (exact), or the beginning of a tool's name."
    list_select_related = ("user",)
    ordering = ("-created_at", "-id")
    change_list_template = "admin/toolhub/toolcall/change_list.html"
    fieldsets = (
        (None, {"fields": ("id", "kind", "tool_name", "tool_version", "status", "approval")}),
        ("Who asked", {"fields": ("user", "agent_name", "tenant", "run", "turn", "position", "model_call_id")}),
        ("Input", {"fields": ("shown_arguments", "raw_arguments", "shown_context")}),
        ("Outcome", {"fields": ("shown_result", "error", "error_detail", "shown_progress", "artifact_list")}),
        (
            "Execution",
            {"fields": ("saga_id", "approval_hash", "attempts", "worker", "lease_expires_at")},
        ),
        ("Timing", {"fields": ("created_at", "queued_at", "started_at", "finished_at", "updated_at")}),
        ("Audit timeline (re-verified on this page)", {"fields": ("audit_events",)}),
    )
    readonly_fields = tuple(field for _, options in fieldsets for field in options["fields"])
    actions = ("cancel_selected",)

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(OPERATE_CALL_PERMISSION)

    @admin.action(
        description="Cancel selected calls that have not started (held, queued, awaiting)", permissions=["operate"]
    )
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[ToolCall]) -> HttpResponse | None:
        """Ask why on an intermediate page, then withdraw each selected call that has not started."""
        calls = list(queryset.order_by("created_at"))
        waiting = [call for call in calls if call.status in WITHDRAWABLE_STATUSES]
        table = admin_table(
            "selected-calls",
            ("Call", "Tool", "Status", "Kind", "Tenant", "User"),
            ((str(c.pk), c.tool_name, c.status, c.kind, c.tenant or "-", c.user or "-") for c in waiting),
            empty="None of the selected calls waits: they started or settled.",
        )
        page = CommentActionPage(
            title="Cancel calls",
            intro=f"These {len(waiting)} call(s) will not run: a held one's approval request is withdrawn, a run "
            "waiting on one goes on and its model reads why. Calls that started or settled are left as they are.",
            table=table,
            submit=f"Cancel {len(waiting)} call(s)",
        )
        form, confirmation = self.comment_form_or_page(
            request, CancelCallsForm, action="cancel_selected", selected=calls, page=page
        )
        if form is None:
            return confirmation
        actor = f"user:{request.user.get_username()}"
        reason = f"cancelled by {actor}: {form.cleaned_data['reason'].strip()}"
        cancelled, refusals = 0, []
        with settling_together():  # a run waiting on many of them is woken once, not once per call
            for call in waiting:
                try:
                    tool_call_cancel(call=call, actor=actor, reason=reason, reader=request.user)
                except (CallNotWithdrawableError, CancelReasonError) as refused:
                    refusals.append(f"{call.tool_name} ({str(call.pk)[:8]}): {refused}")
                else:
                    cancelled += 1
        self.message_user(
            request, f"Cancelled {cancelled} call(s).", messages.SUCCESS if cancelled else messages.WARNING
        )
        for refusal in refusals[:10]:
            self.message_user(request, refusal, messages.WARNING)
        if len(calls) > len(waiting):
            self.message_user(
                request,
                f"{len(calls) - len(waiting)} selected call(s) had started or settled and were left as they are.",
                messages.WARNING,
            )
        return None

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[ToolCall], search_term: str
    ) -> tuple[QuerySet[ToolCall], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        key = as_uuid(term)
        if key is not None:
            return queryset.filter(Q(pk=key) | Q(run_id=key)), False
        names = _catalogue_prefix(term)
        if names:
            return queryset.filter(tool_name__in=names), False
        return queryset.filter(Q(model_call_id=term) | Q(saga_id=term)), False

    def get_urls(self) -> list[Any]:
        export = path(
            "export/<str:export_format>/",
            self.admin_site.admin_view(self.export_view),
            name="toolhub_toolcall_export",
        )
        verify = path("verify/", self.admin_site.admin_view(audit_verify_view), name="toolhub_audit_verify")
        trail = path("export-trail/", self.admin_site.admin_view(audit_export_view), name="toolhub_audit_export")
        return [export, verify, trail, *super().get_urls()]

    def export_view(self, request: HttpRequest, export_format: str) -> HttpResponse:
        """The calls of the list as filtered and searched (every page), streamed as CSV or JSON Lines.

        A POST (the list's export buttons, with the CSRF token): each export is audited in the user's name,
        so another site must not be able to make their browser export.
        """
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"], "Export with the buttons of the list of calls.")
        if export_format not in EXPORT_FORMATS:
            raise Http404("Unknown export format.")
        if not self.has_view_permission(request):
            raise PermissionDenied
        request.GET = request.GET.copy()
        for ignored in ("p", "all", "_facets"):
            request.GET.pop(ignored, None)
        try:
            changelist = self.get_changelist_instance(request)
        except IncorrectLookupParameters:
            return HttpResponseBadRequest("These filters are not valid; export from the list of calls.")
        scope = tenant_scope(request.user)
        export_record(
            actor=f"user:{request.user.get_username()}",
            export_format=export_format,
            query=dict(request.GET.items()),
            calls=changelist.queryset,
            scope=None if scope.everything else sorted(scope.tenants),
        )
        allowed = console_reader_allowed(request.user, scope, "toolhub.view_toolcall", "toolhub.change_toolcall")
        chunks = while_permitted(export_stream(export_rows(changelist.queryset), export_format), request.user, allowed)
        response = StreamedResponse(chunks, content_type=EXPORT_FORMATS[export_format])
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        response["Content-Disposition"] = f'attachment; filename="toolcalls-{stamp}.{export_format}"'
        return response

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        query = request.GET.copy()
        for ignored in ("p", "all", "_facets"):
            query.pop(ignored, None)
        encoded = query.urlencode()
        links = {
            name: reverse("admin:toolhub_toolcall_export", args=[name]) + (f"?{encoded}" if encoded else "")
            for name in EXPORT_FORMATS
        }
        return super().changelist_view(request, {**(extra_context or {}), "export_links": links})

    @admin.display(description="Arguments (sensitive values redacted)")
    def shown_arguments(self, obj: ToolCall) -> str:
        return pretty_json(displayed_arguments(obj))

    @admin.display(description="Context")
    def shown_context(self, obj: ToolCall) -> str:
        return pretty_json(obj.context)

    @admin.display(description="Result")
    def shown_result(self, obj: ToolCall) -> str:
        return pretty_json(obj.result) if obj.result is not None else "-"

    @admin.display(description="Progress")
    def shown_progress(self, obj: ToolCall) -> str:
        return pretty_json(obj.progress) if obj.progress else "-"

    @admin.display(description="Artifacts")
    def artifact_list(self, obj: ToolCall) -> str:
        artifacts = list(obj.artifacts.only("id", "name", "media_type", "size", "sha256"))
        if not artifacts:
            return "-"
        return format_html_join(
            "",
            '<div><a href="{}" download>{}</a> ({}, {} bytes, sha256 {})</div>',
            (
                (
                    reverse("call-artifact", args=[obj.pk, artifact.pk]),
                    artifact.name,
                    artifact.media_type,
                    artifact.size,
                    artifact.sha256[:16],
                )
                for artifact in artifacts
            ),
        )

    @admin.display(description="Agent run")
    def run(self, obj: ToolCall) -> str:
        return admin_link("admin:agents_app_agentrun_change", obj.run_id, obj.run_id) if obj.run_id else "-"

    @admin.display(description="Approval request")
    def approval(self, obj: ToolCall) -> str:
        # Reverse one-to-one from the approvals app, looked up by name so the core imports no apps.
        request = getattr(obj, "approval_request", None)
        if request is None:
            return "-"
        return admin_link("admin:approvals_approvalrequest_change", request.pk, f"#{request.pk} ({request.status})")

    @admin.display(description="Audit events")
    def audit_events(self, obj: ToolCall) -> str:
        timeline = call_timeline(obj.pk)
        if not timeline.entries:
            return "-"
        rows = format_html_join(
            "",
            '<tr class="{}"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
            (
                (
                    "toolhub-verified" if entry.verified else "toolhub-tampered",
                    admin_link("admin:toolhub_auditevent_change", entry.event.pk, entry.event.pk),
                    entry.event.created_at.isoformat(timespec="milliseconds"),
                    entry.event.event_type,
                    entry.event.status,
                    entry.event.actor,
                    pretty_json(entry.event.payload),
                    "verified" if entry.verified else "NOT VERIFIED: " + "; ".join(entry.problems),
                )
                for entry in timeline.entries
            ),
        )
        summary = (
            format_html(
                '<p class="toolhub-chain-ok" id="call-audit-verdict">verified: {} events, hashes recomputed and '
                "chain links checked</p>",
                len(timeline.entries),
            )
            if timeline.verified
            else format_html(
                '<p class="toolhub-chain-bad" id="call-audit-verdict">NOT VERIFIED: {} of {} events do not verify</p>',
                sum(1 for entry in timeline.entries if not entry.verified),
                len(timeline.entries),
            )
        )
        return format_html(
            '{}<table class="toolhub-table" id="call-audit-events"><thead><tr><th>#</th><th>When</th><th>Event</th>'
            "<th>Status</th><th>Actor</th><th>Data</th><th>Integrity</th></tr></thead><tbody>{}</tbody></table>",
            summary,
            rows,
        )


class EventTypeFilter(admin.SimpleListFilter):
    """By event type, offered from a skip scan of the event_type index instead of a DISTINCT over the trail.

    For viewers who cross tenants; others type the event type (``EventTypeInputFilter``).
    """

    title = "event type"
    parameter_name = "event_type"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(name, name) for name in _event_types()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AuditEvent]) -> QuerySet[AuditEvent]:
        return queryset.filter(event_type=self.value()) if self.value() else queryset


class EventTypeInputFilter(AgentFilter):
    """By event type, typed: for tenant-scoped viewers, whom the choices would tell of other tenants' activity.

    ``EventTypeFilter`` offers the types found in the whole trail (every tenant's); scoping its index scan to
    the viewer's tenants would read every event of the types they have none of.
    """

    title = "event type"
    parameter_name = "event_type"
    placeholder = "e.g. call.denied"
    field = "event_type"


def _event_types() -> list[str]:
    """The event types in the trail: a skip scan of the event_type index (one probe per type), not a DISTINCT."""
    table = AuditEvent._meta.db_table
    if connection.vendor != "postgresql":
        return list(AuditEvent.objects.order_by("event_type").values_list("event_type", flat=True).distinct())
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH RECURSIVE types(t) AS ((SELECT event_type FROM {table} ORDER BY event_type LIMIT 1) UNION ALL "
            f"SELECT (SELECT e.event_type FROM {table} e WHERE e.event_type > types.t ORDER BY e.event_type LIMIT 1) "
            "FROM types WHERE types.t IS NOT NULL) SELECT t FROM types WHERE t IS NOT NULL"
        )
        return [name for (name,) in cursor.fetchall()]


class ActorFilter(AgentFilter):
    title = "actor"
    parameter_name = "actor"
    placeholder = "e.g. operator:alice"
    field = "actor"


@admin.register(AuditEvent)
class AuditEventAdmin(LeanChangeListMixin, TenantScopedAdmin, ReadOnlyMixin, admin.ModelAdmin):
    """The append-only audit trail of the user's tenants; strictly read-only (the database refuses changes too)."""

    list_display = ("id", "created_at", "event_type", "tool_name", "status", "actor", "tenant", "call", "chain", "seq")
    list_only_fields = (
        "id",
        "created_at",
        "event_type",
        "tool_name",
        "status",
        "actor",
        "tenant",
        "call_id",
        "chain",
        "seq",
    )
    list_filter = (EventTypeFilter, CatalogueToolFilter, TenantFilter, ActorFilter, DateRangeFilter)
    search_fields = ("id",)
    search_help_text = "A call id, run id or actor (exact), or the beginning of a tool's name."
    ordering = ("-created_at", "-id")
    fields = (
        "id",
        "created_at",
        "event_type",
        "call",
        "run",
        "tool_name",
        "status",
        "tenant",
        "actor",
        "shown_data",
        "chain",
        "seq",
        "prev_hash",
        "hash",
    )
    readonly_fields = fields

    def get_list_display(self, request: HttpRequest) -> Any:
        names = _without_chain_positions(request, super().get_list_display(request))
        if tenant_scope(request.user).everything or not own_positions_shown():
            return names
        return (*names, "own_position")

    def get_list_filter(self, request: HttpRequest) -> Any:
        filters = super().get_list_filter(request)
        if tenant_scope(request.user).everything:
            return filters
        return [EventTypeInputFilter if f is EventTypeFilter else f for f in filters]

    def hidden_lookups(self, request: HttpRequest) -> frozenset[str]:
        # ?chain=3&seq__lte=N would bisect an event's place in a shared chain, which the pages leave out.
        return frozenset() if tenant_scope(request.user).everything else frozenset(CHAIN_POSITION_FIELDS)

    def get_fields(self, request: HttpRequest, obj: AuditEvent | None = None) -> Any:
        names = _without_chain_positions(request, super().get_fields(request, obj))
        if tenant_scope(request.user).everything or not own_positions_shown():
            return names
        return (*names, "own_position")

    def get_readonly_fields(self, request: HttpRequest, obj: AuditEvent | None = None) -> Any:
        return (*super().get_readonly_fields(request, obj), "own_position")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[AuditEvent], search_term: str
    ) -> tuple[QuerySet[AuditEvent], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        key = as_uuid(term)
        if key is not None:
            return queryset.filter(Q(call_id=key) | Q(run_id=key)), False
        return queryset.filter(Q(tool_name__in=_catalogue_prefix(term)) | Q(actor=term)), False

    @admin.display(description="Call")
    def call(self, obj: AuditEvent) -> str:
        return admin_link("admin:toolhub_toolcall_change", obj.call_id, obj.call_id) if obj.call_id else "-"

    @admin.display(description="Run")
    def run(self, obj: AuditEvent) -> str:
        if not obj.run_id:
            return "-"
        page = admin_link("admin:agents_app_agentrun_change", obj.run_id, obj.run_id)
        return format_html("{} ({})", page, run_trail_link(obj.run_id))

    @admin.display(description="Chain · seq")
    def own_position(self, obj: AuditEvent) -> str:
        """The event's place in its tenant's own chain (its sequence numbers count that tenant's events only)."""
        return own_chain_position(obj) or "in a shared chain"

    @admin.display(description="Data")
    def shown_data(self, obj: AuditEvent) -> str:
        return pretty_json(obj.payload)


def _without_chain_positions(request: HttpRequest, names: Any) -> Any:
    """``names`` without an event's chain and sequence number, unless the viewer crosses tenants.

    The platform's chains (and every event written before chains were kept per tenant) are shared by
    every tenant, so the gaps between one tenant's sequence numbers there count the others' events
    (``toolhub.caller_view.CHAIN_POSITION_FIELDS``); the hashes stay, as they tell nothing. A tenant's
    staff see an event's place in its tenant's own chain instead (``own_position``).
    """
    if tenant_scope(request.user).everything:
        return names
    return tuple(name for name in names if name not in CHAIN_POSITION_FIELDS)
