"""Admin pages for remote MCP servers, their pinned tools (accept, with the diff) and per-tenant credentials."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from toolhub.admin_actions import CommentActionMixin, CommentActionPage
from toolhub.admin_governance_audit import GovernanceAudited
from toolhub.admin_helpers import CrossTenantOnly, TenantScopedAdmin, pretty_json
from toolhub.admin_marks import row_bindings, row_mark
from toolhub.admin_tables import admin_table
from toolhub.exceptions import ToolError
from toolhub.mcp_client.definitions import definition_diff
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool
from toolhub.mcp_client.provider import record_remote_usability
from toolhub.mcp_client.services import remote_server_sync, remote_tool_accept
from toolhub.tenancy import tenant_scope

__all__ = ["RemoteMcpServerAdmin", "RemoteMcpToolAdmin", "RemoteMcpCredentialAdmin"]


def _actor(request: HttpRequest) -> str:
    return f"operator:{request.user.get_username()}"


@admin.register(RemoteMcpServer)
class RemoteMcpServerAdmin(GovernanceAudited, CrossTenantOnly, admin.ModelAdmin):
    """Servers are platform configuration (endpoints): only people who cross the tenant boundary see them.

    A server's risk decides whether its tools' calls wait for an operator, as an approval rule does: each change
    is in the trail (the platform's chains), like a grant's.
    """

    small_table = True  # configuration: sorts by any column (GuardedLookups)

    audit_tenant_fields = ()

    list_display = ("name", "url", "enabled", "risk", "meta_mode", "synced_at", "last_error")
    readonly_fields = ("synced_at", "last_error")
    actions = ("fetch_tools",)
    # An endpoint typed without a scheme is taken as https (Django 6's default; 5.2 warns without it).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    # Django's admin offers an action without ``permissions`` to everyone who may view the list: these change rows.
    @admin.action(
        description="Fetch the tools they offer now (new ones wait for acceptance, changed ones quarantine)",
        permissions=["change"],
    )
    def fetch_tools(self, request: HttpRequest, queryset: QuerySet[RemoteMcpServer]) -> None:
        for server in queryset:
            try:
                counts = remote_server_sync(server=server, actor=_actor(request))
            except ToolError as exc:
                self.message_user(request, f"{server.name}: {exc}", messages.ERROR)
                continue
            self.message_user(request, f"{server.name}: {counts}", messages.SUCCESS)


class _AcceptForm(forms.Form):
    """The confirmation of an acceptance (the definitions reviewed travel as hidden fields of the page)."""

    confirm = forms.BooleanField(
        required=True, label="I reviewed these definitions: the models of every tenant will read them as shown"
    )


@admin.register(RemoteMcpTool)
class RemoteMcpToolAdmin(CrossTenantOnly, CommentActionMixin, admin.ModelAdmin):
    """Each remote tool with its pinned definition; a change is shown as a diff and must be accepted."""

    small_table = True  # configuration: sorts by any column (GuardedLookups)

    list_display = ("tool_name", "server", "status", "unusable_reason", "accepted_by", "accepted_at", "seen_at")
    list_filter = ("status", "server")
    list_select_related = ("server", "accepted_by")
    search_fields = ("tool_name", "remote_name")
    readonly_fields = (
        "server",
        "remote_name",
        "tool_name",
        "status",
        "unusable_reason",
        "accepted_by",
        "accepted_at",
        "accepted_hash",
        "current_hash",
        "seen_at",
        "change",
        "accepted",
    )
    exclude = ("accepted_definition", "current_definition")
    actions = ("accept_offered",)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    @admin.action(description="Accept the definition offered now (audited)", permissions=["change"])
    def accept_offered(self, request: HttpRequest, queryset: QuerySet[RemoteMcpTool]) -> Any:
        """Show each offered definition (its change since accepted) and accept, once confirmed, exactly those."""
        rows = list(queryset.select_related("server").order_by("tool_name"))
        page = CommentActionPage(
            title="Accept the definitions offered now",
            intro=f"These {len(rows)} definition(s) become the pinned ones. A definition the server changes "
            "again before you confirm is refused, not accepted unseen.",
            table=admin_table(
                "offered-definitions",
                ("Tool", "Server", "Status", "Change since accepted"),
                ((row.tool_name, row.server.name, row.status, self.change(row)) for row in rows),
            ),
            submit=f"Accept {len(rows)} definition(s)",
            marks=(row_mark(row.pk, row.current_hash) for row in rows),
        )
        form, confirmation = self.comment_form_or_page(
            request, _AcceptForm, action="accept_offered", selected=rows, page=page
        )
        if form is None:
            return confirmation
        reviewed = row_bindings(request, parts=1)
        accepted: list[int] = []
        for row in rows:
            if str(row.pk) not in reviewed:
                # Not (or not plainly) on the page confirmed: accepting it would pin a definition nobody reviewed.
                self.message_user(
                    request,
                    f"Tool {row.tool_name!r} was not listed on the page you confirmed; nothing was accepted. "
                    "Select it again.",
                    messages.ERROR,
                )
                continue
            (reviewed_hash,) = reviewed[str(row.pk)]
            try:
                remote_tool_accept(row=row, actor=_actor(request), user=request.user, reviewed_hash=reviewed_hash)
            except ToolError as exc:
                self.message_user(request, str(exc), messages.ERROR)
                continue
            self.message_user(request, f"Accepted {row.tool_name}.", messages.SUCCESS)
            accepted.append(row.pk)
        if accepted:
            record_remote_usability()
            unusable = RemoteMcpTool.objects.filter(pk__in=accepted).exclude(unusable_reason="")
            for tool_name, reason in unusable.order_by("tool_name").values_list("tool_name", "unusable_reason"):
                self.message_user(
                    request, f"{tool_name} is accepted but not offered to models. {reason}", messages.WARNING
                )
        return None

    @admin.display(description="Change since accepted")
    def change(self, obj: RemoteMcpTool) -> str:
        if obj.accepted_hash == obj.current_hash:
            return "none"
        return format_html(
            '<pre class="toolhub-diff">{}</pre>', definition_diff(obj.accepted_definition, obj.current_definition)
        )

    @admin.display(description="Accepted definition")
    def accepted(self, obj: RemoteMcpTool) -> str:
        return pretty_json(obj.accepted_definition)


@admin.register(RemoteMcpCredential)
class RemoteMcpCredentialAdmin(GovernanceAudited, TenantScopedAdmin, admin.ModelAdmin):
    """Which environment variable holds a tenant's token for a server (the name only, never the value).

    Each change is in the tenant's trail (the variable's name, never a value).
    """

    small_table = True  # configuration: sorts by any column (GuardedLookups)

    audit_tenant_fields = ()
    audit_tenant_lookups = ("tenant",)  # a slug, not a key to Tenant

    list_display = ("server", "tenant", "credential_env", "header")
    list_filter = ("server",)

    # Environment variables are shared by every tenant's workers: a tenant's staff naming one would read
    # another tenant's token (or probe which exist). The platform adds a credential and names its variable;
    # tenant staff keep its header and scheme, or delete it.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return tenant_scope(request.user).everything and super().has_add_permission(request)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        readonly = super().get_readonly_fields(request, obj)
        if tenant_scope(request.user).everything:
            return readonly
        return (*readonly, "server", "tenant", "credential_env")
