"""Probe of 2026-12-04 (x): the deployment posture and the guarantees below the application.

The application's PostgreSQL role as ``manage.py toolhub_db_roles`` makes it, what it can still do to the audit
trail and whether ``verify_audit`` sees it; the production settings and ``check --deploy``; management commands
run as documented.

Each test fails on the code as probed; its docstring says what was found and what is expected. The tests marked
``postgres`` need PostgreSQL (roles and triggers exist there only); under ``CI=true`` they fail, never skip,
without it. Roles are created inside the test's transaction (``CREATE ROLE`` is transactional) and vanish with it.
"""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from tests.audit.conftest import app_role, append_events, keys_in_distinct_chains  # noqa: F401 - fixtures, registered by import
from tests.posture.conftest import PRODUCTION_ENV, RunDjango, run_django  # noqa: F401 - a fixture, by import
from toolhub.models import AuditChainHead, AuditCheckpoint, AuditEvent, AuditVerification

pytestmark = pytest.mark.django_db


def _postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.fail("database roles and audit triggers need DATABASE_URL pointing at PostgreSQL (use `make test`)")


def _as(role: str, sql: str, params: list[int | str] | None = None) -> str | None:
    """Run one statement with ``role``'s privileges; None when it ran, else the database's refusal."""
    quoted = connection.ops.quote_name(role)
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL ROLE {quoted}")
            cursor.execute(sql, params)
    except DatabaseError as exc:
        return str(exc)
    return None


