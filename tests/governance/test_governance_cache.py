"""Governance lookups are cached behind a version stamp: a change by any path applies to the very next call."""

from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import Group, User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from approvals.models import ApprovalRule
from tests.security_review.pg_races import dsn
from tests.testapp.models import SideEffect
from toolhub.catalogue import tool_definition_govern
from toolhub.models import CallStatus, Grant, GrantEffect, Tenant, ToolDefinition, ToolGroup

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("deny_by_default")]

GOVERNANCE_TABLES = ("toolhub_grant", "toolhub_tooldefinition", "toolhub_toolgroup", "approvals_approvalrule")


def _reads_of_governance(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if any(table in q["sql"] for table in GOVERNANCE_TABLES)]


def test_a_grant_revoked_between_two_calls_denies_the_second(request_call: Any, tenant: Tenant) -> None:
    # given a grant, and a first call that warmed the cache
    grant = Grant.objects.create(tool_name="record_effect", tenant=tenant)
    assert request_call("record_effect", {"note": "first"}).status == CallStatus.SUCCEEDED

    # when the grant is revoked
    grant.delete()

    # then the very next call is denied, and nothing ran
    second = request_call("record_effect", {"note": "second"})
    assert second.status == CallStatus.DENIED
    assert "not granted to you" in second.error
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["first"]


def test_unchanged_governance_is_not_read_again(request_call: Any, tenant: Tenant) -> None:
    # given a first call that loaded definitions, groups, grants and rules
    Grant.objects.create(tool_name="record_effect", tenant=tenant)
    request_call("record_effect", {"note": "first"})

    # when a second call is made with nothing changed
    with CaptureQueriesContext(connection) as queries:
        second = request_call("record_effect", {"note": "second"})

    # then it read the stamp once and none of the governance tables
    assert second.status == CallStatus.SUCCEEDED
    assert _reads_of_governance(queries) == []
    assert sum("toolhub_governanceversion" in q["sql"] for q in queries.captured_queries) == 1


def test_a_bulk_update_that_disables_the_tool_denies_the_next_call(request_call: Any, tenant: Tenant) -> None:
    Grant.objects.create(tool_name="record_effect", tenant=tenant)
    assert request_call("record_effect", {"note": "first"}).status == CallStatus.SUCCEEDED

    # an UPDATE that bypasses models and signals (as raw SQL or a bulk update would)
    ToolDefinition.objects.filter(name="record_effect").update(enabled=False)

    second = request_call("record_effect", {"note": "second"})
    assert second.status == CallStatus.DENIED
    assert "disabled by an operator" in second.error


def test_an_operator_disabling_the_tool_through_the_service_denies_the_next_call(
    request_call: Any, tenant: Tenant
) -> None:
    Grant.objects.create(tool_name="record_effect", tenant=tenant)
    assert request_call("record_effect", {"note": "first"}).status == CallStatus.SUCCEEDED

    tool_definition_govern(definition=ToolDefinition.objects.get(name="record_effect"), actor="op", enabled=False)

    assert request_call("record_effect", {"note": "second"}).status == CallStatus.DENIED


def test_a_new_or_changed_approval_rule_applies_to_the_next_call(request_call: Any, tenant: Tenant) -> None:
    Grant.objects.create(tool_name="record_effect", tenant=tenant)
    assert request_call("record_effect", {"note": "first"}).status == CallStatus.SUCCEEDED

    # a rule is added: the next call waits for approval
    rule = ApprovalRule.objects.create(name="hold effects", tool_name="record_effect")
    assert request_call("record_effect", {"note": "second"}).status == CallStatus.PENDING_APPROVAL

    # the rule is switched off: the next call runs again
    rule.enabled = False
    rule.save()
    assert request_call("record_effect", {"note": "third"}).status == CallStatus.SUCCEEDED


