"""Admin change lists that stay fast on tables of millions of rows.

Django's defaults each cost a scan per page on a big table: the paginator's filtered ``COUNT(*)``,
``list_filter`` on a plain column (``SELECT DISTINCT`` over the table), ``icontains`` search, and
fetching every column (JSON included) of the listed rows. Here instead: a paginator that counts at
most a bounded number of rows (and, for a viewer who sees every tenant, otherwise takes the planner's
estimate), filters whose choices come
from the catalogue and the tenants (never from the rows), typed-in filters matched exactly on an
index, sorts only by a column an index holds (:mod:`toolhub.admin_indexes`), and change lists that fetch only
the columns they show.
"""

import datetime as dt
import json
import uuid
from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_user_model
from django.core.paginator import EmptyPage, Page, PageNotAnInteger, Paginator
from django.db import connections
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.dateparse import parse_date
from django.utils.functional import cached_property

from toolhub.admin_indexes import IndexedSorting
from toolhub.disclosure.groups import group_names_read
from toolhub.models import RiskLevel, Tenant, ToolDefinition
from toolhub.tenancy import scoped, tenant_scope

__all__ = [
    "BoundedCount",
    "EstimatedCount",
    "EstimatedCountPaginator",
    "LeanChangeListMixin",
    "CatalogueGroupFilter",
    "CatalogueToolFilter",
    "RiskFilter",
    "TenantFilter",
    "AgentFilter",
    "UsernameFilter",
    "DateRangeFilter",
    "ExactSearchMixin",
    "as_uuid",
    "tools_with_risk",
]

#: A list the planner expects to hold at most this many rows is counted exactly (a bounded count).
EXACT_COUNT_LIMIT = 10_000


#: The furthest row a page may start at: PostgreSQL's ``OFFSET`` is a bigint, past it the query fails (a 500).
MAX_OFFSET = 2**63 - 1


class BoundedCount(int):
    """A count that stopped past :data:`EXACT_COUNT_LIMIT`: pages are numbered by it, the list reads "more than".

    Not the rows' number: every page past it opens (empty after the last row), and "select all" says "more than".
    """

    def __str__(self) -> str:
        return f"more than {EXACT_COUNT_LIMIT:,}"


class EstimatedCount(BoundedCount):
    """The planner's estimate of a long list: it may fall short of the rows, so it bounds no page ("about")."""

    def __str__(self) -> str:
        return f"about {int(self):,}"


