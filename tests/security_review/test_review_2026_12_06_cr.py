"""Review 2026-12-06 cr: the admin lists' counts, facets and filter choices on the tables the platform writes.

Review of reviews bs, cc, cf, cl and ci (indexed lookups and sorts, ``small_table``, the paused runs' lean list), as a
tenant's operator. Each finding's test failed on the reviewed code (main at ea55f42) and passes now.

Findings:

1. Beside their sorts and lookups, the lists of rows the platform writes as it runs (runs, approval requests, webhook
   deliveries, sagas, compensations; the demo's ledger and orders) still read every row of the viewer's tenants on
   each page: Django's paginator counted them all (``COUNT(*)``, review ci fixed that for the paused runs only), each
   plain-column list filter drew its choices from the rows (``SELECT DISTINCT tool_name`` of every approval request
   and compensation; ``event`` of every delivery; the saga's ``tenant``; a run's agent through a ``DISTINCT agent_id``
   of every run), and ``?_facets=1`` added one ``COUNT(...) FILTER`` over them all per filter. Fixed in the shared
   mechanism (``GuardedLookups``, ``toolhub.admin_choices``): a list not declared ``small_table`` counts within a bound
   (``EstimatedCountPaginator``, the estimate only for a viewer of every tenant), shows no facet counts, and its
   field filters offer choices that read none of its rows: a column's declared choices, the viewer's tenants, the
   related admin's rows a listed row names (an ``EXISTS`` per agent, on the key's index), or else a box matched
   exactly.

Checked and holding (probed or read, no test here unless said):
- Facet counts, list filter choices and the paginator's count are computed on the tenant-scoped queryset: no count,
  choice or name of another tenant reaches them (the facet probe above lists acme's rows only); a withheld tool
  group is not offered (``ShownRelatedOnlyFieldListFilter``), and its typed key answers as an unknown one.
- No admin declares ``date_hierarchy`` or ``autocomplete_fields``; Django's ``admin/autocomplete/`` still answers
  for any foreign key whose related admin has search fields, through that admin's scoped ``get_queryset`` and
  ``has_view_permission`` (tool groups: ``SharedInPart`` rows only; credentials and providers: ``CrossTenantOnly``).
- Config admins marked ``small_table`` (tenants, memberships, users, roles, tokens, catalogue, tool groups, grants,
  rules, agents, providers, remote MCP servers, tools, credentials) are rows people add one by one; the paused runs,
  calls, events, runs, approvals, deliveries, sagas, compensations and demo tables declare none.
- The REST lists take only their FilterSets' exact fields (``CallFilter``, ``ToolFilter``) on querysets cut to the
  caller's tenants first; no ``OrderingFilter`` or ``SearchFilter`` (review bs).
"""

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.selectors import pending_count
from tests.helpers import RequestCall, console
from tests.posture.test_admin_query_counts import ROWS, World
from toolhub.admin_helpers import TenantScopedAdmin
from toolhub.models import Tenant, TenantMembership

pytestmark = pytest.mark.postgres


def _written_as_it_runs() -> list[type[Model]]:
    """The tenant-scoped lists that declare no small table: rows the platform writes (calls, runs, sagas...)."""
    registry = admin.site._registry
    chosen = [m for m, ma in registry.items() if isinstance(ma, TenantScopedAdmin) and not ma.small_table]
    return sorted(chosen, key=lambda model: model._meta.label)


@pytest.fixture
def operator_world(tenant: Tenant, alice: User, request_call: RequestCall, committed: Callable[..., Any]) -> World:
    """acme's operator (the operators role, every view permission, no cross-tenant one) and how to add acme's rows."""
    call_command("toolhub_roles", verbosity=0)
    operator = User.objects.create_user("list-operator", is_staff=True)
    operator.groups.add(Group.objects.get(name="operators"))
    types = ContentType.objects.get_for_models(*admin.site._registry, for_concrete_models=False).values()
    operator.user_permissions.add(*Permission.objects.filter(content_type__in=types, codename__startswith="view_"))
    TenantMembership.objects.create(user=operator, tenant=tenant)
    return World(tenant=tenant, alice=alice, staff=operator, request_call=request_call, committed=committed)


def _reads_every_row(sql: str, table: str) -> bool:
    """A statement over ``table`` that reads all the rows it matches: an unbounded count or a DISTINCT of them."""
    if f'"{table}"' not in sql:
        return False
    unbounded_count = re.search(r"\bCOUNT\(", sql) is not None and " LIMIT " not in sql
    return unbounded_count or "DISTINCT" in sql


@pytest.mark.parametrize("model", _written_as_it_runs(), ids=lambda model: model._meta.label)
def test_a_list_of_rows_written_as_it_runs_reads_only_its_page(model: type[Model], operator_world: World) -> None:
    """Found: sagas, compensations, runs, approval requests, deliveries (and the demo's ledger, orders) counted every
    row of the viewer's tenants for each page, drew filter choices from a DISTINCT of them and, with ``?_facets=1``,
    counted them once per filter. Expect: a bounded count, no DISTINCT of the rows, no facet counts."""
    # given a few rows of acme in the list
    for index in range(3):
        ROWS[model](operator_world, index)
    client = console(operator_world.staff)
    with CaptureQueriesContext(connection) as desk_title:
        pending_count(operator_world.staff)  # the desk's title: the pending requests, on the status index
    title_sql = {query["sql"] for query in desk_title.captured_queries}
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")

    for query in ("", "?_facets=1"):
        # when acme's operator opens the list, with facets asked for or not
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url + query)

        # then it lists acme's rows, reading only a page of them and a bounded count
        assert response.status_code == 200
        assert len(response.context["cl"].result_list) >= 3
        table = model._meta.db_table
        statements = [q["sql"] for q in captured.captured_queries if q["sql"] not in title_sql]
        whole = [sql[:300] for sql in statements if _reads_every_row(sql, table)]
        assert whole == [], (url + query, whole)


@pytest.mark.parametrize("model", _written_as_it_runs(), ids=lambda model: model._meta.label)
def test_a_list_of_rows_written_as_it_runs_searches_on_an_index(model: type[Model], operator_world: World) -> None:
    """Found: the demo's accounts, ledger entries and orders (rows its tools write, no ``small_table``) searched with
    Django's ``icontains`` over each search field (``UPPER(product) LIKE '%term%'``): every row of the viewer's
    tenants read for any term. Expect: a term equals a search field an index serves, as ``ExactSearchMixin`` does."""
    # given a row of acme in the list
    ROWS[model](operator_world, 0)
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")

    # when acme's operator searches it
    with CaptureQueriesContext(connection) as captured:
        response = console(operator_world.staff).get(url, {"q": "widget"})

    # then no statement matches a pattern over its rows
    assert response.status_code == 200
    table = model._meta.db_table
    patterns = [q["sql"][:300] for q in captured.captured_queries if f'"{table}"' in q["sql"] and " LIKE " in q["sql"]]
    assert patterns == [], patterns
