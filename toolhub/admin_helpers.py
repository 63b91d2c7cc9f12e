"""Pieces every admin module of toolhub shares: read-only records, JSON display, cross-app links, the tenant console.

The admin is a tenant-scoped console. :class:`TenantScopedAdmin` cuts every admin it is mixed into
down to the user's tenants through :mod:`toolhub.tenancy`, in ``get_queryset``, so changelists,
change pages, bulk actions, search, filters and custom views built on ``get_object`` all follow.
Rows of another tenant are simply absent: their change page answers like a missing id.

Platform-wide configuration (the tool catalogue, tool groups, tenants themselves, approval rules
and grants bound to no tenant) changes every tenant at once, so only people who cross the boundary
(superusers, ``toolhub.cross_tenant``) add, change or delete it; tenant-scoped staff read it (the
catalogue, groups, global rules) or do not see it at all (grants to users, groups and agents, which
name principals of any tenant). See :class:`CrossTenantChangesOnly`. Pages that hold credentials
or endpoints (model providers, API tokens) are not shown to tenant-scoped staff at all
(:class:`CrossTenantOnly`). Every one of them filters a list only by what its pages show
(:class:`GuardedLookups`), so that an empty list answers no question about a withheld value. Their delete pages name
only the related rows the viewer may see and say what to do when a protection refuses one
(:mod:`toolhub.admin_deletion`).

A shared table each tenant sees only part of (tool groups bound to some tenants) is withheld wherever a
tenant-scoped page names one of its rows: a form chooses among the rows shown, and a list column, a list
filter or a read-only field says "a tool group of another tenant" instead of naming or linking the row
(:mod:`toolhub.admin_relations`).
"""

import json
from collections.abc import Mapping
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.widgets import ForeignKeyRawIdWidget
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.db.models import ForeignKey, Model, Q, QuerySet
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode

from toolhub.admin_deletion import ScopedDeletion
from toolhub.admin_editable import StaleEditsRefused
from toolhub.admin_json import CheckedJSONFields
from toolhub.admin_lookups import GuardedLookups
from toolhub.admin_relations import (
    OpenableLinksOnly,
    SharedInPart,
    ShownRelatedOnlyFieldListFilter,
    ShownRelation,
    swapped_fieldsets,
)
from toolhub.governance import governance_scope
from toolhub.models import Tenant
from toolhub.tenancy import scoped, tenant_scope

__all__ = [
    "FixedIdentity",
    "GuardedLookups",
    "ModelProblemsShown",
    "ReadOnlyMixin",
    "TenantScopedAdmin",
    "CrossTenantChangesOnly",
    "CrossTenantOnly",
    "pretty_json",
    "ProblemsColumn",
    "admin_link",
    "run_trail_link",
]


