"""What a list lets its query string ask (:class:`GuardedLookups`), and what it reads to answer: only its page.

Split from :mod:`toolhub.admin_helpers` (which re-exports it), the mixin every console admin shares.
"""

from typing import Any

from django.contrib.admin.filters import SimpleListFilter
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.core.paginator import Paginator
from django.db.models import Field, ForeignObjectRel, JSONField, Q, QuerySet
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest

from toolhub.admin_choices import row_free_filter
from toolhub.admin_indexes import compared_columns, fields_of, indexed_column, indexed_sorting
from toolhub.admin_lists import EstimatedCountPaginator
from toolhub.tenancy import tenant_scope

__all__ = ["INDEXED_LOOKUPS", "GuardedLookups"]


#: The lookups a list accepts from its query string beyond its declared filters: comparisons an index answers.
INDEXED_LOOKUPS = frozenset({"exact", "in", "isnull", "gt", "gte", "lt", "lte", "range"})


class GuardedLookups:
    """A list filters by what its page shows: never by a key inside a JSON column, never by a hidden field.

    Django's admin filters a list by any lookup on the model's own columns named in the query string
    (``?arguments__api_token__startswith=sk-``), and whether the list comes back empty answers a
    question about a value the pages withhold: a sensitive argument, another tenant's part of a shared
    row, an event's place in a shared chain. JSON columns (arguments, contexts, rules, results) are
    shown only redacted or cut down, so no lookup reaches into one unless a declared list filter does;
    ``hidden_lookups`` names the other fields the viewer does not see, and no lookup goes through a reverse
    relation (a user's API token or memberships) unless a declared list filter does. Django answers a refused lookup
    with 400 (``DisallowedModelAdminLookup``), and nothing is listed.

    Nor does a list (or an export of one) match by pattern: only comparisons an index answers
    (``INDEXED_LOOKUPS``) pass. ``?error__regex=(a|aa)*$`` or ``?error_detail__icontains=`` had the database
    read and match every row of the viewer's tenants, as long as the pattern made it, for each request; and
    only on a column an index holds (:func:`indexed_column`): ``?error__gt=`` or ``?raw_arguments=`` read them
    all as well.

    A foreign key to a row withheld from the viewer (a tool group of another tenant, ``shared_in_part_relations``)
    is filtered only through its list filter, which answers a withheld key like an unknown one:
    ``?tool_group=<id>`` (or ``__in``, ``__gt``) would tell which rows name the same withheld group, and bisect its id.

    Nor is a list sorted (``?o=``) by a column no index serves (:mod:`toolhub.admin_indexes`): that sort is skipped,
    as Django skips a ``?o=`` naming no sortable column, and the column's header is no link. A column of a
    multi-column index counts only when it leads it or follows columns the query string compares for equality.

    ``small_table``: the admin's table holds configuration people add row by row (tenants, users, grants, rules,
    agents), never rows the platform writes as it runs (calls, events, runs, approvals, sagas, deliveries): its list
    sorts by any column, as Django's does (the filters' rule stands). Declared on each configuration admin, no other.
    Any other list reads only its page: a bounded count (``EstimatedCountPaginator``), no facet counts
    (``IndexedSorting``), no date hierarchy, filter choices drawn from none of its rows (:mod:`toolhub.admin_choices`),
    and a search equal to an indexed search field (``get_search_results``). So does a list only people who cross the
    tenant boundary see (the login logs a password guesser fills): its rows are no fewer.
    """

    small_table: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.small_table:
            self.show_full_result_count = False  # "N total": a count of every row of the viewer's tenants
            self.date_hierarchy = None  # its links: a DISTINCT of every row's year, month or day

    def get_list_filter(self, request: HttpRequest) -> list[Any]:
        """A list not declared ``small_table`` offers filter choices reading none of its rows (``row_free_filter``)."""
        filters = list(super().get_list_filter(request))  # type: ignore[misc]
        if self.small_table:
            return filters
        return [
            row_free_filter(self, entry) if isinstance(entry, str) and "__" not in entry else entry for entry in filters
        ]

    def get_paginator(
        self, request: HttpRequest, queryset: QuerySet[Any], per_page: int, orphans: int = 0, **kwargs: Any
    ) -> Paginator:
        """A list not declared small counts within a bound; Django's paginator counts every row of the viewer's tenants.

        The planner's estimate counts every tenant's rows: only a viewer who sees them all reads it.
        """
        if self.small_table:
            return super().get_paginator(request, queryset, per_page, orphans, **kwargs)  # type: ignore[misc, no-any-return]
        estimate = tenant_scope(request.user).everything
        return EstimatedCountPaginator(queryset, per_page, orphans, estimate=estimate, **kwargs)

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[Any], search_term: str) -> tuple[Any, bool]:
        """A list not declared small matches a term equal to its search fields an index serves, never ``icontains``.

        Django's search is a LIKE over each search field: every row of the viewer's tenants read whatever the term.
        A field no index serves (an order's product) is left out; ``ExactSearchMixin`` says which ones explicitly. So is
        a field the term is no valid value of (a name for a login's address: PostgreSQL's ``inet`` would refuse it).
        """
        if self.small_table:
            return super().get_search_results(request, queryset, search_term)  # type: ignore[misc, no-any-return]
        term = search_term.strip()
        if not term:
            return queryset, False
        match = Q(pk__in=[])
        for name in self.get_search_fields(request):  # type: ignore[attr-defined]
            path = name.lstrip("^=@")
            fields = fields_of(self.model, path)  # type: ignore[attr-defined]
            if len(fields) != len(path.split(LOOKUP_SEP)) or not indexed_column(fields[-1]):
                continue
            try:
                match |= Q(**{path: fields[-1].clean(term, None)})  # a value it may hold, as its form would
            except ValidationError:
                continue
        return queryset.filter(match), False

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return indexed_sorting(super().get_changelist(request, **kwargs))  # type: ignore[misc]

    def hidden_lookups(self, request: HttpRequest) -> frozenset[str]:
        """The model's fields this viewer may not filter by (those their pages leave out)."""
        return frozenset()

    def lookup_allowed(self, lookup: str, value: Any, request: HttpRequest | None = None) -> bool:
        if not super().lookup_allowed(lookup, value, request):  # type: ignore[misc]
            return False
        fields = fields_of(self.model, lookup)  # type: ignore[attr-defined]
        if fields and request is not None and fields[0].name in self.withheld_relations(request):
            field = fields[0]
            return lookup in {f"{field.name}__{field.target_field.name}__exact", f"{field.name}__isnull"}
        if not fields or self._declared_filter(lookup, fields, request):
            return True
        if request is not None and fields[0].name in self.hidden_lookups(request):
            return False
        # Through a reverse relation (a user's API token, memberships, calls) a lookup reads rows the page does not
        # show: Django counts ``?auth_token__key__startswith=`` as local (the related row's primary key).
        if any(isinstance(field, ForeignObjectRel) for field in fields):
            return False
        if isinstance(fields[-1], JSONField):
            return False
        # The tenant column is compared on every row by the scope already (``TenantScopedAdmin.tenant_field``).
        scoping = fields[0].name == getattr(self, "tenant_field", "").split(LOOKUP_SEP)[0] and len(fields) == 1
        # A column a multi-column index holds after others counts when the query string compares those for equality.
        params = dict(request.GET.lists()) if request is not None and len(fields) == 1 else {}
        compared = compared_columns(self.model, params)  # type: ignore[attr-defined]
        if not (scoping or indexed_column(fields[-1], compared)):
            return False
        rest = lookup.split(LOOKUP_SEP)[len(fields) :]
        return not rest or (len(rest) == 1 and rest[0] in INDEXED_LOOKUPS)

    def withheld_relations(self, request: HttpRequest) -> frozenset[str]:
        """The foreign keys whose related rows this viewer sees only in part (filtered by their list filter only)."""
        return frozenset()

    def to_field_allowed(self, request: HttpRequest, to_field: str) -> bool:
        """A popup hands back a column of this model's, never a relation pointing at it (refused, 400).

        Django's own check reads ``primary_key`` of whatever ``_to_field`` names and raises on a reverse relation
        (``/admin/auth/group/?_to_field=user``): a 500 for a hand-made URL, not an answer.
        """
        try:
            field = self.model._meta.get_field(to_field)  # type: ignore[attr-defined]
        except FieldDoesNotExist:
            return False
        if isinstance(field, ForeignObjectRel):
            return False
        return bool(super().to_field_allowed(request, to_field))  # type: ignore[misc]

    def _declared_filter(self, lookup: str, fields: list[Field], request: HttpRequest | None) -> bool:
        """Whether ``lookup`` is a list filter's own parameter: the path of a field filter, or a simple filter's."""
        declared = self.get_list_filter(request) if request is not None else self.list_filter  # type: ignore[attr-defined]
        path = LOOKUP_SEP.join(field.name for field in fields)
        for item in declared:
            if isinstance(item, type) and issubclass(item, SimpleListFilter):
                if lookup == item.parameter_name:
                    return True
            elif (item[0] if isinstance(item, (list, tuple)) else item) == path:
                # A field filter's own links compare with an index too; a pattern on its column is no link of its.
                rest = lookup.split(LOOKUP_SEP)[len(fields) :]
                return not rest or (len(rest) == 1 and rest[0] in INDEXED_LOOKUPS)
        return False