def _verify(*args: str) -> tuple[bool, str]:
    """``verify_audit`` in one process: (passed, what it said)."""
    out, err = StringIO(), StringIO()
    try:
        call_command("verify_audit", "--no-progress", "--workers", "1", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return False, f"{exc}\n{err.getvalue()}"
    return True, out.getvalue()


# --- the application role and the chain heads ----------------------------------------------------------------


@pytest.mark.postgres
def test_the_app_role_removes_a_chain_head_by_renaming_it_and_verify_audit_passes(
    app_role: str,  # noqa: F811 - the fixture imported above
    audit_key: str,
) -> None:
    """Found: the application role holds UPDATE on ``toolhub_auditchainhead`` (every append moves a head), on every
    column, its key ``chain`` included. Migration 0007 says "a chain head may move forward but never be deleted",
    but its trigger refuses only DELETE: ``UPDATE toolhub_auditchainhead SET chain = <unused>, seq = 0, hash = ''``
    removes acme's head as surely as a DELETE would (and a ``seq`` may as well go back). ``verify_audit`` then
    reports the trail intact: ``_walk_chain`` checks the head only ``if head is not None``, so a chain holding
    events and no head passes, and the moved row (no events, seq 0) passes too. Every later call of that acme
    chain fails (its head is re-created at seq 1, which the chain already holds). A chain no checkpoint named yet
    (its first event came after beat's last one) is reported by nothing, ever: beat's next checkpoints check only
    the chains named before, and are signed without it.
    Expect: the role cannot move a head off its chain (a trigger refusing a change of ``chain`` or a ``seq`` going
    back, or UPDATE granted on ``seq``, ``hash``, ``previous_hash`` only), or verify_audit names the chain.
    """
    _postgres()
    from django.db import IntegrityError

    from toolhub.checkpoints import audit_checkpoint_create

    earlier, later = keys_in_distinct_chains(2)
    append_events(2, key=earlier)
    audit_checkpoint_create()  # beat's checkpoint, before the chain below had any event
    events = append_events(3, key=later)
    chain = events[0].chain
    assert AuditChainHead.objects.get(chain=chain).seq == 3

    refused = _as(
        app_role,
        "UPDATE toolhub_auditchainhead SET chain = %s, seq = 0, hash = '', previous_hash = '' WHERE chain = %s",
        [2**62 + 12345, chain],
    )

    if refused is None:
        assert not AuditChainHead.objects.filter(chain=chain).exists()  # the head is gone from its chain
        with pytest.raises(IntegrityError):  # and acme's next append to that chain fails
            append_events(1, key=later)
        audit_checkpoint_create()  # beat goes on: the next checkpoint is signed without the chain
        passed, said = _verify()
        assert not passed, f"the app role removed chain {chain}'s head and verify_audit says: {said}"
        assert str(chain) in said
    assert AuditEvent.objects.filter(chain=chain).count() == 3


@pytest.mark.postgres
def test_the_db_roles_command_accepts_a_role_that_owns_the_audit_tables() -> None:
    """Found: ``toolhub.dbroles.db_app_role_ensure`` refuses a role equal to ``current_user`` or a member of it, and
    takes ``current_user`` for "the owner". It never asks who owns the audit tables. Run as a superuser (as DBAs
    do, and as the project's own tests and CI do), against tables owned by the application role itself (a
    deployment that first ran ``migrate`` as ``toolhub_app``, then followed the README), it succeeds and prints
    "audit tables toolhub_auditevent: SELECT, INSERT ...", while the role still owns them: it disables the
    append-only triggers (``ALTER TABLE ... DISABLE TRIGGER ALL``) and rewrites events. The README: "The role must
    not be the owner, a member of it, or a superuser: the command refuses such a role."
    Expect: the command refuses a role that owns (or is a member of a role owning) an audit table or its trigger
    functions, naming the table; nothing is granted.
    """
    _postgres()
    role = "probe_x_app_owner"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE ROLE {role} LOGIN")
        for table in ("toolhub_auditevent", "toolhub_auditchainhead", "toolhub_auditcheckpoint"):
            cursor.execute(f"ALTER TABLE {table} OWNER TO {role}")

    try:
        call_command("toolhub_db_roles", "--role", role, stdout=StringIO(), stderr=StringIO())
    except CommandError:
        return  # refused, as expected
    disabled = _as(role, "ALTER TABLE toolhub_auditevent DISABLE TRIGGER ALL")
    pytest.fail(
        f"toolhub_db_roles accepted {role}, which owns the audit tables"
        + ("; the role then disabled the append-only triggers" if disabled is None else "")
    )


# --- what the application role can still write about the trail ------------------------------------------------


@pytest.mark.postgres
def test_the_app_role_rewrites_a_failed_verification_as_passed(
    app_role: str,  # noqa: F811 - the fixture imported above
) -> None:
    """Found: ``toolhub.dbroles`` keeps the audit *events, heads and checkpoints* append-only, but the record of each
    ``verify_audit`` run (``toolhub_auditverification``, which the console shows every tenant's auditors as
    "a fresh proof without running one") gets ``DATA_PRIVILEGES``: the application role turns a failed
    verification into a passed one (``UPDATE ... SET ok = true, problems = ''``) or deletes it, so the console
    shows the trail as proven intact and no trace of the failure is left. verify_audit (workers, the console's
    "Verify now") only ever INSERTs these rows.
    Expect: the application role may only SELECT and INSERT verification records (``APPEND_ONLY_PRIVILEGES``, and a
    trigger like the other audit tables'); the failed record stays as written.
    """
    _postgres()
    from django.utils import timezone

    now = timezone.now()
    failed = AuditVerification.objects.create(
        tenant="acme",
        started_at=now,
        finished_at=now,
        events_checked=10,
        ok=False,
        problems="chain 7: event #3 (seq 3): hash does not match its content: event was altered",
    )

    rewritten = _as(
        app_role, "UPDATE toolhub_auditverification SET ok = true, problems = '' WHERE id = %s", [failed.pk]
    )
    deleted = _as(app_role, "DELETE FROM toolhub_auditverification WHERE id = %s", [failed.pk])

    assert rewritten is not None, "the application role rewrote a failed verification as passed"
    assert deleted is not None, "the application role deleted a failed verification"
    failed.refresh_from_db()
    assert failed.ok is False


@pytest.mark.postgres
def test_the_app_role_stops_every_future_checkpoint_without_the_key(
    app_role: str,  # noqa: F811 - the fixture imported above
    audit_key: str,
) -> None:
    """Found: the application role may INSERT checkpoints (beat signs them), and nothing bounds the number it gives
    one. Without the key it inserts an unsigned row numbered 9223372036854775807 (the largest ``bigint``): beat
    refuses from then on (the newest checkpoint is forged: right), and the documented way out, ``audit_checkpoint
    --acknowledge "why"``, numbers the next one ``last + 1`` (``audit_checkpoint_create``) and dies with a
    ``DataError`` (bigint out of range), not even a ``CommandError``. No checkpoint can ever be signed again
    until the owner disables the triggers to delete the row: the tail-truncation check is gone for good.
    Expect: the row is refused (checkpoints numbered one after the newest, by a trigger or a constraint), or the
    acknowledgement still signs a checkpoint (numbered after the newest *signed* one).
    """
    _postgres()
    from toolhub.checkpoints import audit_checkpoint_create

    append_events(2)
    audit_checkpoint_create()

    planted = _as(
        app_role,
        "INSERT INTO toolhub_auditcheckpoint (seq, created_at, body, signature, acknowledged) "
        "VALUES (9223372036854775807, now(), '{}', 'not-signed', false)",
    )

    if planted is None:
        try:
            with transaction.atomic():
                call_command(
                    "audit_checkpoint",
                    "--acknowledge",
                    "a forged row was planted",
                    stdout=StringIO(),
                    stderr=StringIO(),
                )
        except Exception as exc:  # noqa: BLE001 - whatever stops the acknowledgement is the finding
            pytest.fail(f"after the app role planted checkpoint #2**63-1, the acknowledgement fails: {exc!r}")
        assert AuditCheckpoint.objects.filter(acknowledged=True).exists()


# --- production settings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["...", None], ids=["the-readme-placeholder", "unset"])
def test_check_deploy_passes_with_no_usable_audit_key(
    run_django: RunDjango,  # noqa: F811 - the fixture imported above
    key: str | None,
) -> None:
    """Found: the README's production block sets ``TOOLHUB_AUDIT_KEY=...`` and says "With these, ``manage.py check
    --deploy --fail-level WARNING`` reports no issues ... run it before each deployment". It reports none with the
    key left as the placeholder ``...`` (an HMAC key of three known bytes: whoever reads a checkpoint row, the
    database owner the checkpoints exist to check, signs their own) and none with the key unset, where beat only
    logs a warning each interval, no checkpoint is ever stored, and ``verify_audit`` exits 0 ("No stored checkpoint
    yet"), so the cron alert on a non-zero exit never fires while truncated tails go unseen. Django flags a weak
    ``SECRET_KEY`` (security.W009); the audit key, the one that stands outside the database, gets no check.
    Expect: ``check --deploy --fail-level WARNING`` fails when the audit key is missing or weak (e.g. shorter than
    32 characters, or equal to ``DJANGO_SECRET_KEY``), naming ``TOOLHUB_AUDIT_KEY``.
    """
    env = {name: value for name, value in PRODUCTION_ENV.items() if name != "TOOLHUB_AUDIT_KEY"}
    if key is not None:
        env["TOOLHUB_AUDIT_KEY"] = key
    # "..." is what the README's block holds (tests/posture/conftest.py asserts it, then fills a real key in)

    result = run_django("manage.py", "check", "--deploy", "--fail-level", "WARNING", **env)

    assert result.returncode != 0, f"check --deploy passed with TOOLHUB_AUDIT_KEY={key!r}: {result.stdout}"
    assert "TOOLHUB_AUDIT_KEY" in result.stderr


# --- management commands ---------------------------------------------------------------------------------------


def test_generate_calls_forges_backdated_history_into_a_production_trail(tenant: object, alice: object) -> None:
    """Found: ``manage.py generate_calls`` ships with the core app (``load_demo`` is left out of a production
    install; this is not) and runs with DEBUG off, against the real tenants and the first 20 active users. It
    COPYs calls attributed to real users (``user_id``) with ``call.requested`` events by ``agent:<name>``, dated
    over the last 30 days, chained onto the live heads, so ``verify_audit`` passes over them and the console lists
    them among the tenant's history; and the trail holds no event saying the command ran, by whom. The README only
    asks "never run it on a production database".
    Expect: with DEBUG off the command refuses (unless asked explicitly, e.g. ``TOOLHUB_DEMO``/a flag), or at least
    appends an audit event naming the command, its actor and what it wrote.
    """
    from django.conf import settings

    assert settings.DEBUG is False  # as in production
    before = set(AuditEvent.objects.values_list("id", flat=True))

    try:
        call_command("generate_calls", "5", "--tenants", "acme", stdout=StringIO(), stderr=StringIO())
    except CommandError:
        return  # refused in production, as expected

    written = AuditEvent.objects.exclude(id__in=before)
    assert written.exists()
    recorded = (
        written.filter(event_type__startswith="audit.").exists()
        or written.filter(actor__startswith="command:").exists()
    )
    assert recorded, "generate_calls wrote backdated calls into acme's trail and no event records that it ran"
