"""Review cb (2026-12-06): names of another tenant's rows in texts composed for one tenant's readers.

Findings (fail on 5612690, pass after the fix):

1. The REST catalogue (``GET /api/v1/tools/``) answered each tool's ``group`` as stored: a tool of acme's group
   (its rules name acme only) that the platform granted to globex was listed to globex's members and developers
   with ``"group": "acme-payroll-secret"``, the name every globex admin page withholds (reviews ar, bx), and
   ``?group=acme-payroll-secret`` confirmed the name by answering the tool. The catalogue now names each group as
   its reader reads it (``toolhub.disclosure.groups.group_names_read`` with ``reader_group_namer``: the
   ``tenant_group_namer`` of bx, for a person's tenants) and a withheld name filters to nothing.

2. The catalogue's admin (``ToolDefinitionAdmin``) showed the same name to globex's developer in its group column,
   its group filter's choices and each tool's page, and ``?group=acme-payroll-secret`` listed the tool. Its column
   and page now name the group through ``group_names_read`` as the page's viewer reads it (the namer the admin
   binds), and ``CatalogueGroupFilter`` offers only the groups the viewer reads; a withheld name lists nothing.

3. (lead's integration) The catalogue admin's search matched a withheld group's name typed in ``?q=`` (its tool
   answered), and its group column sorted by the stored name. Within tenants, search leaves group names out and the
   column sorts nothing (``ToolDefinitionAdmin.get_search_fields`` / ``get_list_display``).

Checked and holds:
- review bx's fix: each chain's ``governance.*`` label names a grant's group as that tenant reads it
  (``tenant_group_namer``, which now takes several tenants, or ``None``/``""`` for the platform); the payload's
  values hold foreign keys as ids, and no governed model has a many-to-many to tool groups (``_name`` of M2M rows
  names roles and permissions only, which are shared).
- approvals: the e-mail, the webhook payload and ``approval.*`` events name the tool, the call's own tenant, its
  requester and agent, and the reason (a code rule's text or the matching rule, the call's tenant's or the
  platform's: ``rule_matches`` refuses another tenant's rule); approver and escalation groups come only from the
  tool groups that apply to the request's tenant (``_governing_groups``).
- ``call.*`` / ``run.*`` / ``saga.*`` events hold the call's own agent, user id, context, tool and redacted
  arguments; CSV/JSON trail exports copy those payloads.
- model-visible texts: unknown-tool suggestions come from the caller's visible or callable tools; the
  ``reset_equipped_tools`` refusal lists only groups eligible for the run; MCP ``toolhub_find_tools`` /
  ``toolhub_describe_tool`` "groups" are facades (code), granted ones only; tool search indexes no group name.
- a run's API/admin disclosure (``shown_state``) names only groups the principal may equip now.
"""

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User

from tests.helpers import console
from tests.security_review.conftest import client_for
from toolhub import tool
from toolhub.admin import ToolDefinitionAdmin
from toolhub.catalogue import tool_catalogue_sync
from toolhub.models import Grant, Tenant, ToolDefinition, ToolGroup
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

SECRET = "acme-payroll-secret"
WITHHELD = "a tool group of another tenant"
TOOLS = "/api/v1/tools/?page_size=500"
CATALOGUE = "/admin/toolhub/tooldefinition/"


@tool(group=SECRET, category="payroll")
def cb_payroll_total(month: str) -> str:
    """Total of a month's payroll."""
    return month


@pytest.fixture
def acme_only_group(tenant: Tenant, other_tenant: Tenant) -> Iterator[ToolGroup]:
    """acme's group (its rules name acme only), which the platform granted to globex too."""
    with registry.temporarily(cb_payroll_total):
        tool_catalogue_sync()
        group = ToolGroup.objects.create(name=SECRET, activation_rules=[{"tenants": ["acme"]}])
        Grant.objects.create(tool_group=group, tenant=other_tenant)
        yield group


def _listed(user: User, query: str = TOOLS) -> dict[str, dict]:
    answer = client_for(user).get(query)
    assert answer.status_code == 200, answer.content[:500]
    return {row["name"]: row for row in answer.json()["results"]}


