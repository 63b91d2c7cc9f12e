"""The admin of the core: the tool catalogue operators govern, and the read-only call and audit trail.

Tenant data (calls, audit events, tenants, memberships, tenant-bound grants) is scoped to the
user's tenants; the catalogue and tool groups are platform-wide configuration that only people who
cross the boundary change (see :mod:`toolhub.admin_helpers`). So are people's accounts: Django's own
User and Group pages and DRF's token page are replaced here by tenant-scoped ones, since whoever
changes an account (superuser status, groups, permissions, password, API token) acts as anyone.
"""

from collections.abc import Sequence
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.template.response import SimpleTemplateResponse

from toolhub import admin_tokens  # noqa: F401 - registers the Tokens page
from toolhub.admin_governance_audit import GovernanceAudited
from toolhub.admin_helpers import (
    CrossTenantChangesOnly,
    FixedIdentity,
    ProblemsColumn,
    ReadOnlyMixin,
    TenantScopedAdmin,
    admin_link,  # noqa: F401 - the apps' admins import them from here
    pretty_json,
)
from toolhub.admin_lists import CatalogueGroupFilter
from toolhub.admin_relations import SharedInPart
from toolhub.admin_usernames import UserAddForm, UserEditForm
from toolhub.builtins import grants_builtin
from toolhub.catalogue import tool_definition_govern
from toolhub.disclosure.capabilities import capability_permissions_ensure
from toolhub.disclosure.groups import group_names_read, rules_seen_from
from toolhub.governance import governance_scope
from toolhub.governance_trail import GROUP_TENANTS, USER_TENANTS
from toolhub.models import Grant, GrantEffect, Tenant, TenantMembership, ToolDefinition, ToolGroup
from toolhub.tenancy import tenant_scope

admin.site.site_header = "toolhub"
admin.site.site_title = "toolhub"
admin.site.index_title = "Operators and auditors"


class ReadOnlyAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """Records nobody edits from the admin, superusers included: view permission only."""


@admin.register(Tenant)
class TenantAdmin(GovernanceAudited, FixedIdentity, TenantScopedAdmin, CrossTenantChangesOnly, admin.ModelAdmin):
    """Tenants: staff see their own; only people who cross the boundary add, rename (the name) or delete one.

    Each is in the tenant's own trail: a deletion takes its grants, rules and memberships with it.
    """

    small_table = True  # configuration: sorts by any column (GuardedLookups)

    tenant_field = "slug"
    audit_tenant_fields = ()
    audit_tenant_lookups = ("slug",)
    list_display = ("slug", "name")
    ordering = ("slug",)  # a stable order for the list and the autocomplete pages
    search_fields = ("slug", "name")


@admin.register(TenantMembership)
class TenantMembershipAdmin(GovernanceAudited, TenantScopedAdmin, admin.ModelAdmin):
    """Who acts for which tenant; a tenant's admins manage their own tenants' members and no other tenant's."""

    small_table = True  # configuration: sorts by any column (GuardedLookups)

    tenant_field = "tenant__slug"
    list_display = ("user", "tenant")
    list_filter = ("tenant",)
    search_fields = ("user__username", "tenant__slug")
    list_select_related = ("user", "tenant")
    raw_id_fields = ("user",)


for _model in (get_user_model(), Group):
    if admin.site.is_registered(_model):
        admin.site.unregister(_model)


_MEMBER_TENANTS = USER_TENANTS[0]