class ReadOnlyMixin:
    """For admins and inlines of records nobody edits from the admin, superusers included."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class FixedIdentity:
    """Shows a model's ``identity_fields`` read-only once the row exists: other rows and the code name it by them.

    The model refuses a change too (``toolhub.models.tenants.refuse_identity_change``); here the page says so up front.
    """

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> tuple[str, ...]:
        fixed = tuple(getattr(self.model, "identity_fields", ())) if obj is not None else ()  # type: ignore[attr-defined]
        return (*super().get_readonly_fields(request, obj), *fixed)  # type: ignore[misc]


class TenantScopedAdmin(ScopedDeletion, OpenableLinksOnly, GuardedLookups, StaleEditsRefused, CheckedJSONFields):
    """Mixed into a ``ModelAdmin`` (before it): the user sees and acts on the rows of their tenants only.

    ``tenant_field`` is the path to the row's tenant slug (``"tenant"``, ``"saga__tenant"``,
    ``"tenant__slug"``); through a many-valued relation (a user's ``"tenant_memberships__tenant__slug"``)
    a row is shown once if any of its tenants is the user's. With ``global_rows_visible`` the rows
    bound to no tenant (platform-wide configuration) are shown to tenant-scoped staff too, read-only.
    """

    tenant_field: str = "tenant"
    global_rows_visible: bool = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)  # type: ignore[misc]
        scope = tenant_scope(request.user)
        if scope.everything:
            return queryset
        inside = scope.q(self.tenant_field)
        if self.global_rows_visible:
            inside |= Q(**{f"{self.tenant_field}__isnull": True}) | Q(**{self.tenant_field: ""})
        if self._tenant_field_is_many():
            # A join through a many-valued relation repeats rows; keep each row once.
            return queryset.filter(pk__in=queryset.model._default_manager.filter(inside).values("pk"))
        return queryset.filter(inside)

    def choosable_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        """The rows another admin's form may point at (a foreign key to this model): those shown here."""
        return self.get_queryset(request)

    def _tenant_field_is_many(self) -> bool:
        model: Any = self.model  # type: ignore[attr-defined]
        for part in self.tenant_field.split("__"):
            field = model._meta.get_field(part)
            if field.one_to_many or field.many_to_many:
                return True
            if not field.is_relation:
                return False  # a column, or a key inside a JSON column
            model = field.related_model
        return False

    def tenant_of(self, obj: Model) -> str:
        """The slug of the tenant ``obj`` belongs to; empty for a row bound to no tenant."""
        value: Any = obj
        for part in self.tenant_field.split("__"):
            value = getattr(value, part, None)
            if value is None:
                return ""
        return str(value)

    def in_tenant_scope(self, request: HttpRequest, obj: Model | None) -> bool:
        """Whether the user may act on ``obj`` (``None``: the list as a whole)."""
        return obj is None or tenant_scope(request.user).allows(self.tenant_of(obj))

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        allowed: bool = super().has_change_permission(request, obj)  # type: ignore[misc]
        return allowed and self.in_tenant_scope(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        allowed: bool = super().has_delete_permission(request, obj)  # type: ignore[misc]
        return allowed and self.in_tenant_scope(request, obj)

    def save_model(self, request: HttpRequest, obj: Model, form: Any, change: bool) -> None:
        # Defence in depth: forms offer only the user's tenants, and list_editable rows outside them are disabled.
        if not self.in_tenant_scope(request, obj):
            raise PermissionDenied
        super().save_model(request, obj, form, change)  # type: ignore[misc]

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        if not self.in_tenant_scope(request, obj):
            raise PermissionDenied
        super().delete_model(request, obj)  # type: ignore[misc]

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        if (
            not tenant_scope(request.user).everything
            and queryset.exclude(tenant_scope(request.user).q(self.tenant_field)).exists()
        ):
            raise PermissionDenied
        super().delete_queryset(request, queryset)  # type: ignore[misc]

    def formfield_for_foreignkey(self, db_field: ForeignKey, request: HttpRequest, **kwargs: Any) -> Any:
        """A tenant is chosen among the user's own tenants (a tenant-scoped user must choose one).

        A row of another tenant-scoped admin (a user, a call), or of an admin that shows each tenant only
        part of a shared table (``choosable_queryset``: tool groups), is chosen among the rows that admin
        shows, even when typed in by id, and a raw id box names no row outside them.
        """
        scope = tenant_scope(request.user)
        if db_field.related_model is Tenant:
            kwargs["queryset"] = scoped(Tenant.objects.order_by("slug"), request.user, "slug")
            if not scope.everything:
                kwargs["required"] = True
        elif "queryset" not in kwargs and not scope.everything:
            related_admin = self.admin_site._registry.get(db_field.related_model)  # type: ignore[attr-defined]
            # A tenant-scoped admin, or a shared one that shows each tenant only part (tool groups).
            if hasattr(related_admin, "choosable_queryset"):
                kwargs["queryset"] = related_admin.choosable_queryset(request)
                if db_field.name in self.raw_id_fields:  # type: ignore[attr-defined]
                    kwargs["widget"] = _ScopedRawIdWidget(
                        db_field.remote_field,
                        self.admin_site,
                        kwargs["queryset"],
                        using=kwargs.get("using"),  # type: ignore[attr-defined]
                    )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]

    def get_list_filter(self, request: HttpRequest) -> list[Any]:
        """Filters on a related row offer only the values found among the rows the user may see (and may see).

        A list not declared ``small_table`` has its filters from ``GuardedLookups`` (choices reading none of its rows).
        """
        filters = []
        for entry in super().get_list_filter(request):  # type: ignore[misc]
            if self.small_table and isinstance(entry, str) and "__" not in entry:
                if self.model._meta.get_field(entry).is_relation:  # type: ignore[attr-defined]
                    entry = (entry, ShownRelatedOnlyFieldListFilter)
            filters.append(entry)
        return filters

    def withheld_relations(self, request: HttpRequest) -> frozenset[str]:
        return frozenset(self.shared_in_part_relations(request))

    def shared_in_part_relations(self, request: HttpRequest) -> dict[str, ShownRelation]:
        """The foreign keys to a :class:`SharedInPart` admin's rows, for a user who sees only part of them."""
        relations: dict[str, ShownRelation] = {}
        for field in self.model._meta.get_fields():  # type: ignore[attr-defined]
            if not (field.many_to_one and field.concrete):
                continue
            related_admin = self.admin_site._registry.get(field.related_model)  # type: ignore[attr-defined]
            if isinstance(related_admin, SharedInPart):
                shown = related_admin.shown_pks(request)
                if shown is not None:
                    empty = self.get_empty_value_display()  # type: ignore[attr-defined]
                    relations[field.name] = ShownRelation(field, shown, related_admin.withheld_label(), empty)
        return relations

    def get_list_display(self, request: HttpRequest) -> Any:
        """A column naming a row the user may not see (a global rule's tool group) says it is withheld."""
        display = super().get_list_display(request)  # type: ignore[misc]
        relations = self.shared_in_part_relations(request)
        if not relations:
            return display
        return [relations.get(name, name) if isinstance(name, str) else name for name in display]

    def _withheld_on(self, request: HttpRequest, obj: Model | None) -> dict[str, ShownRelation]:
        """The foreign keys of ``obj`` that point at a row the user may not see."""
        if obj is None:
            return {}
        return {name: shown for name, shown in self.shared_in_part_relations(request).items() if shown.withholds(obj)}

    def shown_fieldsets(self, request: HttpRequest, obj: Model | None, fieldsets: Any) -> Any:
        """``fieldsets`` with each field naming a row the user may not see shown withheld and read-only.

        Read-only, so that a row they may change keeps what it names (a form offering only the rows they
        see would otherwise save it as naming none).
        """
        return swapped_fieldsets(fieldsets, self._withheld_on(request, obj))

    def get_fieldsets(self, request: HttpRequest, obj: Model | None = None) -> Any:
        return self.shown_fieldsets(request, obj, super().get_fieldsets(request, obj))  # type: ignore[misc]

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        readonly = super().get_readonly_fields(request, obj)  # type: ignore[misc]
        withheld = self._withheld_on(request, obj)
        return (*readonly, *withheld.values()) if withheld else readonly

    def get_form(self, request: HttpRequest, obj: Model | None = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)  # type: ignore[misc]
        return type(form.__name__, (ModelProblemsShown, form), {})

    def get_changelist_form(self, request: HttpRequest, **kwargs: Any) -> type[forms.ModelForm]:
        """Rows of list_editable outside the user's tenants (global rows shown read-only) cannot be edited."""
        base = super().get_changelist_form(request, **kwargs)  # type: ignore[misc]
        admin_self = self

        class ScopedChangelistForm(ModelProblemsShown, base):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **form_kwargs: Any) -> None:
                super().__init__(*args, **form_kwargs)
                if self.instance.pk is not None and not admin_self.in_tenant_scope(request, self.instance):
                    for field in self.fields.values():
                        field.disabled = True

        return ScopedChangelistForm

    def get_changelist_formset(self, request: HttpRequest, **kwargs: Any) -> Any:
        """An editable list's rows are named by ids among the rows shown here, as its forms choose related rows.

        Django checks each posted row id against every row of the model: another tenant's id passed, was taken for
        a new row and answered 400 where a missing id answered "Select a valid choice", which told that it exists.
        """
        base = super().get_changelist_formset(request, **kwargs)  # type: ignore[misc]
        shown = self.get_queryset(request)

        class ScopedChangelistFormSet(base):  # type: ignore[misc, valid-type]
            def add_fields(self, form: forms.Form, index: int | None) -> None:
                super().add_fields(form, index)
                row_id = form.fields.get(self._pk_field.name)
                if isinstance(row_id, forms.ModelChoiceField):
                    row_id.queryset = row_id.queryset.filter(pk__in=shown.values("pk"))

        return ScopedChangelistFormSet


