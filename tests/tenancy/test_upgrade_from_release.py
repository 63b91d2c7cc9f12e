"""Upgrading a live installation from the last release (toolhub 0028) to slugs fixed and retired (0029-0031).

Before 0029 the platform could delete a tenant or rename its slug in the admin, leaving calls, runs, approval
requests, sagas and audit events that name the old slug. The upgrade must retire those slugs as a deletion
does today, or the first new tenant given one inherits them.
"""

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from tests.security_review.conftest import client_for
from tests.tenancy.conftest import AcmeData, make_user
from toolhub.audit_hash import tenant_chain_base
from toolhub.models import AuditEvent, RetiredTenantSlug, Tenant

pytestmark = pytest.mark.django_db(transaction=True)

#: The last release's schema (df5120f): tenants' slugs could change and deleted tenants' slugs were free.
RELEASE = [("toolhub", "0028_audit_checkpoint_numbering")]


def _migrate(targets: list[tuple[str, str]]) -> Any:
    """Migrate to ``targets`` and return the historical apps there."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _calls_seen_by(user: User) -> list[str]:
    answer = client_for(user).get("/api/v1/calls/")
    assert answer.status_code == 200, answer.content
    return sorted(str(row["id"]) for row in answer.json()["results"])


def test_the_upgrade_retires_the_slugs_of_tenants_deleted_or_renamed_under_the_last_release(
    acme: AcmeData, request_call: Any, superuser: User, roles: dict[str, Group]
) -> None:
    """An operator runs the last release: initech called tools over the API and was then deleted in the admin,
    and acme was renamed ``acme-corp`` (both allowed then). They upgrade (``git pull && manage.py migrate``);
    later the platform signs a new customer up under the free-looking slug ``initech`` (or ``acme``), and
    ``nina`` becomes its auditor.

    Found: migration 0029 (toolhub/migrations/0029_retired_tenant_slugs.py) creates ``RetiredTenantSlug`` empty;
    only a deletion made after the upgrade retires a slug (``_retire_slug``), so the slugs that rows still name
    from before the upgrade can be issued again, and the new tenant reads the old customer's calls and audit
    trail (the exact takeover 0029 was written to prevent).
    Expect: the upgrade retires every slug that rows name and no tenant holds; the admin refuses a new tenant
    under it, so nobody inherits anything.
    """
    initech = Tenant.objects.create(slug="initech", name="Initech")
    ian = make_user("ian", tenant=initech)
    call = request_call("record_effect", {"note": "initech's secret plan"}, ian, tenant="initech")

    old = _migrate(RELEASE)
    try:
        old_tenants = old.get_model("toolhub", "Tenant").objects
        old_tenants.filter(slug="initech").delete()
        # as the release's admin saved a renamed tenant: its audit chains follow the new slug
        old_tenants.filter(slug="acme").update(slug="acme-corp", audit_chain_base=tenant_chain_base("acme-corp"))
    finally:
        _migrate(_latest())

    platform = Client()
    platform.force_login(superuser)
    inherited: dict[str, Any] = {}
    for slug in ("initech", "acme"):
        platform.post("/admin/toolhub/tenant/add/", {"slug": slug, "name": "Another customer"})
        successor = Tenant.objects.filter(slug=slug).first()
        if successor is not None:
            nina = make_user(f"nina-{slug}", tenant=successor, staff=True, groups=(roles["auditors"],))
            inherited[slug] = {
                "calls": len(_calls_seen_by(nina)),
                "events": AuditEvent.objects.filter(tenant=slug).count(),
            }
    assert inherited == {}, f"new tenants took slugs that rows from before the upgrade name, and inherit: {inherited}"
    assert AuditEvent.objects.filter(tenant="initech", call_id=call.id).exists()
    assert set(RetiredTenantSlug.objects.values_list("slug", flat=True)) == {"initech", "acme"}
