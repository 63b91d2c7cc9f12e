"""List filters whose choices never read every listed row, for the tables the platform writes as it runs.

Django draws a plain column's filter from the rows (``SELECT DISTINCT tool_name`` of every listed row) and a
foreign key's, with ``RelatedOnlyFieldListFilter``, from a ``DISTINCT`` of every row's key: on the calls, runs,
sagas or approval requests of a tenant each page would read them all. A list not declared ``small_table``
(:class:`toolhub.admin_lookups.GuardedLookups`) offers instead (:func:`row_free_filter`): a column's declared
choices, a boolean or a date as Django does (no rows read); for the tenant column the viewer's tenants, for a foreign
key the related admin's rows, that a listed row names (an ``EXISTS`` each, on an index); or else a box matched
exactly. A foreign key's ``EXISTS`` asks for the viewer's tenants' rows naming the related row: on the key's index
alone it walks every other tenant's rows naming it (a global agent's runs of globex, for acme's operator), so the
related rows are offered only where an index leads with the key then the tenant column (:func:`key_and_tenant_indexed`).

Each keeps Django's parameter (``?tool_name=``, ``?tenant__exact=``, ``?agent__id__exact=``), so a link made
before still filters, and each filters the tenant-scoped queryset only.
"""

from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db.models import BooleanField, DateField, Exists, Field, OuterRef, Q
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest

from toolhub.admin_lists import _other_parameters
from toolhub.admin_relations import ShownRelatedOnlyFieldListFilter
from toolhub.models import Tenant
from toolhub.tenancy import scoped

__all__ = [
    "AdminRowsRelatedFilter",
    "TypedValueFilter",
    "ViewerTenantsFilter",
    "key_and_tenant_indexed",
    "row_free_filter",
]


def row_free_filter(model_admin: Any, name: str) -> Any:
    """The list filter entry for ``name`` on a big table's list: one whose choices read none of its rows.

    Django's own filter when it reads none (choices, booleans, dates, a path through a relation: the related
    table's values).
    """
    field: Field = model_admin.model._meta.get_field(name)
    if field.is_relation:
        related_admin = model_admin.admin_site._registry.get(field.related_model)
        if hasattr(related_admin, "choosable_queryset") and key_and_tenant_indexed(model_admin, name):
            return (name, AdminRowsRelatedFilter)
        return (name, TypedValueFilter)
    if field.choices or isinstance(field, (BooleanField, DateField)):
        return name
    if name == getattr(model_admin, "tenant_field", None):
        return (name, ViewerTenantsFilter)
    return (name, TypedValueFilter)


def key_and_tenant_indexed(model_admin: Any, name: str) -> bool:
    """Whether an index of the list's table leads with the key ``name`` then its tenant column (when it has one).

    What finds a tenant's row naming a related row without reading another tenant's (``AdminRowsRelatedFilter``).
    """
    meta = model_admin.model._meta
    tenant = getattr(model_admin, "tenant_field", None)
    if tenant is None:
        return True
    if LOOKUP_SEP in tenant:
        return False  # the tenant is another table's: no index of this one holds it
    pairs = [index.fields for index in meta.indexes if index.condition is None]
    pairs += [c.fields for c in meta.constraints if getattr(c, "condition", True) is None and getattr(c, "fields", ())]
    return any([field.lstrip("-") for field in fields[:2]] == [name, tenant] for fields in pairs)


class AdminRowsRelatedFilter(ShownRelatedOnlyFieldListFilter):
    """A foreign key's filter offering the related admin's rows (``choosable_queryset``) that a listed row names.

    For each, an ``EXISTS`` that stops at the first listed row (on the key's index), never a ``DISTINCT`` of every
    listed row's key.
    """

    def field_choices(self, field: Any, request: HttpRequest, model_admin: Any) -> list[Any]:
        related_admin = model_admin.admin_site._registry[field.related_model]
        shown = related_admin.choosable_queryset(request).values("pk")
        listed = model_admin.get_queryset(request).order_by().filter(**{self.field_path: OuterRef("pk")})
        ordering = self.field_admin_ordering(field, request, model_admin)
        named = Q(pk__in=shown) & Q(Exists(listed))
        return field.get_choices(include_blank=False, ordering=ordering, limit_choices_to=named)  # type: ignore[no-any-return]


class ViewerTenantsFilter(admin.AllValuesFieldListFilter):
    """The tenant column's filter: the viewer's tenants (never another's) a listed row names, an ``EXISTS`` each.

    Not a ``DISTINCT`` of every listed row's tenant.
    """

    def __init__(
        self, field: Any, request: HttpRequest, params: Any, model: Any, model_admin: Any, field_path: str
    ) -> None:
        self.lookup_kwarg = field_path
        self.lookup_kwarg_isnull = f"{field_path}__isnull"
        self.lookup_val = params.get(self.lookup_kwarg)
        self.lookup_val_isnull = params.get(self.lookup_kwarg_isnull, [None])[-1]
        self.empty_value_display = model_admin.get_empty_value_display()
        listed = model_admin.get_queryset(request).order_by().filter(**{field_path: OuterRef("slug")})
        tenants = scoped(Tenant.objects.order_by("slug"), request.user, "slug").filter(Exists(listed))
        self.lookup_choices = list(tenants.values_list("slug", flat=True))
        admin.FieldListFilter.__init__(self, field, request, params, model, model_admin, field_path)


class TypedValueFilter(admin.FieldListFilter):
    """A box whose value the column must equal, for values too many to offer (a tool's name, an event)."""

    template = "admin/toolhub/input_filter.html"

    def __init__(
        self, field: Any, request: HttpRequest, params: Any, model: Any, model_admin: Any, field_path: str
    ) -> None:
        self.lookup_kwarg = field_path
        super().__init__(field, request, params, model, model_admin, field_path)
        values = [str(value).strip() for value in self.used_parameters.get(self.lookup_kwarg) or []]
        if any(values):
            self.used_parameters[self.lookup_kwarg] = values[-1:]
        else:
            self.used_parameters.pop(self.lookup_kwarg, None)  # an empty box filters nothing

    def expected_parameters(self) -> list[str]:
        return [self.lookup_kwarg]

    def choices(self, changelist: ChangeList) -> Any:
        value = self.used_parameters.get(self.lookup_kwarg) or [""]
        yield {
            "parameter": self.lookup_kwarg,
            "value": value[-1],
            "placeholder": self.field.verbose_name,
            "others": _other_parameters(changelist, [self.lookup_kwarg]),
            "clear": changelist.get_query_string(remove=[self.lookup_kwarg]),
        }
