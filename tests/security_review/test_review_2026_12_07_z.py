"""Review z (2026-12-07): review u's calls-page finding checked on every other per-tenant list index.

Findings:

1. (placeholder)
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction

from tests.helpers import console
from tests.security_review.query_plans import ago, analyze, clone, json_plans, rows_read
from toolhub.audit import audit_append
from toolhub.models import AuditEvent

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

EVENTS = AuditEvent._meta.db_table


def _listing_read(page: Any, table: str, shown: str) -> int:
    """The rows of ``table`` the listing statements of ``page`` read (its response is 200 and shows ``shown``)."""
    responses: list[Any] = []
    plans = json_plans(lambda: responses.append(page()))
    assert responses[0].status_code == 200 and shown in responses[0].content.decode()
    listing = [plan for sql, plan in plans if " ORDER BY " in sql and "COUNT(" not in sql and table in sql]
    assert listing
    return sum(rows_read(plan, table) for plan in listing)


def test_the_audit_browser_of_a_tenant_reads_the_page_not_its_whole_trail(
    acme_operator: User, platform_user: User
) -> None:
    """Found: the audit browser (``-created_at, -id``) read a tenant's events over ``audit_tenant_created``
    ``(tenant, created_at)`` and sorted on ``id``: under statistics older than the events it sorted every event of
    the tenant for one page. Expect: acme's page, as acme's operator (filtered or not) and as a platform user
    filtering ``?tenant=acme``, reads at most the page and a few more events in its listing statement, and lists
    the newest event."""
    with transaction.atomic():
        newest = audit_append(event_type="test.z", actor="review-z", tenant="acme", data={"n": 0})
    analyze()
    clone(AuditEvent, newest, 600, chain="901", seq="g", created_at=ago("g + 10"))
    clone(AuditEvent, newest, 300, chain="902", seq="g", tenant="'globex'", created_at=ago("g"))
    pages = {
        "acme's operator": lambda: console(acme_operator).get("/admin/toolhub/auditevent/"),
        "acme's operator, ?tenant=acme": lambda: console(acme_operator).get("/admin/toolhub/auditevent/?tenant=acme"),
        "a platform user, ?tenant=acme": lambda: console(platform_user).get("/admin/toolhub/auditevent/?tenant=acme"),
    }
    for who, page in pages.items():
        read = _listing_read(page, EVENTS, f"/admin/toolhub/auditevent/{newest.pk}/change/")
        assert read <= 110, f"{who}: the page of 100 events read {read}"
