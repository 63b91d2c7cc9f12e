"""People's accounts in the admin (Django's users and groups, DRF's tokens) are platform configuration.

Before this review the admin showed Django's own User and Group pages unscoped: a staff member of
globex holding ``auth.change_user`` listed every tenant's users and made themselves a superuser; with
``auth.change_group`` they could put ``toolhub.cross_tenant`` into a group; with DRF's token
permissions they read or minted another user's API token. Now tenant-scoped staff see the users of
their tenants read-only and never another tenant's; only people who cross the boundary change
accounts, groups and tokens.
"""

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client
from rest_framework.authtoken.models import Token

from tests.tenancy.conftest import make_user
from toolhub.models import Tenant, TenantMembership

pytestmark = pytest.mark.django_db

ACCOUNT_MANAGER_PERMISSIONS = (
    "auth.view_user",
    "auth.add_user",
    "auth.change_user",
    "auth.view_group",
    "auth.change_group",
    "authtoken.view_tokenproxy",
    "authtoken.add_tokenproxy",
    "authtoken.change_tokenproxy",
    "toolhub.view_tenantmembership",
    "toolhub.add_tenantmembership",
)


@pytest.fixture
def globex_manager(other_tenant: Tenant) -> User:
    """Tenant-scoped staff of globex trusted with every account permission Django offers."""
    return make_user("globex-manager", tenant=other_tenant, staff=True, permissions=ACCOUNT_MANAGER_PERMISSIONS)


@pytest.fixture
def acme_member(tenant: Tenant) -> User:
    return make_user("acme-member", tenant=tenant)


def admin_client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_tenant_scoped_staff_list_only_the_users_of_their_tenants(
    globex_manager: User, globex_user: User, acme_member: User, superuser: User
) -> None:
    client = admin_client(globex_manager)

    listing = client.get("/admin/auth/user/")
    foreign = client.get(f"/admin/auth/user/{acme_member.pk}/change/")
    missing = client.get("/admin/auth/user/987654/change/")

    assert listing.status_code == 200
    shown = {user.username for user in listing.context["cl"].result_list}
    assert shown == {"globex-manager", "globex-user"}
    # another tenant's user, or a user of no tenant, answers like a missing one
    assert foreign.status_code == missing.status_code == 302
    assert client.get(f"/admin/auth/user/{superuser.pk}/change/").status_code == 302


