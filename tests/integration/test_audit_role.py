"""Real workers connect as the application role: governed calls still work, the audit trail only grows.

The pytest process is the owner that created and migrated the test database; every worker (and the
subprocesses below) logs in as the role ``manage.py toolhub_db_roles`` made (see conftest.py).
"""

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import psycopg
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.integration.conftest import AppRole
from tests.integration.workers import LOG_DIR, ROOT, Worker, wait_for, worker_environment
from toolhub.authorization import CallPrincipal
from toolhub.celery import app as celery_app
from toolhub.models import AuditChainHead, AuditCheckpoint, AuditEvent, CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

AUDIT_KEY = "integration-audit-key"
AUDIT_TABLES = ("toolhub_auditevent", "toolhub_auditchainhead", "toolhub_auditcheckpoint")


@pytest.fixture
def audit_writers() -> Iterator[str]:
    """Record which database user inserted each audit event (a trigger the owner adds for this test only)."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE itest_audit_writer (db_user text, event_type text)")
        cursor.execute(
            "CREATE FUNCTION itest_record_writer() RETURNS trigger AS $$ BEGIN "
            "INSERT INTO itest_audit_writer VALUES (current_user, NEW.event_type); RETURN NEW; END; "
            "$$ LANGUAGE plpgsql"
        )
        cursor.execute(
            "CREATE TRIGGER itest_record_writer AFTER INSERT ON toolhub_auditevent "
            "FOR EACH ROW EXECUTE FUNCTION itest_record_writer()"
        )
    yield "itest_audit_writer"
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER itest_record_writer ON toolhub_auditevent")
        cursor.execute("DROP FUNCTION itest_record_writer()")
        cursor.execute("DROP TABLE itest_audit_writer")


@pytest.fixture
def own_queue() -> Iterator[str]:
    """Route this test's tasks (and its beat's) to a queue only its own worker consumes."""
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = f"{previous}-audit"
    yield celery_app.conf.task_default_queue
    celery_app.control.purge()
    celery_app.conf.task_default_queue = previous


def _writers() -> dict[str, set[str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT event_type, db_user FROM itest_audit_writer")
        found: dict[str, set[str]] = {}
        for event_type, user in cursor.fetchall():
            found.setdefault(event_type, set()).add(user)
    return found


def _owner() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        return cursor.fetchone()[0]


def _manage(app_role: AppRole, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``manage.py`` the way a deployment's web or worker process would: as the application role."""
    env = worker_environment(DATABASE_URL=app_role.url, TOOLHUB_AUDIT_KEY=AUDIT_KEY)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_a_governed_call_runs_on_a_worker_connected_as_the_app_role_and_the_trail_verifies(
    celery_worker: Worker,
    app_database_role: AppRole,
    audit_writers: str,
    alice: User,
    operator: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given a high-risk call that waits for an operator
    principal = CallPrincipal(user_id=alice.pk, username=alice.username, tenant="acme")
    call = tool_call_request(
        request=CallRequest(
            tool_name="risky_effect",
            arguments={"note": "as the app role"},
            principal=principal,
            context=ToolContext(tenant="acme"),
        )
    )
    assert call.status == CallStatus.PENDING_APPROVAL

    # when the operator approves and the worker runs it
    approval_approve(request_id=ApprovalRequest.objects.get(call=call).pk, user=operator, comment="fine")
    wait_for(lambda: ToolCall.objects.get(pk=call.pk).status == CallStatus.SUCCEEDED, what="call succeeded")

    # then the worker wrote its events as the application role, and the whole trail verifies
    writers = _writers()
    assert writers["call.running"] == {app_database_role.name}
    assert writers["call.succeeded"] == {app_database_role.name}
    assert writers["call.requested"] == {_owner()}
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", AUDIT_KEY)
    call_command("audit_checkpoint", stdout=StringIO())
    out = StringIO()
    call_command("verify_audit", "--no-progress", stdout=out)
    assert "every chain intact and matches stored checkpoint #1" in out.getvalue()


def test_a_connection_as_the_app_role_appends_but_cannot_change_remove_or_unguard_the_trail(
    app_database_role: AppRole, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given some trail, appended and checkpointed by the application itself (a process logged in as its role)
    appended = _manage(
        app_database_role,
        "shell",
        "-c",
        "from django.db import transaction\n"
        "from toolhub.audit import audit_append\n"
        "with transaction.atomic():\n"
        "    for n in range(3): audit_append(event_type='itest.append', actor='app', data={'n': n})\n",
    )
    assert appended.returncode == 0, appended.stderr
    stored = _manage(app_database_role, "audit_checkpoint")
    assert stored.returncode == 0, stored.stderr
    verified = _manage(app_database_role, "verify_audit", "--no-progress")
    assert verified.returncode == 0, verified.stderr
    assert "Audit trail verified: 3 events, every chain intact and matches stored checkpoint #1" in verified.stdout

    # when that role tries to rewrite, delete, truncate or unguard the audit tables
    refused = {}
    with psycopg.connect(app_database_role.url, autocommit=True) as app:
        assert app.execute("SELECT current_user").fetchone()[0] == app_database_role.name
        for statement in (
            "UPDATE toolhub_auditevent SET actor = 'mallory'",
            "DELETE FROM toolhub_auditevent",
            "TRUNCATE toolhub_auditevent",
            "ALTER TABLE toolhub_auditevent DISABLE TRIGGER toolhub_audit_append_only",
            "ALTER TABLE toolhub_auditevent DISABLE TRIGGER ALL",
            "UPDATE toolhub_auditcheckpoint SET signature = 'x'",
            "DELETE FROM toolhub_auditcheckpoint",
            "TRUNCATE toolhub_auditcheckpoint, toolhub_auditchainhead",
            "SET session_replication_role = replica",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege) as excinfo:
                app.execute(statement)
            refused[statement] = str(excinfo.value)

    # then every attempt was refused by the database and nothing changed
    assert (
        refused["UPDATE toolhub_auditevent SET actor = 'mallory'"] == "permission denied for table toolhub_auditevent"
    )
    assert "must be owner of table toolhub_auditevent" in refused["ALTER TABLE toolhub_auditevent DISABLE TRIGGER ALL"]
    assert list(AuditEvent.objects.values_list("actor", flat=True)) == ["app"] * 3
    assert AuditCheckpoint.objects.count() == 1
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", AUDIT_KEY)
    call_command("verify_audit", "--no-progress", stdout=StringIO())


def test_the_owner_cannot_truncate_the_audit_tables_either() -> None:
    refused = {}
    for table in AUDIT_TABLES:
        with pytest.raises(DatabaseError) as excinfo, transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {table}")
        refused[table] = str(excinfo.value)

    for table, message in refused.items():
        assert f"{table} is append-only: TRUNCATE refused" in message


class Beat:
    """One ``celery -A toolhub beat`` process, exactly as production runs it (a single one)."""

    def __init__(self, schedule: Path, **env: str) -> None:
        LOG_DIR.mkdir(exist_ok=True)
        self.log = LOG_DIR / f"beat-{os.getpid()}.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "toolhub", "beat", f"--schedule={schedule}", "--loglevel=INFO"],
            cwd=ROOT,
            env=worker_environment(**env),
            stdout=open(self.log, "ab"),  # noqa: SIM115 - closed with the process
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def test_beat_stores_checkpoints_through_a_worker_and_a_truncated_chain_then_fails_verification(
    own_queue: str, alice: User, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # given a worker (as the application role, holding the key) and some trail
    principal = CallPrincipal(user_id=alice.pk, username=alice.username, tenant="acme")
    worker = Worker("audit-beat", concurrency=1, TOOLHUB_AUDIT_KEY=AUDIT_KEY).start()
    beat = None
    try:
        calls = [
            tool_call_request(
                request=CallRequest(
                    tool_name="record_effect",
                    arguments={"note": f"n{index}"},
                    principal=principal,
                    context=ToolContext(tenant="acme"),
                )
            )
            for index in range(3)
        ]
        wait_for(
            lambda: ToolCall.objects.filter(pk__in=[c.pk for c in calls], status=CallStatus.SUCCEEDED).count() == 3,
            what="calls succeeded",
        )

        # when beat runs with a one-second checkpoint interval
        beat = Beat(tmp_path / "beat-schedule", TOOLHUB_AUDIT_CHECKPOINT_SECONDS="1")
        wait_for(lambda: AuditCheckpoint.objects.count() >= 2, timeout=60, what="two checkpoints stored by beat")
    finally:
        if beat is not None:
            beat.stop()
        worker.stop()

    # then the stored checkpoints cover the trail and verify
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", AUDIT_KEY)
    newest = AuditCheckpoint.objects.order_by("-seq").first()
    assert [c.seq for c in AuditCheckpoint.objects.order_by("seq")] == list(range(1, newest.seq + 1))
    out = StringIO()
    call_command("verify_audit", "--no-progress", stdout=out)
    assert f"matches stored checkpoint #{newest.seq}" in out.getvalue()

    # when an attacker with the owner's rights cuts the newest events of one chain and rewinds its head
    chain = AuditEvent.objects.get(call_id=calls[-1].pk, event_type="call.succeeded").chain
    with connection.cursor() as cursor:
        for table in AUDIT_TABLES:
            cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        try:
            last = AuditEvent.objects.filter(chain=chain).order_by("-seq").first()
            AuditEvent.objects.filter(pk=last.pk).delete()
            survivor = AuditEvent.objects.filter(chain=chain).order_by("-seq").first()
            AuditChainHead.objects.filter(chain=chain).update(
                seq=survivor.seq if survivor else 0, hash=survivor.hash if survivor else ""
            )
        finally:
            for table in AUDIT_TABLES:
                cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")

    # then verification fails and names that chain
    with pytest.raises(CommandError, match=rf"chain {chain}: the checkpoint's head \(seq {last.seq}\) is missing"):
        call_command("verify_audit", "--no-progress", stdout=StringIO(), stderr=StringIO())
