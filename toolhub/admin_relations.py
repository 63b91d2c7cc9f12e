"""How a console page names a related row: as a link only when the viewer may open it, withheld when not theirs.

A shared table each tenant sees only part of (tool groups bound to some tenants, :class:`SharedInPart`) is
withheld wherever a tenant-scoped page names one of its rows; any other related row is named as text, not as a
link, when the viewer may not open its page (:class:`OpenableLinksOnly`).
"""

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.db.models import Field, Model, QuerySet
from django.http import HttpRequest
from django.utils.text import capfirst

from toolhub.tenancy import tenant_scope
from toolhub.withheld_names import withheld_label

__all__ = [
    "OpenableLinksOnly",
    "SharedInPart",
    "ShownRelatedOnlyFieldListFilter",
    "ShownRelation",
    "swapped_fieldsets",
    "withheld_namer",
]


class SharedInPart:
    """Mixed into the admin of a platform-wide table each tenant sees only part of (tool groups bound to tenants).

    Its ``get_queryset`` says which rows a viewer sees. A row it leaves out is withheld wherever another
    admin names it through a foreign key: that admin's form chooses among the rows shown
    (``choosable_queryset``), and a :class:`TenantScopedAdmin` list column, list filter and read-only
    field show :meth:`withheld_label` instead of the row's name or a link to it.
    """

    def choosable_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        """The rows another admin's form may point at (a foreign key to this model): those shown here."""
        return self.get_queryset(request)  # type: ignore[attr-defined, no-any-return]

    def shown_pks(self, request: HttpRequest) -> frozenset[Any] | None:
        """The keys of the rows the user sees (``None``: every row), read once per request."""
        if tenant_scope(request.user).everything:
            return None
        cache: dict[str, frozenset[Any]] = request.__dict__.setdefault("_toolhub_shown_in_part", {})
        label = self.model._meta.label  # type: ignore[attr-defined]
        if label not in cache:
            cache[label] = frozenset(self.get_queryset(request).values_list("pk", flat=True))  # type: ignore[attr-defined]
        return cache[label]

    def withheld_label(self) -> str:
        """What a page shows for a row the user may not see: its kind, never its name."""
        return withheld_label(self.model)  # type: ignore[attr-defined]


def withheld_namer(site: Any, request: HttpRequest) -> Callable[[Any], str | None]:
    """What ``request``'s viewer reads for a row: a :class:`SharedInPart` row they may not see, by its kind only.

    Bound for each admin page (``toolhub.withheld_names``), so a name composed from the row's (a grant's) withholds
    it as the page's columns do.
    """

    def name(row: Any) -> str | None:
        shared = site._registry.get(row._meta.model)
        if not isinstance(shared, SharedInPart) or row.pk is None or not request.user.is_authenticated:
            return None
        shown = shared.shown_pks(request)
        return None if shown is None or row.pk in shown else shared.withheld_label()

    return name


class ShownRelation:
    """A foreign key shown as text (a list column, a read-only field), never as a link to the related row's page.

    For a :class:`SharedInPart` row (``shown``: the keys the user sees) the row is named only if the user sees
    it, else ``label`` says it is withheld; with ``shown=None`` the row is always named. Named like the field
    (its column and CSS class stay ``tool_group``); equal for one field, so that the fieldsets and the
    read-only fields of one page name the same one.
    """

    def __init__(
        self, field: "Field[Any, Any]", shown: frozenset[Any] | None, label: str = "", empty: str = "-"
    ) -> None:
        self.field, self.shown, self.label, self.empty = field, shown, label, empty
        self.__name__ = field.name
        self.short_description = capfirst(field.verbose_name)

    def withholds(self, obj: Model) -> bool:
        value = getattr(obj, self.field.attname)
        return self.shown is not None and value is not None and value not in self.shown

    def __call__(self, obj: Model) -> str:
        if getattr(obj, self.field.attname) is None:
            # The admin's empty value, as Django draws an empty foreign key: a read-only callable's None reads "None".
            return self.empty
        return self.label if self.withholds(obj) else str(getattr(obj, self.field.name))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShownRelation) and other.field is self.field

    def __hash__(self) -> int:
        return hash((ShownRelation, self.field.name))