@admin.register(get_user_model())
class TenantUserAdmin(GovernanceAudited, TenantScopedAdmin, CrossTenantChangesOnly, UserAdmin):
    """People: tenant-scoped staff read the users of their tenants; only people who cross the boundary change accounts.

    Changing an account (superuser or staff status, groups, permissions, password) is acting as its
    owner, who may belong to other tenants too; each change is in the trail of every tenant they belong to
    (the password's hash never is: only that it changed).
    """

    small_table = True  # configuration: sorts by any column (GuardedLookups)

    tenant_field = _MEMBER_TENANTS
    audit_tenant_fields = ()
    audit_tenant_lookups = USER_TENANTS
    form = UserEditForm
    add_form = UserAddForm

    def user_change_password(self, request: HttpRequest, id: str, form_url: str = "") -> Any:
        """Django's password form saves without ``save_model``: the account as it was is kept here for the event."""
        with transaction.atomic():
            if request.method == "POST":
                user = self.get_object(request, unquote(id))
                if user is not None:
                    self.audit_remember(request, user)
            return super().user_change_password(request, id, form_url)

    def choosable_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        """A membership names a user of one's tenants, or a newcomer in no tenant yet (never a superuser)."""
        newcomers = self.model.objects.filter(tenant_memberships__isnull=True, is_superuser=False)
        return self.model.objects.filter(
            Q(pk__in=self.get_queryset(request).values("pk")) | Q(pk__in=newcomers.values("pk"))
        )


@admin.register(Group)
class RoleGroupAdmin(GovernanceAudited, CrossTenantChangesOnly, GroupAdmin):
    """Roles are shared by every tenant: one tenant's staff adding a permission would change everyone's.

    A change is in the trail of every tenant whose people hold the role (the platform's, when nobody does).
    """

    small_table = True  # configuration: sorts by any column (GuardedLookups)

    audit_tenant_fields = ()
    audit_tenant_lookups = GROUP_TENANTS


@admin.register(ToolDefinition)
class ToolDefinitionAdmin(CrossTenantChangesOnly, admin.ModelAdmin):
    """The catalogue: the code owns names and schemas, operators own ``enabled`` and ``risk_override``.

    A switch here changes every tenant, so only people who cross the tenant boundary change it.
    """

    small_table = True  # configuration: sorts by any column (GuardedLookups)

    list_display = ("name", "effective_risk", "risk_override", "enabled", "group_read", "present_in_code", "version")
    list_editable = ("enabled", "risk_override")
    list_filter = ("enabled", "risk", "risk_override", CatalogueGroupFilter, "present_in_code")
    search_fields = ("name", "description", "group")
    show_full_result_count = False
    fieldsets = (
        ("Governed by operators", {"fields": ("enabled", "risk_override")}),
        (
            "From the code (refreshed by sync_tools)",
            {"fields": ("name", "description", "risk", "group_read", "module", "version", "schema", "present_in_code")},
        ),
        (None, {"fields": ("synced_at",)}),
    )
    readonly_fields = (
        "name",
        "description",
        "risk",
        "group_read",
        "module",
        "version",
        "schema",
        "present_in_code",
        "synced_at",
    )

    # Rows come from the code through sync_tools; a row added or deleted here would lie about it.
    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ToolDefinition | None = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponseBase:
        """A list read under one governance read: each row names its group (``group_read``), one stamp read a row.

        Only when nothing is posted: a save of ``list_editable`` changes governance and must read it fresh.
        """
        if request.method != "GET":
            return super().changelist_view(request, extra_context)
        with governance_scope():
            response = super().changelist_view(request, extra_context)
            if isinstance(response, SimpleTemplateResponse) and not response.is_rendered:
                response.render()
        return response

    def get_search_fields(self, request: HttpRequest) -> Sequence[str]:
        """By group name only for those who read every group's name.

        A guessed name of another tenant's group would answer with its tools (``CatalogueGroupFilter`` offers each
        viewer the groups they read).
        """
        fields = super().get_search_fields(request)
        return fields if tenant_scope(request.user).everything else tuple(f for f in fields if f != "group")

    def get_list_display(self, request: HttpRequest) -> Sequence[str]:
        """Sorted by group only for those who read every group's name.

        A withheld group's place among the others would spell its name out, a letter at a time (``?o=`` too: the
        others' column has no ordering).
        """
        columns = super().get_list_display(request)
        if tenant_scope(request.user).everything:
            return columns
        return tuple("group_unsorted" if column == "group_read" else column for column in columns)

    def save_model(self, request: HttpRequest, obj: ToolDefinition, form: Any, change: bool) -> None:
        """Operators' changes go through the service, which records them in the audit trail."""
        tool_definition_govern(
            definition=obj,
            actor=f"operator:{request.user.get_username()}",
            enabled=form.cleaned_data.get("enabled"),
            risk_override=form.cleaned_data.get("risk_override"),
        )

    @admin.display(description="Effective risk")
    def effective_risk(self, obj: ToolDefinition) -> str:
        return obj.effective_risk

    @admin.display(description="Input schema")
    def schema(self, obj: ToolDefinition) -> str:
        return pretty_json(obj.input_schema)

    @admin.display(description="Group", ordering="group")
    def group_read(self, obj: ToolDefinition) -> str:
        """The tool's group as the viewer reads it: one whose rules name only other tenants, by its kind."""
        return group_names_read([obj.group]).get(obj.group, "")

    @admin.display(description="Group")
    def group_unsorted(self, obj: ToolDefinition) -> str:
        """``group_read`` for viewers within tenants: not sortable (``get_list_display``)."""
        return self.group_read(obj)