class ModelProblemsShown(forms.ModelForm):
    """A model's ``clean()`` may find fault with a field this form does not edit: shown on the form, naming it.

    A field shown read-only, or left out of a list's editable columns, would otherwise be a server error.
    """

    def _update_errors(self, errors: ValidationError) -> None:
        if hasattr(errors, "error_dict"):
            kept: dict[str, list[Any]] = {}
            for field, messages in errors.error_dict.items():
                if field == NON_FIELD_ERRORS or field in self.fields:
                    kept.setdefault(field, []).extend(messages)
                else:
                    label = self._meta.model._meta.get_field(field).verbose_name
                    kept.setdefault(NON_FIELD_ERRORS, []).extend(
                        ValidationError(f"{str(label).capitalize()}: {message}")
                        for message in ValidationError(messages)
                    )
            errors = ValidationError(kept)
        super()._update_errors(errors)  # type: ignore[misc]


class _ScopedRawIdWidget(ForeignKeyRawIdWidget):
    """Django's raw id box, which names the row of any id typed in, naming only rows of ``queryset``."""

    def __init__(self, rel: Any, admin_site: Any, queryset: QuerySet[Any], **kwargs: Any) -> None:
        super().__init__(rel, admin_site, **kwargs)
        self.queryset = queryset

    def label_and_url_for_value(self, value: Any) -> tuple[str, str]:
        key = self.rel.get_related_field().name
        try:
            if not self.queryset.filter(**{key: value}).exists():
                return "", ""
        except (ValueError, TypeError, ValidationError):
            return "", ""
        return super().label_and_url_for_value(value)