def test_tenant_scoped_staff_cannot_make_themselves_superuser(globex_manager: User) -> None:
    client = admin_client(globex_manager)
    page = client.get(f"/admin/auth/user/{globex_manager.pk}/change/")
    assert page.status_code == 200
    assert 'name="is_superuser"' not in page.content.decode()

    response = client.post(
        f"/admin/auth/user/{globex_manager.pk}/change/",
        {
            "username": "globex-manager",
            "is_active": "on",
            "is_staff": "on",
            "is_superuser": "on",
            "groups": [Group.objects.get_or_create(name="operators")[0].pk],
            "user_permissions": [Permission.objects.get(codename="cross_tenant").pk],
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )

    assert response.status_code == 403
    globex_manager.refresh_from_db()
    assert not globex_manager.is_superuser
    assert not globex_manager.groups.exists()
    assert not globex_manager.has_perm("toolhub.cross_tenant")


def test_tenant_scoped_staff_cannot_change_passwords_or_add_users(globex_manager: User, globex_user: User) -> None:
    client = admin_client(globex_manager)
    before = User.objects.get(pk=globex_user.pk).password

    password = client.post(
        f"/admin/auth/user/{globex_user.pk}/password/",
        {"password1": "A-new-passw0rd!", "password2": "A-new-passw0rd!", "usable_password": "true"},
    )
    added = client.post(
        "/admin/auth/user/add/",
        {
            "username": "sneaky",
            "password1": "A-new-passw0rd!",
            "password2": "A-new-passw0rd!",
            "usable_password": "true",
        },
    )

    assert password.status_code == 403
    assert added.status_code == 403
    assert User.objects.get(pk=globex_user.pk).password == before
    assert not User.objects.filter(username="sneaky").exists()


def test_tenant_scoped_staff_cannot_put_the_cross_tenant_permission_into_a_group(
    globex_manager: User, roles: dict[str, Group]
) -> None:
    # given globex-manager is in the auditors group
    globex_manager.groups.add(roles["auditors"])
    client = admin_client(globex_manager)
    cross_tenant = Permission.objects.get(content_type__app_label="toolhub", codename="cross_tenant")

    response = client.post(
        f"/admin/auth/group/{roles['auditors'].pk}/change/",
        {"name": "auditors", "permissions": [cross_tenant.pk]},
    )

    assert response.status_code == 403
    assert not roles["auditors"].permissions.filter(pk=cross_tenant.pk).exists()
    assert not User.objects.get(pk=globex_manager.pk).has_perm("toolhub.cross_tenant")


def test_tenant_scoped_staff_neither_read_nor_mint_api_tokens(globex_manager: User, superuser: User) -> None:
    token = Token.objects.create(user=superuser)
    client = admin_client(globex_manager)

    listing = client.get("/admin/authtoken/tokenproxy/")
    minted = client.post("/admin/authtoken/tokenproxy/add/", {"user": superuser.pk})
    index = client.get("/admin/")

    assert listing.status_code == 403
    assert token.key not in listing.content.decode()
    assert minted.status_code == 403
    assert Token.objects.filter(user=superuser).count() == 1
    assert "/admin/authtoken/" not in index.content.decode()


def test_tenant_scoped_staff_cannot_join_another_tenant(globex_manager: User, tenant: Tenant) -> None:
    client = admin_client(globex_manager)

    response = client.post("/admin/toolhub/tenantmembership/add/", {"user": globex_manager.pk, "tenant": tenant.pk})

    assert response.status_code == 200  # the form again: acme is not among the choices
    assert "Select a valid choice" in response.content.decode()
    assert not TenantMembership.objects.filter(user=globex_manager, tenant=tenant).exists()


def test_people_across_the_boundary_still_manage_accounts(
    superuser: User, acme_member: User, platform_user: User
) -> None:
    platform_user.user_permissions.add(*Permission.objects.filter(content_type__app_label="auth"))
    platform = admin_client(User.objects.get(pk=platform_user.pk))

    assert platform.get(f"/admin/auth/user/{acme_member.pk}/change/").status_code == 200
    response = admin_client(superuser).post(
        f"/admin/auth/user/{acme_member.pk}/password/",
        {"password1": "A-new-passw0rd!", "password2": "A-new-passw0rd!", "usable_password": "true"},
    )

    assert response.status_code == 302
    assert User.objects.get(pk=acme_member.pk).check_password("A-new-passw0rd!")


def test_tenant_scoped_staff_cannot_pull_another_tenants_user_into_their_tenant_by_id(
    globex_manager: User, acme_member: User, other_tenant: Tenant, superuser: User
) -> None:
    # the user box takes a raw id: an id of acme's user must not become a globex membership (and show their name)
    client = admin_client(globex_manager)

    response = client.post("/admin/toolhub/tenantmembership/add/", {"user": acme_member.pk, "tenant": other_tenant.pk})

    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not TenantMembership.objects.filter(user=acme_member, tenant=other_tenant).exists()
    assert "acme-member" not in response.content.decode()
    # nor a superuser (in no tenant), while a newcomer in no tenant yet can be added
    refused = client.post("/admin/toolhub/tenantmembership/add/", {"user": superuser.pk, "tenant": other_tenant.pk})
    newcomer = make_user("newcomer")
    added = client.post("/admin/toolhub/tenantmembership/add/", {"user": newcomer.pk, "tenant": other_tenant.pk})
    assert refused.status_code == 200 and "root" not in refused.content.decode()
    assert added.status_code == 302
    assert list(
        TenantMembership.objects.filter(tenant=other_tenant)
        .values_list("user__username", flat=True)
        .order_by("user__username")
    ) == ["globex-manager", "newcomer"]
