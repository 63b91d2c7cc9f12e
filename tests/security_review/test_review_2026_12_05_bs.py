"""Review of 2026-12-05 (bs): the trail's coverage of account changes (users, roles, API tokens).

Each test fails on the reviewed code (main at a7202f1) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. Review bj put grants, approval rules, tool groups and memberships changed in the admin into the hash-chained
   trail, but not people's accounts, which decide who may do what as much: a user deactivated or put into a
   role, a permission added to a role, an API token minted or deleted, a password reset left only Django's admin
   history (``LogEntry``). Now the user, group and token pages use the same ``GovernanceAudited`` mixin:
   ``governance.added`` / ``changed`` / ``deleted`` in the chains of each tenant the user belongs to (the role's
   holders', the token's user's; the platform's for nobody's), groups and permissions as readable names, the
   password's hash and the token's key never recorded (``audit_excluded_fields``; the token's text, its key,
   redacted), a password set in the admin's password form recorded as ``{"password": {"changed": true}}``.

Checked and found holding (no test here): only people who cross the tenant boundary change accounts, roles and
tokens (``test_accounts_admin``); events are appended in the transaction of the change (the password form's view
is now wrapped in one, as the change and add views are); bj's events (grants moved between tenants, list
checkboxes, bulk deletion) keep their shape.
"""

import json

import pytest
from django.contrib.auth.models import Group, Permission, User
from rest_framework.authtoken.models import Token

from tests.helpers import console
from tests.tenancy.conftest import make_user
from toolhub.models import AuditEvent, Tenant

pytestmark = pytest.mark.django_db


def _events(kind: str, tenant: str, model: str) -> list[AuditEvent]:
    events = AuditEvent.objects.filter(event_type=kind, tenant=tenant).order_by("id")
    return [event for event in events if event.payload.get("model") == model]


def _holds_no_secret(*secrets: str) -> None:
    """No governance event anywhere holds any of ``secrets``."""
    for event in AuditEvent.objects.filter(event_type__startswith="governance."):
        text = json.dumps(event.payload) + event.actor
        for secret in secrets:
            assert secret not in text, (event.event_type, event.payload)


def _user_form(user: User, **fields: object) -> dict[str, object]:
    return {
        "username": user.username,
        "email": user.email,
        "first_name": "",
        "last_name": "",
        "is_active": "on",
        "is_staff": "",
        "groups": [],
        "user_permissions": [],
        "date_joined_0": "2026-01-01",
        "date_joined_1": "00:00:00",
        **fields,
    }


def test_a_user_deactivated_and_given_a_role_is_in_each_of_their_tenants_trails(
    superuser: User, tenant: Tenant, other_tenant: Tenant
) -> None:
    """Found: deactivating a user of acme and globex and putting them into "operators" in the admin left no
    audit event. Expect: ``governance.changed`` in both tenants' trails with ``is_active`` and ``groups`` (by
    name) before and after, and no password hash."""
    person = make_user("two-tenants", tenant=tenant)
    person.tenant_memberships.create(tenant=other_tenant)
    operators, _ = Group.objects.get_or_create(name="operators")
    changed = console(superuser).post(
        f"/admin/auth/user/{person.pk}/change/", _user_form(person, is_active="", groups=[operators.pk])
    )
    assert changed.status_code == 302, changed.content.decode()[:2000]
    person.refresh_from_db()
    assert not person.is_active

    for slug in ("acme", "globex"):
        (event,) = _events("governance.changed", slug, "auth.user")
        assert event.actor == "user:root" and event.payload["id"] == person.pk
        changes = event.payload["changes"]
        assert changes["is_active"] == {"before": True, "after": False}
        assert changes["groups"] == {"before": [], "after": ["operators"]}
        assert "password" not in changes
    assert not _events("governance.changed", "", "auth.user")
    _holds_no_secret(person.password)


def test_a_permission_added_to_a_role_is_in_its_holders_tenants_trail(superuser: User, tenant: Tenant) -> None:
    """Found: adding ``toolhub.cross_tenant`` to a role held by acme's people left no audit event. Expect:
    ``governance.changed`` in acme's trail naming the permission as ``app_label.codename``."""
    role = Group.objects.create(name="helpdesk")
    make_user("helper", tenant=tenant, groups=(role,))
    cross_tenant = Permission.objects.get(codename="cross_tenant")
    changed = console(superuser).post(
        f"/admin/auth/group/{role.pk}/change/", {"name": "helpdesk", "permissions": [cross_tenant.pk]}
    )
    assert changed.status_code == 302
    (event,) = _events("governance.changed", "acme", "auth.group")
    assert event.payload["changes"] == {"permissions": {"before": [], "after": ["toolhub.cross_tenant"]}}


def test_a_token_created_and_deleted_is_in_the_trail_without_its_key(superuser: User, tenant: Tenant) -> None:
    """Found: minting and deleting an API token for acme's user in the admin left no audit event. Expect:
    ``governance.added`` and ``governance.deleted`` in acme's trail naming the user, and the key nowhere in them."""
    holder = make_user("token-holder", tenant=tenant)
    browser = console(superuser)
    assert browser.post("/admin/authtoken/tokenproxy/add/", {"user": holder.pk}).status_code == 200  # the key, once
    key = Token.objects.get(user=holder).key
    deleted = browser.post(f"/admin/authtoken/tokenproxy/{holder.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302 and not Token.objects.filter(user=holder).exists()

    (added,) = _events("governance.added", "acme", "authtoken.tokenproxy")
    assert added.actor == "user:root" and added.payload["values"]["user_id"] == holder.pk
    assert "key" not in added.payload["values"]
    (removal,) = _events("governance.deleted", "acme", "authtoken.tokenproxy")
    assert removal.payload["values"]["user_id"] == holder.pk
    _holds_no_secret(key)


def test_a_password_changed_in_the_admin_is_in_the_trail_without_its_hash(superuser: User, tenant: Tenant) -> None:
    """Found: resetting acme's user's password with the admin's password form left no audit event. Expect:
    ``governance.changed`` in acme's trail saying the password changed, holding neither hash."""
    person = make_user("forgetful", tenant=tenant)
    before = person.password
    reset = console(superuser).post(
        f"/admin/auth/user/{person.pk}/password/",
        {"password1": "A-new-passw0rd!", "password2": "A-new-passw0rd!", "usable_password": "true"},
    )
    assert reset.status_code == 302
    person.refresh_from_db()
    assert person.password != before

    (event,) = _events("governance.changed", "acme", "auth.user")
    assert event.payload["changes"] == {"password": {"changed": True}}
    _holds_no_secret(before, person.password)


def test_a_newcomer_made_staff_is_in_the_platforms_trail(superuser: User) -> None:
    """Found: making a user of no tenant staff left no audit event. Expect: ``governance.changed`` in the
    platform's chains (tenant "") with ``is_staff`` before and after."""
    newcomer = make_user("newcomer")
    changed = console(superuser).post(f"/admin/auth/user/{newcomer.pk}/change/", _user_form(newcomer, is_staff="on"))
    assert changed.status_code == 302
    (event,) = _events("governance.changed", "", "auth.user")
    assert event.payload["changes"]["is_staff"] == {"before": False, "after": True}