class CrossTenantChangesOnly(ScopedDeletion, OpenableLinksOnly, GuardedLookups, StaleEditsRefused, CheckedJSONFields):
    """Platform-wide configuration: anyone with the view permission reads it, only boundary-crossers change it."""

    def _crosses_boundary(self, request: HttpRequest) -> bool:
        return tenant_scope(request.user).everything

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return self._crosses_boundary(request) and super().has_add_permission(request, *args)  # type: ignore[misc]

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self._crosses_boundary(request) and super().has_change_permission(request, obj)  # type: ignore[misc]

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self._crosses_boundary(request) and super().has_delete_permission(request, obj)  # type: ignore[misc]


class CrossTenantOnly(ScopedDeletion, GuardedLookups, StaleEditsRefused, CheckedJSONFields):
    """Pages for people who cross the boundary only (credentials, endpoints): absent for everyone else.

    Tenant-scoped staff never see the module, its list or its rows, whatever permissions they hold.
    """

    def _crosses_boundary(self, request: HttpRequest) -> bool:
        return tenant_scope(request.user).everything

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._crosses_boundary(request) and super().has_module_permission(request)  # type: ignore[misc]

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self._crosses_boundary(request) and super().has_view_permission(request, obj)  # type: ignore[misc]

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return self._crosses_boundary(request) and super().has_add_permission(request, *args)  # type: ignore[misc]

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self._crosses_boundary(request) and super().has_change_permission(request, obj)  # type: ignore[misc]

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self._crosses_boundary(request) and super().has_delete_permission(request, obj)  # type: ignore[misc]


def pretty_json(value: Any) -> str:
    """Render a JSON value as indented, escaped text for read-only admin fields."""
    return format_html('<pre class="toolhub-json">{}</pre>', json.dumps(value, indent=2, sort_keys=True, default=str))


class ProblemsColumn:
    """A "Problems" list column: why a configuration row names what the code does not have (``toolhub.references``).

    Found for the page's rows at once, under one read of the governance stamp and one of the registry's remote
    tools, so a longer page costs no more queries.
    """

    def row_problems(self, obj: Any) -> Mapping[str, str]:
        raise NotImplementedError

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        from toolhub.tools.registry import registry

        changelist = super().get_changelist_instance(request)  # type: ignore[misc]
        with governance_scope():
            registry.names()  # the remote tools, read once for the page whatever its rows name
            for row in changelist.result_list:
                row._toolhub_problems = self.row_problems(row)
        return changelist

    @admin.display(description="Problems")
    def problems(self, obj: Any) -> str:
        found = getattr(obj, "_toolhub_problems", None)
        problems = self.row_problems(obj) if found is None else found
        if not problems:
            return "-"
        return format_html_join(" ", '<span class="errornote toolhub-problem">{}: {}</span>', problems.items())


def admin_link(url_name: str, pk: Any, text: Any) -> str:
    """A link to another admin page, or plain text when that admin is not installed (the core imports no apps)."""
    try:
        url = reverse(url_name, args=[pk])
    except NoReverseMatch:
        return str(text)
    return format_html('<a href="{}">{}</a>', url, text)


def run_trail_link(run_id: Any) -> str:
    """A link to the audit events of a run (the list searched by its id): its calls' and its own, such as its saga's."""
    url = reverse("admin:toolhub_auditevent_changelist")
    return format_html('<a href="{}?{}">audit events of this run</a>', url, urlencode({"q": str(run_id)}))
