"""Review of 2026-12-05 (bo): operating toolhub's database in production (migrations, roles, audit triggers).

Each test fails on the reviewed code (main at 2c4a08d) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. The checkpoint numbering trigger (migration 0028) read ``max(seq)`` from an unqualified
   ``toolhub_auditcheckpoint``, resolved through the session's ``search_path``, where ``pg_temp`` comes first:
   the application role (PUBLIC holds TEMPORARY on a database) shadowed the table with a temporary one and stored
   checkpoint #9223372036854775807, after which no checkpoint can be stored or signed again: the attack 0028 was
   written to stop. Fixed (migration 0032): every function the audit triggers run has a fixed ``search_path``
   (the schema, then ``pg_temp``).
2. Migrating back past toolhub 0020 once per-tenant chains hold events failed with a bare
   ``DataError: smallint out of range``. Fixed: the reversal refuses first, naming the chains and what to do.

Checked and found holding (no test here): an upgrade of a PostgreSQL database filled by the code of a415fe2
(toolhub 0011, approvals 0005, agents_app 0006, sagas 0001: 154 calls in two tenants, 627 audit events, 25
approval requests pending, approved and rejected, 4 runs, 2 sagas, grants to users, groups and a tenant, one
signed checkpoint) to the head migrates without error; ``verify_audit`` then verifies all 627 events against the
old checkpoint, and ``verify_audit --tenant`` says the old events are in the platform's shared chains; after
``toolhub_db_roles`` the application role (a login over TCP) ran calls, approvals, runs and sagas with the head
code, stored checkpoint #2 and ``verify_audit`` passed (927 events); held approvals from before the upgrade were
decided after it. Migrating toolhub back one step at a time from 0031 to 0023 works. The application role cannot
UPDATE, DELETE or TRUNCATE audit tables, disable triggers or ALTER them (tests/audit/test_app_role.py).

Not fixed (reported): 0020 changes ``toolhub_auditevent.chain`` to ``bigint``, a rewrite of the largest table under
an ACCESS EXCLUSIVE lock, which the README does not mention (it predates the last release, 0028, so upgrades from
that release do not run it); ``toolhub_governance_bump()`` also resolved its table through the caller's search
path (a session could only keep its own grant changes from stamping; fixed since, the same way:
tests/governance/test_governance_cache.py); no check
warns when the application connects as a superuser or an owner (the README does not claim one).
"""

import pytest
from django.db import DatabaseError, connection, transaction

from tests.audit.conftest import app_role, append_events, as_role, audit_key  # noqa: F401 - fixtures, registered by import
from toolhub.checkpoints import audit_checkpoint_create
from toolhub.models import AuditCheckpoint

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.fail("database roles and audit triggers need DATABASE_URL pointing at PostgreSQL (use `make test`)")


def test_the_app_role_cannot_number_a_checkpoint_at_the_end_of_bigint_through_a_temporary_table(
    app_role: str,  # noqa: F811 - the fixture imported above
    as_role,  # noqa: ANN001, F811 - the fixture imported above
    audit_key: str,  # noqa: F811 - the fixture imported above
) -> None:
    """Found: ``toolhub_audit_checkpoint_numbered()`` (migration 0028) reads ``FROM toolhub_auditcheckpoint`` through
    the caller's ``search_path``; ``pg_temp`` is searched first for tables, and the application role may create
    temporary tables. A session of the application role creates ``toolhub_auditcheckpoint`` as a temporary table
    holding seq 2^63 - 1 - 1,000,000 and inserts into ``public.toolhub_auditcheckpoint`` a checkpoint numbered
    2^63 - 1: the trigger lets it through, and beat's every later checkpoint overflows.
    Expect: the trigger reads the real table whatever the session's search path: the checkpoint is refused.
    """
    _postgres()
    append_events(2)
    audit_checkpoint_create()  # #1
    schema = connection.ops.quote_name(connection.settings_dict.get("SCHEMA", "public"))
    refused = None
    with as_role(app_role):
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("CREATE TEMPORARY TABLE toolhub_auditcheckpoint (seq bigint) ON COMMIT DROP")
                cursor.execute("INSERT INTO pg_temp.toolhub_auditcheckpoint VALUES (%s)", [2**63 - 1 - 1_000_000])
                cursor.execute(
                    f"INSERT INTO {schema}.toolhub_auditcheckpoint (seq, created_at, body, signature, acknowledged) "
                    "VALUES (%s, now(), '{}', 'not-signed', false)",
                    [2**63 - 1],
                )
        except DatabaseError as exc:
            refused = str(exc)

    assert refused is not None and "checkpoint #9223372036854775807 refused" in refused
    assert list(AuditCheckpoint.objects.values_list("seq", flat=True)) == [1]


@pytest.mark.django_db(transaction=True)
def test_migrating_back_past_0020_with_per_tenant_chains_says_why_it_cannot(tenant: object) -> None:
    """Found: ``manage.py migrate toolhub 0019`` on a database whose tenants' events are on their own chains (every
    event since 0020) failed in the middle of an ALTER with ``django.db.utils.DataError: smallint out of range``.
    Expect: the reversal is refused before any column changes, saying which rows cannot go back and what to do.
    """
    from django.db.migrations.exceptions import IrreversibleError
    from django.db.migrations.executor import MigrationExecutor

    _postgres()
    (event,) = append_events(1)
    assert event.chain > 32767  # acme's own chain
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    try:
        with pytest.raises(IrreversibleError, match=r"toolhub 0020 cannot be reversed: 1 audit events"):
            executor.migrate([("toolhub", "0019_audit_event_type_without_like_twin")])
    finally:
        MigrationExecutor(connection).migrate(latest)
