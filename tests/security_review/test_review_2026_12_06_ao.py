"""Review 2026-12-06 (ao): the application role's rights across migrations, and the newest migrations' round trips.

Findings (fail on 819d82f, pass after the fix):

1. A migration that re-created an audit table (``migrate toolhub 0013`` and forward re-creates
   ``toolhub_auditverification``) made it with the owner's default privileges: the application role held
   UPDATE and DELETE on the verification records until someone reran ``toolhub_db_roles``. Every ``migrate``
   now reapplies the rights of each role ``toolhub_db_roles`` set up in the schema (``db_app_roles_refresh``,
   a ``post_migrate`` handler): append-only on the audit tables, read/write elsewhere; no role set up, or
   SQLite: nothing happens.
2. ``migrate auth 0001`` failed on PostgreSQL (value too long for varchar(50)): toolhub's own ``cross_tenant``
   permission was named in 54 characters (auth 0002 had widened the column to 255). It is named in 46 now
   (``toolhub 0039`` renames the stored row; its reverse keeps the short name, which going further back needs).
   Capability permissions (``Has capability <name>``) are named after what operators type: a name over 35
   characters would stop the same rollback (not changed: operators' data).
3. Migrating approvals back to 0011 kept only a pending request's first asker (``asked_by``) and silently dropped
   the others (who retried its compensation): the older code then let them decide it alone. The reverse now
   refuses (IrreversibleError naming the requests: decide them first); decided requests keep the first asker.
4. Migrating approvals back to 0010 dropped a pending request's ``asked_by`` (who rolled the saga back) silently:
   the older code let them approve their own rollback's compensation. The reverse of 0011 refuses the same way.

Checked and holds:
- sagas 0003 / approvals 0009 / agents_app 0013 and forward again with a rollback, a retried compensation and a
  decided request with two askers (PostgreSQL and SQLite): no row lost; the rollback's asker is read back from its
  ``user:<name>``; lost as the older schemas cannot hold them: who retried (``retried_by``) and, past approvals
  0011, a decided request's askers (no one decides it again); approvals 0010 and agents_app 0014 are indexes only;
- on a scratch PostgreSQL database: ``migrate`` (all), ``migrate auth 0001``, ``migrate`` again: no unapplied
  migration left, the permission renamed on the existing row;
- the tables the last session added (``approvals_approvalrequest_askers``, ``sagas_compensation_retried_by``,
  and ``sagas_rollback`` with its ``asked_by``) give the application role read/write and their sequences
  USAGE/SELECT, as the README's Production section says of every non-audit table;
- a role holding only SELECT as default privileges (a read-only reporting role) is not widened by the refresh.
"""

import uuid
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.db.migrations.exceptions import IrreversibleError
from django.db.migrations.executor import MigrationExecutor

from approvals.models import ApprovalRequest
from tests.tenancy.conftest import make_user
from toolhub.models import Tenant, ToolCall

PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")


def _privileges(role: str, table: str) -> set[str]:
    with connection.cursor() as cursor:
        found = set()
        for privilege in PRIVILEGES:
            cursor.execute("SELECT has_table_privilege(%s, %s, %s)", [role, table, privilege])
            if cursor.fetchone()[0]:
                found.add(privilege)
    return found


