"""The demo's own admin pages (accounts, ledger, orders) are tenant-scoped like the rest of the console.

The demo is what developers copy; before this review its pages listed every tenant's accounts and
orders to any staff member holding the demo's view permissions.
"""

import pytest
from django.test import Client

from demo.models import Account, LedgerEntry, Order
from tests.tenancy.conftest import make_user
from toolhub.models import Tenant

pytestmark = pytest.mark.django_db


def test_staff_of_another_tenant_see_none_of_acmes_demo_rows(other_tenant: Tenant) -> None:
    # given acme's account, ledger entry and order, and globex's account
    acme_account = Account.objects.create(account_id="ACC-A", owner="alice", tenant="acme", balance=100)
    entry = LedgerEntry.objects.create(account=acme_account, kind="debit", amount=10)
    order = Order.objects.create(product="Laptop", amount=5000, tenant="acme", created_by="alice")
    Account.objects.create(account_id="ACC-G", owner="gus", tenant="globex", balance=100)
    viewer = make_user(
        "globex-viewer",
        tenant=other_tenant,
        staff=True,
        permissions=("demo.view_account", "demo.view_ledgerentry", "demo.view_order", "demo.change_account"),
    )
    client = Client()
    client.force_login(viewer)

    # then lists hold only globex's rows and acme's pages answer like missing ones
    accounts = client.get("/admin/demo/account/")
    assert [row.account_id for row in accounts.context["cl"].result_list] == ["ACC-G"]
    assert list(client.get("/admin/demo/ledgerentry/").context["cl"].result_list) == []
    assert list(client.get("/admin/demo/order/").context["cl"].result_list) == []
    for url in (
        f"/admin/demo/account/{acme_account.pk}/change/",
        f"/admin/demo/ledgerentry/{entry.pk}/change/",
        f"/admin/demo/order/{order.pk}/change/",
    ):
        assert client.get(url).status_code == 302, url
    posted = client.post(
        f"/admin/demo/account/{acme_account.pk}/change/",
        {"account_id": "ACC-A", "owner": "alice", "tenant": "globex", "balance": "999999", "frozen": ""},
    )
    assert posted.status_code == 302
    acme_account.refresh_from_db()
    assert acme_account.balance == 100 and acme_account.tenant == "acme"


def test_staff_of_acme_still_see_acmes_demo_rows(tenant: Tenant) -> None:
    Account.objects.create(account_id="ACC-A", owner="alice", tenant="acme", balance=100)
    viewer = make_user("acme-viewer", tenant=tenant, staff=True, permissions=("demo.view_account",))
    client = Client()
    client.force_login(viewer)

    assert [row.account_id for row in client.get("/admin/demo/account/").context["cl"].result_list] == ["ACC-A"]
