"""Review 2026-12-06 (ar): the admin's tenant boundary on its less-travelled pages, as a tenant's staff.

Finding (fails before the fix, passes with it):

1. A grant's own name (``Grant.__str__``: "allow group <tool group> to globex") named a tool group whose rules
   name only another tenant, which every column and field of the page withholds ("a tool group of another
   tenant"): the grant list's first column, its select box's label, the change and history pages' titles and
   breadcrumbs. A tool group is now named, anywhere an admin page composes a name, as the viewer may read it
   (``toolhub.withheld_names``, bound per request by ``ToolhubAdminSite.admin_view``).

Checked and holds (a crawl of every page linked from the index, as a globex staff member holding every
permission but ``toolhub.cross_tenant``, with acme's provider, remote MCP server and credential, rule, grant,
tool groups, approval request, saga, run and Django admin history entries in the database): changelists with
``_facets=1``, ``e=1``, ``_popup=1&_to_field=id``, ``o=`` on every column; the autocomplete view for every
relation of every registered model (403 or this tenant's rows only); acme's change, history and delete pages
(answered as missing); list filter choices (only values among the rows shown); add forms (only this tenant's
choices); no model provider, remote server or credential variable name of acme anywhere; no server error.
A grant or rule naming a group withheld from the viewer is read-only to them, deletion included (403). Platform
staff still read the group's name.
"""

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from approvals.models import ApprovalRule
from tests.tenancy.conftest import make_user
from toolhub.models import Grant, Tenant, ToolGroup

pytestmark = pytest.mark.django_db

WITHHELD = "a tool group of another tenant"


@pytest.fixture
def acme_only_group(tenant: Tenant) -> ToolGroup:
    """A tool group for acme alone: its rules name acme, so globex's staff do not see it."""
    return ToolGroup.objects.create(name="acme-payroll-secret", activation_rules=[{"tenants": ["acme"]}])


def _pages(client: Client, grant: Grant) -> dict[str, str]:
    urls = {
        "list": reverse("admin:toolhub_grant_changelist"),
        "change": reverse("admin:toolhub_grant_change", args=[grant.pk]),
        "history": reverse("admin:toolhub_grant_history", args=[grant.pk]),
    }
    pages = {}
    for name, url in urls.items():
        response = client.get(url)
        assert response.status_code == 200, (name, response.status_code)
        pages[name] = response.content.decode()
    return pages


def test_a_grant_names_no_tool_group_of_another_tenant(
    acme_only_group: ToolGroup, other_tenant: Tenant, globex_developer: User
) -> None:
    """Found: globex's grant of acme's group (set by the platform) was titled "allow group acme-payroll-secret to
    globex" on its list, change and history pages, though its tool group column said "a tool group of another
    tenant". Expect: no globex page names the group; each says what the columns say."""
    grant = Grant.objects.create(tool_group=acme_only_group, tenant=other_tenant, set_by_platform=True)
    client = Client()
    client.force_login(globex_developer)
    for name, body in _pages(client, grant).items():
        assert acme_only_group.name not in body, name
        assert f"allow group {WITHHELD} to globex" in body, name
    # Holds: one of globex's own naming the group (open to globex when granted) is read-only to them, deletion too.
    own = Grant.objects.create(tool_group=acme_only_group, tenant=other_tenant, effect="deny")
    assert client.post(reverse("admin:toolhub_grant_delete", args=[own.pk]), {"post": "yes"}).status_code == 403
    assert Grant.objects.filter(pk=own.pk).exists()


def test_a_tenants_staff_with_every_permission_reads_no_group_name(
    acme_only_group: ToolGroup, other_tenant: Tenant
) -> None:
    """Found: as above, for a globex staff member given every permission but crossing tenants (the boundary, not the
    role, decides). Expect: the list, change and history pages of the grant and of a globex rule naming the group
    withhold it."""
    boss = make_user("globex-boss", tenant=other_tenant, staff=True)
    boss.user_permissions.add(*Permission.objects.exclude(codename="cross_tenant"))
    grant = Grant.objects.create(tool_group=acme_only_group, tenant=other_tenant, set_by_platform=True)
    rule = ApprovalRule.objects.create(name="globex-review", tenant=other_tenant, tool_group=acme_only_group)
    client = Client()
    client.force_login(boss)
    bodies = list(_pages(client, grant).values())
    for view in ("changelist", "change", "history"):
        args = [] if view == "changelist" else [rule.pk]
        response = client.get(reverse(f"admin:approvals_approvalrule_{view}", args=args))
        assert response.status_code == 200
        bodies.append(response.content.decode())
    assert all(acme_only_group.name not in body for body in bodies)


def test_platform_staff_still_read_the_groups_name(
    acme_only_group: ToolGroup, other_tenant: Tenant, platform_user: User
) -> None:
    """Holds: whoever crosses tenants reads every group's name, on the grant's pages too."""
    grant = Grant.objects.create(tool_group=acme_only_group, tenant=other_tenant, set_by_platform=True)
    client = Client()
    client.force_login(platform_user)
    for name, body in _pages(client, grant).items():
        assert f"allow group {acme_only_group.name} to globex" in body, name