def test_the_catalogue_names_no_tool_group_of_another_tenant(
    acme_only_group: ToolGroup, globex_user: User, globex_developer: User
) -> None:
    """Found: globex's member (the tools they may call) and developer (the whole catalogue) read the tool's
    ``"group": "acme-payroll-secret"``, and ``?group=acme-payroll-secret`` answered the tool.

    Expect: both read "a tool group of another tenant", the name nowhere in the answer, and filtering by the name
    answers nothing, as a group that does not exist does.
    """
    for reader in (globex_user, globex_developer):
        answer = client_for(reader).get(TOOLS)
        assert _listed(reader)["cb_payroll_total"]["group"] == WITHHELD
        assert SECRET not in answer.content.decode()
        assert _listed(reader, f"/api/v1/tools/?group={SECRET}") == {}
        assert _listed(reader, "/api/v1/tools/?group=no-such-group") == {}


def test_the_catalogue_names_a_group_its_reader_sees(acme_only_group: ToolGroup, alice: User, superuser: User) -> None:
    """Found: nothing (holds with the fix). Expect: acme's member and the platform read the group's name, and
    filter by it."""
    for reader in (alice, superuser):
        assert _listed(reader)["cb_payroll_total"]["group"] == SECRET
        assert set(_listed(reader, f"/api/v1/tools/?group={SECRET}")) == {"cb_payroll_total"}


def test_the_catalogue_admin_names_no_tool_group_of_another_tenant(
    acme_only_group: ToolGroup, globex_developer: User
) -> None:
    """Found: the catalogue's admin list (its group column and filter), a ``?group=`` address and the tool's page
    named "acme-payroll-secret" to globex's developer, whose tool group pages withhold it.

    Expect: the column and the tool's page read "a tool group of another tenant", the filter does not offer the
    group, and its name in the address lists no tool.
    """
    client = console(globex_developer)
    definition = ToolDefinition.objects.get(name="cb_payroll_total")

    listed = client.get(CATALOGUE)
    filtered = client.get(f"{CATALOGUE}?group={SECRET}")
    page = client.get(f"{CATALOGUE}{definition.pk}/change/")

    for answer in (listed, page):
        assert answer.status_code == 200
        assert SECRET not in answer.content.decode()
    assert WITHHELD in listed.content.decode() and WITHHELD in page.content.decode()
    # the address's own value is echoed back (its hidden field), as any typed name is; no tool answers it
    assert filtered.status_code == 200 and "cb_payroll_total" not in filtered.content.decode()


def test_the_catalogue_admin_names_the_group_to_those_who_see_it(acme_only_group: ToolGroup, superuser: User) -> None:
    """Found: nothing (holds with the fix). Expect: the platform reads, offers and filters by the group's name."""
    client = console(superuser)

    listed = client.get(CATALOGUE).content.decode()
    filtered = client.get(f"{CATALOGUE}?group={SECRET}").content.decode()

    assert f">{SECRET}</td>" in listed
    assert f"?group={SECRET}" in listed
    assert "cb_payroll_total" in filtered


def test_the_catalogue_admin_neither_searches_nor_sorts_by_a_withheld_group(
    acme_only_group: ToolGroup, globex_developer: User, superuser: User
) -> None:
    """Found (lead's integration of cb): globex's developer typed ``?q=acme-payroll-secret`` and the catalogue
    answered with the group's tool, confirming a guessed name; and the group column sorted by the stored name, so the
    withheld row's place among the others spelled its name out.

    Expect: their search does not look at group names and their group column sorts nothing (``?o=`` on it changes
    nothing); the platform still searches by group and reads its column (sorted only where an index serves it:
    review cc).
    """
    client = console(globex_developer)
    searched = client.get(f"{CATALOGUE}?q={SECRET}").content.decode()
    listed = client.get(CATALOGUE).content.decode()
    column = ToolDefinitionAdmin.list_display.index("group_read") + 1

    assert "cb_payroll_total" not in searched
    assert "cb_payroll_total" in client.get(f"{CATALOGUE}?q=cb_payroll").content.decode()
    assert "column-group_unsorted" in listed and "sortable column-group" not in listed
    assert client.get(f"{CATALOGUE}?o={column}").status_code == 200

    platform = console(superuser)
    assert "cb_payroll_total" in platform.get(f"{CATALOGUE}?q={SECRET}").content.decode()
    assert "column-group_read" in platform.get(CATALOGUE).content.decode()