class EstimatedCountPaginator(Paginator):
    """Counts a list exactly up to a bound; past it, takes PostgreSQL's planner estimate if ``estimate``.

    Never more than :data:`EXACT_COUNT_LIMIT` + 1 rows are counted, whatever the table's size; the
    estimate costs one EXPLAIN instead. It comes from the whole table's statistics (every tenant's rows),
    so only a viewer who sees every tenant may read it: anyone else would learn how many rows another
    tenant has (:meth:`LeanChangeListMixin.get_paginator`). A long list's page numbers are approximate,
    which nobody paging through a million calls notices.
    """

    def __init__(self, *args: Any, estimate: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.estimate = estimate

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if not isinstance(queryset, QuerySet):
            return super().count
        if self.estimate:
            estimate = _planner_estimate(queryset)
            if estimate > EXACT_COUNT_LIMIT:
                return EstimatedCount(estimate)
        bounded = queryset.order_by()[: EXACT_COUNT_LIMIT + 1].count()
        return bounded if bounded <= EXACT_COUNT_LIMIT else BoundedCount(bounded)

    def validate_number(self, number: Any) -> int:
        """Past a bounded count every page number opens (empty after the last row): the rows go on beyond it."""
        if not isinstance(self.count, BoundedCount):
            return super().validate_number(number)
        try:
            if isinstance(number, float) and not number.is_integer():
                raise ValueError
            number = int(number)
        except (TypeError, ValueError):
            raise PageNotAnInteger(self.error_messages["invalid_page"]) from None
        if number < 1:
            raise EmptyPage(self.error_messages["min_page"])
        if (number - 1) * self.per_page > MAX_OFFSET:
            raise EmptyPage(self.error_messages["no_results"])
        return number

    def page(self, number: Any) -> Page:
        """A page of a list counted past its bound is sliced as asked, not cut at the count."""
        if not isinstance(self.count, BoundedCount):
            return super().page(number)
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        return self._get_page(self.object_list[bottom : bottom + self.per_page], number, self)


def _planner_estimate(queryset: QuerySet[Any]) -> int:
    """The rows PostgreSQL expects ``queryset`` to return (0 elsewhere)."""
    if connections[queryset.db].vendor != "postgresql":
        return 0
    try:
        plan = json.loads(queryset.order_by().explain(format="json"))
    except (ValueError, TypeError):
        return 0
    return int(plan[0]["Plan"]["Plan Rows"])


class _LeanChangeList(IndexedSorting):
    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet[Any]:
        queryset = super().get_queryset(request, exclude_parameters)
        only = getattr(self.model_admin, "list_only_fields", None)
        return queryset.only(*only) if only else queryset


class LeanChangeListMixin:
    """A change list that fetches ``list_only_fields`` (when set), counts cheaply and shows no facet counts."""

    list_only_fields: tuple[str, ...] = ()
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return _LeanChangeList

    def get_paginator(
        self, request: HttpRequest, queryset: QuerySet[Any], per_page: int, orphans: int = 0, **kwargs: Any
    ) -> Paginator:
        """The planner's estimate counts every tenant's rows: only a viewer who sees them all reads it."""
        estimate = tenant_scope(request.user).everything
        return self.paginator(queryset, per_page, orphans, estimate=estimate, **kwargs)


class ExactSearchMixin:
    """``?q=`` equal to an indexed column, never Django's ``icontains`` over each search field.

    A LIKE over free text (a run's input, a request's reason) reads every row of the viewer's tenants whatever the
    term, and a term matching nothing reads them all: no minimum length bounds that. ``uuid_search_fields``: the
    columns a term that is a UUID equals; ``exact_search_fields``: those the whole term equals (indexed, or a
    relation's indexed column). Declare ``search_fields`` too, for Django to draw the box.
    """

    uuid_search_fields: tuple[str, ...] = ()
    exact_search_fields: tuple[str, ...] = ()

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[Any], search_term: str) -> tuple[Any, bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        key = as_uuid(term)
        match = Q(pk__in=[])
        for field in self.uuid_search_fields if key is not None else ():
            match |= Q(**{field: key})
        for field in self.exact_search_fields:
            match |= Q(**{field: term})
        return queryset.filter(match), False


def as_uuid(value: str) -> uuid.UUID | None:
    """``value`` as a UUID, or None when it is not one (search terms)."""
    try:
        return uuid.UUID(value.strip())
    except (ValueError, AttributeError):
        return None


def tools_with_risk(risk: str) -> list[str]:
    """The catalogue's tools whose effective risk (an operator's override, else the code's) is ``risk``."""
    return [
        name
        for name, declared, override in ToolDefinition.objects.values_list("name", "risk", "risk_override")
        if (override or declared) == risk
    ]


class CatalogueToolFilter(admin.SimpleListFilter):
    """By tool, offered from the catalogue instead of a DISTINCT scan of the calls."""

    title = "tool"
    parameter_name = "tool"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(name, name) for name in ToolDefinition.objects.order_by("name").values_list("name", flat=True)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(tool_name=self.value()) if self.value() else queryset


class CatalogueGroupFilter(admin.SimpleListFilter):
    """By the tools' group, offering only the groups the viewer reads (``group_names_read``).

    A group whose rules name only other tenants is not offered, and its name in the address matches nothing, as
    a group that does not exist.
    """

    title = "group"
    parameter_name = "group"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        named = ToolDefinition.objects.exclude(group="").order_by("group").values_list("group", flat=True).distinct()
        read = group_names_read(list(named))
        return [(name, name) for name, shown in read.items() if shown == name]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value:
            return queryset
        if group_names_read([value]).get(value) != value:
            return queryset.none()
        return queryset.filter(group=value)


class RiskFilter(admin.SimpleListFilter):
    """By the tool's effective risk in the catalogue (the calls of those tools, on the tool index)."""

    title = "risk"
    parameter_name = "risk"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return list(RiskLevel.choices)

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() not in RiskLevel.values:
            return queryset
        return queryset.filter(tool_name__in=tools_with_risk(self.value()))


class TenantFilter(admin.SimpleListFilter):
    """By tenant, offered from the viewer's own tenants (never another tenant's name)."""

    title = "tenant"
    parameter_name = "tenant"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        tenants = scoped(Tenant.objects.order_by("slug"), request.user, "slug")
        return [(slug, slug) for slug in tenants.values_list("slug", flat=True)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(tenant=self.value()) if self.value() else queryset


class InputFilter(admin.SimpleListFilter):
    """A filter typed into a box and matched exactly (on an index), for values too many to list."""

    template = "admin/toolhub/input_filter.html"
    placeholder = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("", "")]  # has_output(): the box is always shown

    def choices(self, changelist: ChangeList) -> Any:
        yield {
            "parameter": self.parameter_name,
            "value": self.value() or "",
            "placeholder": self.placeholder,
            "others": _other_parameters(changelist, [self.parameter_name]),
            "clear": changelist.get_query_string(remove=[self.parameter_name]),
        }


def _other_parameters(changelist: ChangeList, own: list[str]) -> list[tuple[str, str]]:
    """The list's other query parameters, kept as hidden fields when one filter's box is submitted."""
    kept = []
    for key, value in changelist.filter_params.items():
        if key in own or key in ("p", "all", "_facets"):
            continue
        for item in value if isinstance(value, list) else [value]:
            kept.append((key, str(item)))
    return kept


class AgentFilter(InputFilter):
    title = "agent"
    parameter_name = "agent"
    placeholder = "agent name"
    field = "agent_name"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = (self.value() or "").strip()
        return queryset.filter(**{self.field: value}) if value else queryset


class UsernameFilter(InputFilter):
    """By the user the call was made for, named by username (resolved to an id once)."""

    title = "user"
    parameter_name = "user"
    placeholder = "username"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = (self.value() or "").strip()
        if not value:
            return queryset
        users = get_user_model().objects.filter(username=value).values_list("pk", flat=True)
        return queryset.filter(user_id__in=list(users))


class DateRangeFilter(admin.ListFilter):
    """Created from one day up to another (inclusive), on the ``created_at`` index."""

    title = "date range"
    template = "admin/toolhub/date_range_filter.html"
    field = "created_at"
    parameters = ("created_from", "created_to")

    def __init__(self, request: HttpRequest, params: dict[str, Any], model: Any, model_admin: Any) -> None:
        super().__init__(request, params, model, model_admin)
        for name in self.parameters:
            if name in params:
                self.used_parameters[name] = params.pop(name)[-1]

    def has_output(self) -> bool:
        return True

    def expected_parameters(self) -> list[str]:
        return list(self.parameters)

    def bounds(self) -> tuple[dt.datetime | None, dt.datetime | None]:
        """The range as aware datetimes (the end exclusive); a malformed day is ignored.

        A day at the calendar's edge (``0001-01-01``, ``9999-12-31``) bounds nothing: its midnight, or the day after
        it, is past what a datetime holds, and the range it names holds every row anyway.
        """
        start = self._day(self.used_parameters.get(self.parameters[0]))
        end = self._day(self.used_parameters.get(self.parameters[1]), days_after=1)
        return start, end

    @staticmethod
    def _day(value: str | None, *, days_after: int = 0) -> dt.datetime | None:
        try:
            day = parse_date(value or "")
        except ValueError:
            return None
        if day is None:
            return None
        try:
            return timezone.make_aware(dt.datetime.combine(day, dt.time.min) + dt.timedelta(days=days_after))
        except OverflowError:
            return None

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        start, end = self.bounds()
        if start:
            queryset = queryset.filter(**{f"{self.field}__gte": start})
        if end:
            queryset = queryset.filter(**{f"{self.field}__lt": end})
        return queryset

    def choices(self, changelist: ChangeList) -> Any:
        yield {
            "values": [(name, self.used_parameters.get(name, "")) for name in self.parameters],
            "others": _other_parameters(changelist, list(self.parameters)),
            "clear": changelist.get_query_string(remove=list(self.parameters)),
        }