def test_joining_a_django_group_with_a_deny_grant_denies_the_next_call(
    request_call: Any, tenant: Tenant, alice: User
) -> None:
    Grant.objects.create(tool_name="record_effect", tenant=tenant)
    blocked = Group.objects.create(name="blocked")
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", group=blocked)
    assert request_call("record_effect", {"note": "first"}).status == CallStatus.SUCCEEDED

    alice.groups.add(blocked)

    assert request_call("record_effect", {"note": "second"}).status == CallStatus.DENIED


def test_a_tool_added_to_a_denied_group_by_an_operator_is_denied_next(request_call: Any, tenant: Tenant) -> None:
    Grant.objects.create(tool_name="record_effect", tenant=tenant)
    group = ToolGroup.objects.create(name="frozen")
    Grant.objects.create(effect=GrantEffect.DENY, tool_group=group, tenant=tenant)
    assert request_call("record_effect", {"note": "first"}).status == CallStatus.SUCCEEDED

    group.extra_tools = ["record_effect"]
    group.save()

    assert request_call("record_effect", {"note": "second"}).status == CallStatus.DENIED


def test_a_change_that_rolled_back_leaves_no_stale_cache(request_call: Any, tenant: Tenant) -> None:
    # given a call made while an uncommitted deny grant existed, then rolled back
    Grant.objects.create(tool_name="record_effect", tenant=tenant)
    with pytest.raises(RuntimeError), transaction.atomic():
        Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", tenant=tenant)
        assert request_call("record_effect", {"note": "inside"}).status == CallStatus.DENIED
        raise RuntimeError("roll back")

    # when another, unrelated governance change is made (a rolled-back stamp is never handed out again)
    ToolGroup.objects.create(name="unrelated")

    # then the next call sees the committed state: allowed
    assert request_call("record_effect", {"note": "after"}).status == CallStatus.SUCCEEDED


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_revocation_committed_by_another_process_denies_the_next_call_here(
    request_call: Any, tenant: Tenant, alice: User
) -> None:
    # given a grant and a warm cache in this process
    from toolhub.governance import governance_triggers_install

    assert connection.vendor == "postgresql", "a second database session needs PostgreSQL (use `make test`)"

    governance_triggers_install()  # the transactional tests' flush empties the stamp row; migrate puts it back
    grant = Grant.objects.create(tool_name="record_effect", tenant=tenant)
    assert request_call("record_effect", {"note": "first"}).status == CallStatus.SUCCEEDED

    # when another database session (as another web process or the admin would) revokes it and commits
    with psycopg.connect(**dsn(), autocommit=True) as other:
        other.execute("DELETE FROM toolhub_grant WHERE id = %s", [grant.pk])

    # then this process's next call is denied
    assert request_call("record_effect", {"note": "second"}).status == CallStatus.DENIED


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_temporary_table_cannot_take_the_governance_stamp(request_call: Any, tenant: Tenant) -> None:
    """The stamp functions name their table in their own schema: a session's temporary ``toolhub_governanceversion``
    (``pg_temp`` is searched first) would take the stamp of its revocations, and other processes keep their caches.
    """
    from toolhub.governance import governance_triggers_install

    assert connection.vendor == "postgresql", "a second database session needs PostgreSQL (use `make test`)"

    governance_triggers_install()
    grant = Grant.objects.create(tool_name="record_effect", tenant=tenant)
    assert request_call("record_effect", {"note": "first"}).status == CallStatus.SUCCEEDED

    # when another session revokes the grant with a temporary stamp table in front of the real one
    with psycopg.connect(**dsn(), autocommit=True) as other:
        other.execute("CREATE TEMPORARY TABLE toolhub_governanceversion (id int PRIMARY KEY, stamp bigint)")
        other.execute("DELETE FROM toolhub_grant WHERE id = %s", [grant.pk])
        shadow = other.execute("SELECT count(*) FROM pg_temp.toolhub_governanceversion").fetchone()

    assert shadow == (0,)  # the stamp went to the real table
    assert request_call("record_effect", {"note": "second"}).status == CallStatus.DENIED
