"""What an index of a list's table serves: the columns a list compares (``GuardedLookups``) and sorts by.

A comparison or a sort on a column no index holds reads every row of the viewer's tenants for each page. Django's
admin sorts a list by any column of ``list_display`` named in ``?o=`` (its ``sortable_by`` only hides the header's
link), so here a list sorts only by a column an index serves (:func:`sorts_on_index`), and its headers link only
those. A sort it refuses is skipped, as Django skips a ``?o=`` naming no column or one with no ``admin_order_field``
(200, not 400: a bookmarked sort outlives a column's index), and when no part of ``?o=`` is kept the list keeps its
default ordering, as without one.

An index serves a column it leads with, or one right after columns the query string compares for equality
(``?chain=3`` then ``seq``: :func:`compared_columns`): a B-tree on ``(saga, sequence)`` orders and ranges
``sequence`` within one saga only, and read for ``sequence`` alone it is a scan of every row. The tenant scope is no
such equality: a viewer of several tenants compares ``tenant IN (...)``, and one who sees every tenant none.

A configuration table (tenants, users, grants, rules, agents: rows people add one by one, never a backlog the
platform writes) declares itself small on its admin (``small_table = True``, :class:`GuardedLookups`): its list
sorts by any column Django would, a few hundred rows sorted for each page. A relation the viewer sees only in part
is still no sort: its column names the row or withholds it (``ShownRelation``) and has no order field.
"""

from collections.abc import Collection, Mapping
from functools import cache
from typing import Any

from django.contrib.admin.views.main import ORDER_VAR, ChangeList
from django.core.exceptions import FieldDoesNotExist
from django.db.models import F, Field, ForeignObjectRel, Model, OrderBy, QuerySet
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest

__all__ = [
    "IndexedSorting",
    "compared_columns",
    "fields_of",
    "indexed_column",
    "indexed_sorting",
    "sorts_on_index",
]


def indexed_column(field: Field, compared: Collection[str] = ()) -> bool:
    """Whether an index of its table (not a partial one) serves ``field``'s column: a comparison on it reads no scan.

    A multi-column index serves the column it leads with, and a later one only when the query compares every column
    before it for equality (``compared``, the model's field names: :func:`compared_columns`).
    """
    if field.primary_key or field.unique or field.db_index:
        return True
    meta = field.model._meta
    indexed = [index.fields for index in meta.indexes if index.condition is None]
    unique = [c.fields for c in meta.constraints if getattr(c, "condition", True) is None and getattr(c, "fields", ())]
    for names in (*indexed, *unique, *meta.unique_together):
        columns = [name.lstrip("-") for name in names]
        if field.name in columns and all(name in compared for name in columns[: columns.index(field.name)]):
            return True
    return False


def compared_columns(model: type[Model], params: Mapping[str, list[str]]) -> frozenset[str]:
    """The names of ``model``'s own columns a list's query string compares for equality, to one value each.

    ``?chain=3``, ``?chain__exact=3``, a foreign key's ``?saga__id__exact=7``; two values (``?chain=3&chain=4``) are
    an OR, no equality an index orders by.
    """
    compared = set()
    for lookup, values in params.items():
        fields = fields_of(model, lookup)
        if len(values) != 1 or not fields or isinstance(fields[0], ForeignObjectRel) or not fields[0].concrete:
            continue
        rest = lookup.split(LOOKUP_SEP)[len(fields) :]
        if rest not in ([], ["exact"]):
            continue
        first = fields[0]
        if len(fields) == 1 or (len(fields) == 2 and first.is_relation and fields[1] == first.target_field):  # type: ignore[attr-defined]
            compared.add(first.name)
    return frozenset(compared)


def fields_of(model: type[Model], lookup: str) -> list[Field]:
    """The fields ``lookup`` goes through, as the query walks it (what follows the last is a transform).

    ``pk`` is the primary key field, as the query reads it (Django's admin lets it through as no field at all): a
    token's is its key, which ``?pk__startswith=`` would read back as ``?key__startswith=`` does.
    """
    fields: list[Field] = []
    for part in lookup.split(LOOKUP_SEP):
        try:
            field = model._meta.pk if part == "pk" else model._meta.get_field(part)
        except FieldDoesNotExist:
            break
        fields.append(field)  # type: ignore[arg-type]
        if not getattr(field, "path_infos", None):
            break
        model = field.path_infos[-1].to_opts.model  # type: ignore[union-attr]
    return fields


def sorts_on_index(model: type[Model], order_field: Any, compared: Collection[str] = ()) -> bool:
    """Whether sorting ``model``'s rows by ``order_field`` (a column's ``admin_order_field``) reads an index.

    Through a relation the last field counts (``run__created_at``: the run's index). A foreign key sorts by the
    related model's own ordering when it has one (a join and a sort of every row), so only one without counts; a
    reverse relation, a path that does not end on a field, or an expression is refused. ``compared``: the columns
    the list's query string compares for equality (:func:`indexed_column`).
    """
    if isinstance(order_field, OrderBy):
        order_field = order_field.expression
    if isinstance(order_field, F):
        order_field = order_field.name
    if not isinstance(order_field, str):
        return False
    path = order_field.removeprefix("-")
    fields = fields_of(model, path)
    if not fields or len(fields) != len(path.split(LOOKUP_SEP)):
        return False
    if any(isinstance(field, ForeignObjectRel) for field in fields):
        return False
    last = fields[-1]
    if last.is_relation and last.related_model._meta.ordering:  # type: ignore[union-attr]
        return False
    return indexed_column(last, compared if len(fields) == 1 else ())


class IndexedSorting(ChangeList):
    """A change list sorted only by the columns of its ``sortable_by`` that an index serves; only those link.

    A small table's list (its admin's ``small_table``) sorts by every column Django would; any other shows no facet
    counts (``?_facets=1``: a ``COUNT`` of every row of the viewer's tenants per filter).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not getattr(self.model_admin, "small_table", False):
            self.add_facets = self.is_facets_optional = False
        if self.sortable_by is not None:
            self.sortable_by = [name for name in self.sortable_by if self.get_ordering_field(name)]

    def get_ordering(self, request: HttpRequest, queryset: QuerySet[Any]) -> list[Any]:
        """The list's ordering, ``?o=`` kept only where it names a column it sorts by (none kept: its default)."""
        if ORDER_VAR in self.params:
            kept = [part for part in str(self.params[ORDER_VAR]).split(".") if self._sorts_by(part)]
            if kept:
                self.params[ORDER_VAR] = ".".join(kept)
            else:
                del self.params[ORDER_VAR]
        return super().get_ordering(request, queryset)

    def _sorts_by(self, part: str) -> bool:
        try:
            return bool(self.get_ordering_field(self.list_display[int(part.rpartition("-")[2])]))
        except (IndexError, ValueError):
            return False

    def get_ordering_field(self, field_name: Any) -> Any:
        """The column's order field, or None (Django skips the column) when its sort is refused."""
        if self.sortable_by is not None and field_name not in self.sortable_by:
            return None
        try:
            order_field = super().get_ordering_field(field_name)
        except AttributeError:
            return None
        if not order_field:
            return None
        if getattr(self.model_admin, "small_table", False):
            return order_field
        compared = compared_columns(self.model, self.filter_params)
        return order_field if sorts_on_index(self.model, order_field, compared) else None


@cache
def indexed_sorting(base: type[ChangeList]) -> type[ChangeList]:
    """``base`` sorted only on indexes (itself, when it is already)."""
    if issubclass(base, IndexedSorting):
        return base
    return type(f"IndexedSorting{base.__name__}", (IndexedSorting, base), {})
