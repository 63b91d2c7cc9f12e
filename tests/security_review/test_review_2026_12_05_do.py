"""Review do: regressions of the scoped delete pages (``toolhub.admin_deletion``) and of the list row-id check
(``ToolhubAdminSite.admin_view`` with ``admin_actions.rows_checked``).

Findings:
1. The delete pages' list of related rows drew a name a tenant chose as written: a bidirectional control (U+202E) in
   a tool group's name (any related row's) reordered the line, where every list and change page of the console writes
   it out (``toolhub.visible``). ``_Shown.label`` now draws each name through ``visible_text`` (still escaped).

Noted, not changed: the page's title, breadcrumb and question ("delete the tool group '...'?") draw the row's own
name through Django's templates as written, as every change page's title, breadcrumb and heading do: an admin-wide
gap (``{{ original }}`` / ``{{ object }}``), not one of these pages.

Checked and holds:
- A superuser and a platform operator (cross-tenant permission plus the delete permissions) still see and delete a
  user with an API token (DRF's ``Token``, whose page is the proxy ``TokenProxy``: no admin of its own, so named to
  boundary-crossers), an admin ``LogEntry`` and a membership; a tenant; a tool group. No "you cannot see" refusal.
  Axes logs name the username, not the user (no cascade). Generic relations: none of the console's models has one.
- Queries: ``_Shown.sees`` reads each admin's visible keys once per model; the per-row permission calls read no
  relation for the console's tenant fields (the collector caches the related row). A tenant's page still reads one
  user per membership, for ``TenantMembership.__str__`` ("user @ tenant"): Django's own page did the same.
- No false refusal from a model's default manager or an admin's queryset for boundary-crossers: no console model
  has a filtering default manager, and every admin's ``get_queryset`` returns every row to them. A person given a
  model's delete permission without its view one is now refused a cascade into its rows, where Django let it
  through: by design (a row not shown is not deleted), and the roles (``toolhub_roles``) grant no such pair.
- Queries for tenant staff: an agent's page with 2 or 20 runs (half another tenant's) costs the same.
- Summary counts are Django's (``collector.model_objs``); HTML in a name is escaped (``format_html`` / autoescape).
- A refused page's forged POST (``post=yes``) deletes nothing: Django checks ``perms_needed``/``protected`` from the
  same ``get_deleted_objects`` before deleting (review dh's tests cover the tenant case).
- ``rows_checked``: every console list's ``changelist_view`` (also the overridden ones of tool calls and the
  approval desk: a bound method keeps its ``__name__``) is wrapped behind the login and CSRF checks; a GET, a POST
  without ``_selected_action`` (a list_editable save, read) passes; a refusal redirects to the full path, filters
  and ``_popup`` kept.
"""

import re

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from rest_framework.authtoken.models import Token

from tests.helpers import console
from tests.tenancy.conftest import make_user
from toolhub.models import Tenant, ToolGroup

pytestmark = pytest.mark.django_db

RLO = "\u202e"


def _deleted_list(page: str) -> str:
    # To the list's own end (the confirmation's form follows it): a row's nested list (a token's binding) ends first.
    found = re.search(r'<ul id="deleted-objects">(.*?)</ul>\s*<form', page, re.S)
    assert found, page[:500]
    return found.group(1)


def test_a_bidi_control_in_a_related_rows_name_is_written_out(superuser: User) -> None:
    """Found: the delete page listed a tool group named with a right-to-left override as written, reordering the
    line. Expect: the override written out as ``\\u202e`` as the lists do, the markup still escaped."""
    group = ToolGroup.objects.create(name=f"<b>pay</b>{RLO}gnp.exe")

    page = console(superuser).get(f"/admin/toolhub/toolgroup/{group.pk}/delete/").content.decode()
    listed = _deleted_list(page)

    assert RLO not in listed and "\\u202e" in listed
    assert "&lt;b&gt;pay&lt;/b&gt;" in listed and "<b>" not in listed


def test_a_platform_operator_still_deletes_a_user_with_a_token_and_log_entries(tenant: Tenant) -> None:
    """Holds: a user's token (a model whose page is a proxy's), admin log entries and membership are named to a
    platform operator, nothing refused, and confirming deletes them."""
    platform = make_user("platform-op", staff=True, permissions=("toolhub.cross_tenant",))
    platform.user_permissions.add(
        *Permission.objects.filter(
            codename__in=("delete_user", "view_user", "delete_tenantmembership", "view_tenantmembership")
        )
    )
    victim = make_user("leaving", tenant=tenant, staff=True)
    token = Token.objects.create(user=victim)
    LogEntry.objects.create(
        user=victim,
        content_type=ContentType.objects.get_for_model(Tenant),
        object_id=str(tenant.pk),
        object_repr="acme",
        action_flag=ADDITION,
    )
    client = console(User.objects.get(pk=platform.pk))

    page = client.get(f"/admin/auth/user/{victim.pk}/delete/").content.decode()
    listed = _deleted_list(page)

    assert "cannot see" not in page and "doesn't have permission" not in page
    assert "Log entry" in listed and "Token" in listed and "Tenant membership" in listed
    client.post(f"/admin/auth/user/{victim.pk}/delete/", {"post": "yes"})
    assert not User.objects.filter(pk=victim.pk).exists() and not Token.objects.filter(pk=token.pk).exists()


def test_a_garbled_row_id_keeps_the_lists_filters_and_popup(superuser: User) -> None:
    """Holds: a refused row id redirects to the list with its query string (filters, ``_popup``), nothing done; a
    POST without ``_selected_action`` reaches the list untouched."""
    client = console(superuser)
    path = "/admin/toolhub/tenant/?q=acme&_popup=1&_to_field=id"

    refused = client.post(path, {"action": "delete_selected", "_selected_action": ["x1"]})
    untouched = console(superuser).post("/admin/toolhub/tenant/?q=acme", {"action": "delete_selected"})

    assert refused.status_code == 302 and refused["Location"] == path
    assert untouched.status_code == 200 and "names no row" not in untouched.content.decode()