def _drop_role(role: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP OWNED BY {connection.ops.quote_name(role)}")
        cursor.execute(f"DROP ROLE {connection.ops.quote_name(role)}")


@pytest.fixture
def committed_app_role(transactional_db: None) -> Iterator[str]:
    """An application role set up by the command and committed (roles belong to the cluster: dropped after)."""
    assert connection.vendor == "postgresql", "needs DATABASE_URL pointing at PostgreSQL"
    role = f"toolhub_app_{uuid.uuid4().hex[:12]}"
    call_command("toolhub_db_roles", "--role", role, stdout=None)
    try:
        yield role
    finally:
        _drop_role(role)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_migration_that_recreates_an_audit_table_leaves_the_app_role_append_only(committed_app_role: str) -> None:
    """Found: migrating toolhub back to 0013 and forward re-created ``toolhub_auditverification`` with the owner's
    default privileges, so the application role could UPDATE and DELETE the verification records until someone
    reran ``toolhub_db_roles``.
    Expect: after ``migrate`` the role holds SELECT and INSERT on it again, as on every audit table."""
    role = committed_app_role
    assert _privileges(role, "toolhub_auditverification") == {"SELECT", "INSERT"}
    try:
        call_command("migrate", "toolhub", "0013", verbosity=0)
    finally:
        call_command("migrate", verbosity=0)  # every app's leaf again: later tests need today's schema

    assert _privileges(role, "toolhub_auditverification") == {"SELECT", "INSERT"}
    assert _privileges(role, "toolhub_auditevent") == {"SELECT", "INSERT"}
    assert _privileges(role, "toolhub_governanceversion") == {"SELECT", "INSERT", "UPDATE", "DELETE"}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_last_sessions_tables_are_read_write_for_the_app_role_and_a_read_only_role_stays_so(
    committed_app_role: str,
) -> None:
    """Found: nothing (holds) for the new tables; the refresh must not widen a role it did not set up.
    Expect: askers, retried_by and rollbacks read/write with their sequences; a SELECT-only role keeps SELECT."""
    reader = f"toolhub_reader_{uuid.uuid4().hex[:12]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE ROLE {reader} NOLOGIN")
        cursor.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {reader}")
    try:
        call_command("migrate", verbosity=0)
        for table in ("approvals_approvalrequest_askers", "sagas_compensation_retried_by", "sagas_rollback"):
            assert _privileges(committed_app_role, table) == {"SELECT", "INSERT", "UPDATE", "DELETE"}, table
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
                (sequence,) = cursor.fetchone()
                cursor.execute("SELECT has_sequence_privilege(%s, %s, 'USAGE')", [committed_app_role, sequence])
                assert cursor.fetchone()[0], sequence
            assert _privileges(reader, table) == set(), table
    finally:
        _drop_role(reader)


#: ``auth.Permission.name`` as ``auth 0001`` made it (0002 widened it to 255): migrating auth back narrows it again.
AUTH_0001_NAME_LENGTH = 50


@pytest.mark.django_db
def test_toolhubs_permissions_fit_the_name_column_auth_migrates_back_to() -> None:
    """Found: ``migrate auth 0001`` failed on PostgreSQL (value too long for varchar(50)) because of toolhub's own
    ``cross_tenant`` permission, named in 54 characters.
    Expect: every permission the migrations create (declared by a model or in migrations) is named in at most 50."""
    from django.contrib.auth.models import Permission
    from django.db.models.functions import Length

    too_long = Permission.objects.annotate(length=Length("name")).filter(length__gt=AUTH_0001_NAME_LENGTH)
    assert list(too_long.values_list("content_type__app_label", "codename", "name")) == []


@pytest.mark.django_db(transaction=True)
def test_reversing_askers_refuses_while_a_pending_request_has_more_than_one(
    alice: User, operator: User, tenant: Tenant
) -> None:
    """Found: migrating approvals back to 0011 kept only a pending request's first asker in ``asked_by`` and dropped
    the others (who retried the compensation) silently: the older code then let a retrier decide it alone.
    Expect: the reverse refuses with IrreversibleError naming the requests and what to do; nothing is lost, and
    once they are decided the reverse runs (review ah's test: the first asker is kept)."""
    retrier = make_user("acme-op-ao-retrier", tenant=tenant, staff=True)
    call = ToolCall.objects.create(tool_name="review_ao_void", tenant="acme", user=alice)
    request = ApprovalRequest.objects.create(
        call=call, tool_name="review_ao_void", requested_by=alice, tenant="acme", expires_at="2100-01-01T00:00:00Z"
    )
    request.askers.add(operator)
    request.askers.add(retrier)
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        with pytest.raises(IrreversibleError) as refused:
            call_command("migrate", "approvals", "0011", verbosity=0)
    finally:
        MigrationExecutor(connection).migrate(latest)  # the later tests' schema, whatever happened
    assert f"1 pending approval request (#{request.pk})" in str(refused.value)
    assert sorted(request.askers.values_list("pk", flat=True)) == sorted([operator.pk, retrier.pk])