class ShownRelatedOnlyFieldListFilter(admin.RelatedOnlyFieldListFilter):
    """The related rows found among the rows listed, less those of a :class:`SharedInPart` admin the user may not see.

    Nor does a typed-in key of such a row filter anything: the list answers like an unknown value.
    """

    def __init__(
        self, field: Any, request: HttpRequest, params: Any, model: Any, model_admin: Any, field_path: str
    ) -> None:
        self._model_admin = model_admin
        super().__init__(field, request, params, model, model_admin, field_path)

    def _shown(self, request: HttpRequest, model_admin: Any) -> frozenset[Any] | None:
        relation = model_admin.shared_in_part_relations(request).get(self.field_path)
        return None if relation is None else relation.shown

    def field_choices(self, field: Any, request: HttpRequest, model_admin: Any) -> list[Any]:
        choices = super().field_choices(field, request, model_admin)
        shown = self._shown(request, model_admin)
        return choices if shown is None else [(pk, label) for pk, label in choices if pk in shown]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        shown = self._shown(request, self._model_admin)
        typed = self.lookup_val if isinstance(self.lookup_val, list) else [self.lookup_val]
        if shown is not None and any(v is not None and str(v) not in {str(pk) for pk in shown} for v in typed):
            return queryset.none()
        return super().queryset(request, queryset)


def swapped_fieldsets(fieldsets: Any, swaps: dict[str, ShownRelation]) -> Any:
    """``fieldsets`` with each field named in ``swaps`` (by name, or swapped already) replaced by its swap."""
    if not swaps:
        return fieldsets
    seen: set[Any] = set()

    def swap(fields: Any) -> list[Any]:
        swapped: list[Any] = []
        for name in fields:
            if isinstance(name, (list, tuple)):
                swapped.append(tuple(swap(name)))
                continue
            key = name if isinstance(name, str) else getattr(name, "__name__", None)
            name = swaps.get(key, name) if isinstance(key, str) else name
            if name not in seen:
                seen.add(name)
                swapped.append(name)
        return swapped

    return [(title, {**options, "fields": swap(options.get("fields", ()))}) for title, options in fieldsets]


class OpenableLinksOnly:
    """A page links a related row only when the viewer may open that row's page; otherwise it names it as text.

    Django renders every read-only foreign key as a link to the related row's change page, whatever the viewer
    may open: a call's, run's or request's user, a request's approver group, an agent's model provider
    answered 403 to the roles that read them. Such a field is shown by :class:`ShownRelation` instead.
    """

    def unopenable_relations(self, request: HttpRequest, obj: Model | None) -> dict[str, ShownRelation]:
        """The read-only foreign keys of ``obj`` to a model whose pages the viewer may not open."""
        if obj is None:
            return {}
        readonly = None
        if self.has_change_permission(request, obj):  # type: ignore[attr-defined]
            readonly = set(super().get_readonly_fields(request, obj))  # type: ignore[misc]
        relations: dict[str, ShownRelation] = {}
        for field in self.model._meta.get_fields():  # type: ignore[attr-defined]
            if not (field.many_to_one and field.concrete) or (readonly is not None and field.name not in readonly):
                continue
            related_admin = self.admin_site._registry.get(field.related_model)  # type: ignore[attr-defined]
            if related_admin is not None and not related_admin.has_view_or_change_permission(request):
                empty = self.get_empty_value_display()  # type: ignore[attr-defined]
                relations[field.name] = ShownRelation(field, None, empty=empty)
        return relations

    def get_fieldsets(self, request: HttpRequest, obj: Model | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)  # type: ignore[misc]
        return swapped_fieldsets(fieldsets, self.unopenable_relations(request, obj))

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        readonly = super().get_readonly_fields(request, obj)  # type: ignore[misc]
        unopenable = self.unopenable_relations(request, obj)
        return (*readonly, *unopenable.values()) if unopenable else readonly
