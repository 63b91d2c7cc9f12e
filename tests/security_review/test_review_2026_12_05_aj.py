r"""Review of 2026-12-05 (aj): the shared stale-edit forms (``toolhub.admin_editable``), the display of invisible
characters (``toolhub.visible`` / ``admin_visible``) and the callers of ``toolhub.governance_trail``.

Each test fails on the reviewed code (main at 6b7a75b) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. ``ShownValuesKept`` validated the form as posted but saved untouched fields as stored: when a field's stored
   value differed from the one the page showed (a colleague's change, or a hidden ``initial-`` copy forged to equal
   the posted value), ``clean()`` and the model's checks read the posted value while the row kept the stored one. A
   tenant's developer turned their own allow of ``add`` into an allow of the built-in ``list_directory`` by posting
   ``effect=deny`` with a forged ``initial-effect=deny``: the tenant check read a deny, the save kept the allow.
   Now an untouched field that changed since it was shown is validated as stored, so every check reads the row
   that will be saved.
2. The admin's user pages took any name Django's ``\w`` admits: ``alice\u3164`` (a Hangul filler, drawn as
   nothing) or ``\u0430lice`` (a Cyrillic ``a``) read ``alice`` on the desk, in approvers' e-mail and as a trail
   event's actor, where ``visible_text`` does not reach. A username chosen there now holds no invisible character
   and no look-alike letters of two scripts (``toolhub.visible.lookalike_problem``); one-script names stay fine.

Checked and found holding (no test here):

- stale edits: the add page and "Save as new" (no pk: every posted value saved); a colleague deleting the row
  (Django's "doesn't exist" / the list's invalid id); a list re-sorted or re-paged between load and POST (rows
  matched by their posted pk); readonly fields and fields hidden by ``get_fieldsets`` (not on the form); file,
  split date/time and password fields (left to Django's rule); JSON key order (compared as text shown vs stored,
  ``has_changed`` sorts keys); no governing admin has an editable inline; a hidden copy forged to equal the stored
  value only makes the person's own change win, as reloading would.
- display: tool names (``NAME_PATTERN``, ASCII), tenant slugs, agent and provider names (``SlugField``) cannot hold
  look-alikes; call, request and audit rows' ``__str__`` (titles, breadcrumbs, Django's messages) go through
  ``visible_text``; approval e-mails name registered tools only; Django's own username rule refuses zero-width
  joiners and bidi controls.
- governance trail: the admin's change, list and password pages and ``delete_model`` run in Django's transaction,
  ``delete_queryset`` in its own; ``agent_create``/``agent_update`` and ``toolhub_roles`` append inside
  ``transaction.atomic``; a refused save (``PermissionDenied`` in ``GrantAdmin.save_model``) rolls its event back;
  each row's chains are its tenants before and after (lookups read from the database after the save), so a row
  of one tenant never lands on another's chain alone; the catalogue's switch records ``catalogue.changed`` once.
"""

from typing import Any

import pytest

from tests.builtins.conftest import builtins, root  # noqa: F401 - fixtures
from tests.helpers import console
from tests.tenancy.conftest import make_user, roles  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


@pytest.mark.usefixtures("builtins")
def test_a_forged_shown_value_cannot_make_the_grant_check_read_a_value_that_is_not_saved(
    tenant: Any,
    roles: Any,  # noqa: F811 - the fixture imported above
) -> None:
    """Found: the grant page's tenant check (built-in tools are the platform's to allow) read the posted
    ``effect=deny`` while the save kept the stored ``allow`` (``initial-effect=deny`` forged, so "untouched"): an
    allow of ``add`` became an allow of ``list_directory``. Expect: the check reads the effect that is saved, the
    change is refused and the grant is unchanged."""
    from toolhub.models import Grant, GrantEffect

    developer = make_user("acme-dev-aj", tenant=tenant, staff=True, groups=(roles["developers"],))
    allow = Grant.objects.create(tenant=tenant, tool_name="add", effect=GrantEffect.ALLOW, set_by_platform=False)
    shown = {"effect": "deny", "note": "", "tool_group": "", "tool_name": "add", "tenant": tenant.pk}
    posted = {**shown, **{f"initial-{name}": value for name, value in shown.items()}, "tool_name": "list_directory"}
    response = console(developer).post(f"/admin/toolhub/grant/{allow.pk}/change/", posted)
    allow.refresh_from_db()
    assert (allow.effect, allow.tool_name) == (GrantEffect.ALLOW, "add"), response.status_code
    assert response.status_code == 200
    assert "only the platform grants them" in response.content.decode()


@pytest.mark.parametrize(
    ("username", "why"),
    [("alice\u3164", "invisible"), ("\u0430lice", "mixes"), ("p\u0430ypal.ops", "mixes")],
    ids=["hangul-filler", "cyrillic-a", "cyrillic-a-inside"],
)
def test_an_account_named_like_another_is_refused_on_the_admin_user_pages(
    username: str, why: str, superuser: Any, alice: Any
) -> None:
    """Found: Django's username rule (``\\w``) lets a Hangul filler (drawn as nothing) or a Cyrillic ``а`` into a
    name, so ``alice\\u3164`` or ``\\u0430lice`` read ``alice`` on the desk, in approvers' e-mail and the trail's
    actor; the admin created them. Expect: the add and change pages refuse such a name with a clear error, and
    nothing is saved; a name in one script (``zoë``, ``Ярослав``) is still accepted."""
    from django.contrib.auth.models import User

    client = console(superuser)
    added = client.post(
        "/admin/auth/user/add/",
        {"username": username, "usable_password": "false", "password1": "", "password2": ""},
    )
    assert added.status_code == 200 and why in added.content.decode(), added.status_code
    assert not User.objects.filter(username=username).exists()
    for plain in ("zoë", "Ярослав"):
        ok = client.post("/admin/auth/user/add/", {"username": plain, "usable_password": "false"})
        assert ok.status_code == 302 and User.objects.filter(username=plain).exists(), plain
    page = client.get(f"/admin/auth/user/{alice.pk}/change/")
    assert page.status_code == 200
    renamed = client.post(f"/admin/auth/user/{alice.pk}/change/", _user_change_data(alice, username=username))
    assert renamed.status_code == 200 and why in renamed.content.decode()
    alice.refresh_from_db()
    assert alice.username == "alice"


def _user_change_data(user: Any, **changes: Any) -> dict[str, Any]:
    """What the user's change page posts with ``changes`` (no hidden shown copies: a script's own form)."""
    data = {
        "username": user.username,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "email": user.email,
        "is_active": "on" if user.is_active else "",
        "is_staff": "on" if user.is_staff else "",
        "is_superuser": "on" if user.is_superuser else "",
        "last_login_0": "",
        "last_login_1": "",
        "date_joined_0": user.date_joined.strftime("%Y-%m-%d"),
        "date_joined_1": user.date_joined.strftime("%H:%M:%S"),
        **changes,
    }
    return {key: value for key, value in data.items() if value != ""}