@pytest.mark.django_db(transaction=True)
def test_the_newest_migrations_round_trip_with_decided_askers_rollbacks_and_retries(
    alice: User, operator: User, tenant: Tenant
) -> None:
    """Found: nothing (holds): approvals 0010-0013, sagas 0004-0006 and agents_app 0014 back and forward with data.
    Expect: no row lost; forward again a rollback's asker is read back from its ``user:<name>``; gone only what the
    older schemas lack: who retried a compensation (``retried_by``), past approvals 0011 a decided request's askers."""
    from toolhub.sagas.models import Compensation, Rollback, Saga

    retrier = make_user("acme-op-ao-retrier2", tenant=tenant, staff=True)
    saga = Saga.objects.create(key="review-ao", tenant="acme", created_by=alice)
    rollback = Rollback.objects.create(saga=saga, trigger="api", requested_by=f"user:{operator.username}")
    Rollback.objects.filter(pk=rollback.pk).update(asked_by=operator)
    step = ToolCall.objects.create(tool_name="review_ao_step", tenant="acme", user=alice)
    compensation = Compensation.objects.create(
        saga=saga, rollback=rollback, step_call=step, step_tool="review_ao_step", tool_name="undo", sequence=1
    )
    compensation.retried_by.add(retrier)
    call = ToolCall.objects.create(tool_name="undo", tenant="acme", user=alice, kind="compensation")
    request = ApprovalRequest.objects.create(
        call=call, tool_name="undo", requested_by=alice, tenant="acme", expires_at="2100-01-01T00:00:00Z"
    )
    request.askers.add(operator)
    request.askers.add(retrier)
    ApprovalRequest.objects.filter(pk=request.pk).update(status="rejected")
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        call_command("migrate", "sagas", "0003", verbosity=0)  # approvals 0013 with it (noop backwards)
        call_command("migrate", "approvals", "0011", verbosity=0)
        call_command("migrate", "approvals", "0009", verbosity=0)
        call_command("migrate", "agents_app", "0013", verbosity=0)
    finally:
        MigrationExecutor(connection).migrate(latest)  # the later tests' schema, whatever happened

    assert Rollback.objects.get().asked_by == operator
    # Back past approvals 0011 (which added who asked) a decided request's askers go: nothing decides it again.
    assert list(ApprovalRequest.objects.get(pk=request.pk).askers.all()) == []
    assert Compensation.objects.get().retried_by.count() == 0
    assert (Saga.objects.count(), Compensation.objects.count(), ApprovalRequest.objects.count()) == (1, 1, 1)


@pytest.mark.django_db(transaction=True)
def test_reversing_asked_by_refuses_while_a_pending_request_has_an_asker(
    alice: User, operator: User, tenant: Tenant
) -> None:
    """Found: migrating approvals back to 0010 dropped a pending compensation request's asker (who rolled the saga
    back) silently: the older code then let them approve their own rollback's compensation alone.
    Expect: the reverse refuses with IrreversibleError naming the request; going back to 0011 keeps it."""
    call = ToolCall.objects.create(tool_name="undo", tenant="acme", user=alice, kind="compensation")
    request = ApprovalRequest.objects.create(
        call=call, tool_name="undo", requested_by=alice, tenant="acme", expires_at="2100-01-01T00:00:00Z"
    )
    request.askers.add(operator)
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        call_command("migrate", "approvals", "0011", verbosity=0)
        with pytest.raises(IrreversibleError) as refused:
            call_command("migrate", "approvals", "0010", verbosity=0)
    finally:
        MigrationExecutor(connection).migrate(latest)  # the later tests' schema, whatever happened
    assert f"1 pending approval request (#{request.pk})" in str(refused.value)
    assert list(ApprovalRequest.objects.get(pk=request.pk).askers.all()) == [operator]