@admin.register(ToolGroup)
class ToolGroupAdmin(
    GovernanceAudited, ProblemsColumn, FixedIdentity, SharedInPart, CrossTenantChangesOnly, admin.ModelAdmin
):
    """Tool groups: members from the code (``@tool(group=...)``) plus the tools operators add.

    Groups are shared by every tenant: only people who cross the tenant boundary change them.
    """

    small_table = True  # configuration: sorts by any column (GuardedLookups)

    audit_tenant_fields = ()  # the platform's configuration: its events go to the platform's chains

    list_display = (
        "name",
        "provider",
        "active_by_default",
        "approver_group",
        "escalation_group",
        "members",
        "problems",
    )
    list_filter = ("active_by_default", "provider")
    search_fields = ("name", "description")
    list_select_related = ("approver_group", "escalation_group")
    fieldsets = (
        (None, {"fields": ("name", "description", "provider")}),
        ("Tools", {"fields": ("code_members", "extra_tools", "capabilities")}),
        ("At run time", {"fields": ("active_by_default", "activation_rules", "system_prompt_addition")}),
        (
            "Approvals",
            {"fields": ("approver_group", "approver_permission", "escalation_group", "escalate_after_seconds")},
        ),
    )
    readonly_fields = ("code_members",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ToolGroup]:
        """Tenant-scoped staff see the groups for everyone and those whose rules name one of their tenants."""
        groups = super().get_queryset(request)
        scope = tenant_scope(request.user)
        if scope.everything:
            return groups
        rows = groups.values_list("pk", "activation_rules")
        return groups.filter(pk__in=[pk for pk, rules in rows if rules_seen_from(rules, scope.tenants) is not None])

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> ToolGroup | None:
        """The group, its rules as the viewer's tenants read them (others' tenants left out) unless they cross tenants.

        Safe to change in memory: only those who cross tenants may save a group (``CrossTenantChangesOnly``).
        """
        group = super().get_object(request, object_id, from_field)
        scope = tenant_scope(request.user)
        if group is not None and not scope.everything:
            group.activation_rules = rules_seen_from(group.activation_rules, scope.tenants) or []
        return group

    def save_model(self, request: HttpRequest, obj: ToolGroup, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        # Each capability is a permission administrators give to users or Django groups.
        capability_permissions_ensure(obj.capabilities or [])

    def row_problems(self, obj: ToolGroup) -> dict[str, str]:
        return obj.reference_problems()

    @admin.display(description="Extra tools")
    def members(self, obj: ToolGroup) -> str:
        return ", ".join(obj.extra_tools or []) or "-"

    @admin.display(description="Members from the code")
    def code_members(self, obj: ToolGroup) -> str:
        names = ToolDefinition.objects.filter(group=obj.name).values_list("name", flat=True) if obj.pk else []
        return ", ".join(names) or "-"


@admin.register(Grant)
class GrantAdmin(GovernanceAudited, ProblemsColumn, TenantScopedAdmin, admin.ModelAdmin):
    """Who may use which tool or group; deny wins over allow (each change in the trail of the tenants it binds).

    Tenant-scoped staff see and manage only grants to their tenants; grants to a user, a Django group
    or an agent are platform-wide (they name principals of any tenant) and only people who cross the
    boundary see them. A grant the platform set for a tenant (a deny above all) is read-only to that
    tenant's staff, and only the platform allows a built-in tool: those reach the server's disk and
    processes, which every tenant shares.
    """

    small_table = True  # configuration: sorts by any column (GuardedLookups)

    tenant_field = "tenant__slug"
    audit_tenant_fields = ("tenant", "agent_tenant")
    # A grant to a user or a role decides what their people may call in each of their tenants: as a role's own
    # change (RoleGroupAdmin), it is in those tenants' trails.
    audit_tenant_lookups = (f"user__{_MEMBER_TENANTS}", f"group__user__{_MEMBER_TENANTS}")

    list_display = (
        "__str__",
        "effect",
        "tool_group",
        "tool_name",
        "user",
        "group",
        "tenant",
        "agent_name",
        "agent_tenant",
        "note",
        "set_by_platform",
        "problems",
    )
    list_filter = ("effect", "tool_group", "tenant")
    search_fields = ("tool_name", "agent_name", "note", "user__username", "group__name")
    list_select_related = ("tool_group", "user", "group", "tenant", "agent_tenant")
    raw_id_fields = ("user",)
    fieldsets = (
        (None, {"fields": ("effect", "note")}),
        ("Which tools (one of)", {"fields": ("tool_group", "tool_name")}),
        ("To whom (one of)", {"fields": ("user", "group", "tenant", "agent_name")}),
        ("For an agent: in which tenant (optional)", {"fields": ("agent_tenant",)}),
    )

    def row_problems(self, obj: Grant) -> dict[str, str]:
        return obj.reference_problems()

    def get_fieldsets(self, request: HttpRequest, obj: Grant | None = None) -> Any:
        """Tenant-scoped staff grant to one of their tenants only: user, group and agent grants are the platform's."""
        if tenant_scope(request.user).everything:
            return super().get_fieldsets(request, obj)
        return self.shown_fieldsets(
            request,
            obj,
            (
                (None, {"fields": ("effect", "note")}),
                ("Which tools (one of)", {"fields": ("tool_group", "tool_name")}),
                ("To which of your tenants", {"fields": ("tenant",)}),
            ),
        )

    def has_change_permission(self, request: HttpRequest, obj: Grant | None = None) -> bool:
        return super().has_change_permission(request, obj) and self._own_to_manage(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Grant | None = None) -> bool:
        return super().has_delete_permission(request, obj) and self._own_to_manage(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Grant]) -> None:
        if not tenant_scope(request.user).everything and queryset.filter(set_by_platform=True).exists():
            raise PermissionDenied
        super().delete_queryset(request, queryset)

    def save_model(self, request: HttpRequest, obj: Grant, form: Any, change: bool) -> None:
        crosses = tenant_scope(request.user).everything
        if not crosses and (obj.set_by_platform and change):
            raise PermissionDenied
        obj.set_by_platform = crosses
        super().save_model(request, obj, form, change)

    def get_form(self, request: HttpRequest, obj: Grant | None = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        if tenant_scope(request.user).everything:
            return form

        class TenantGrantForm(form):  # type: ignore[misc, valid-type]
            def clean(self) -> dict[str, Any]:
                cleaned: dict[str, Any] = super().clean()
                group = cleaned.get("tool_group")
                named = grants_builtin(
                    cleaned.get("tool_name") or "", group.name if group else "", group.extra_tools if group else []
                )
                if cleaned.get("effect") == GrantEffect.ALLOW and named:
                    raise forms.ValidationError(
                        "Built-in tools reach the server's disk and processes, which every tenant shares: "
                        "only the platform grants them."
                    )
                return cleaned

        return TenantGrantForm

    def _own_to_manage(self, request: HttpRequest, obj: Grant | None) -> bool:
        """A tenant's staff manage the grants they made; one the platform set stays as it set it."""
        return obj is None or not obj.set_by_platform or tenant_scope(request.user).everything


# The audit console (calls, the audit trail, exports) registers itself beside the catalogue; so do login lockouts
# and logins (django-axes), for people who cross the tenant boundary only.
from toolhub import admin_audit, admin_logins  # noqa: E402, F401

# Remote MCP servers, their pinned tools and per-tenant credentials.
from toolhub.mcp_client import admin as mcp_client_admin  # noqa: E402, F401
