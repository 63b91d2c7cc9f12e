"""Fixtures for the audit trail's database guarantees: the application role, tampering as the owner, the key."""

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction

from toolhub.audit import audit_append
from toolhub.audit_hash import chain_for
from toolhub.models import AuditChainHead, AuditCheckpoint, AuditEvent

AUDIT_TABLES = ("toolhub_auditevent", "toolhub_auditchainhead", "toolhub_auditcheckpoint")


@pytest.fixture
def audit_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", "audit-test-key")
    return "audit-test-key"


@pytest.fixture
def app_role(db: None) -> str:
    """A fresh application role made by the command; created inside the test's transaction, so it vanishes with it."""
    role = f"toolhub_app_{uuid.uuid4().hex[:12]}"
    call_command("toolhub_db_roles", "--role", role, stdout=None)
    return role


@pytest.fixture
def as_role() -> Callable[[str], AbstractContextManager[None]]:
    """Run statements with the privileges of another role, as its own connection would."""

    @contextmanager
    def acting(role: str) -> Iterator[None]:
        with connection.cursor() as cursor:
            cursor.execute(f"SET ROLE {connection.ops.quote_name(role)}")
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET ROLE")

    return acting


@contextmanager
def owner_tampering() -> Iterator[None]:
    """An attacker with the owner's rights: every audit trigger off, then on again (SQLite has none)."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        for table in AUDIT_TABLES:
            cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            for table in AUDIT_TABLES:
                cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")


def cut_chain_tail(kept: AuditEvent, *cut: AuditEvent) -> None:
    """An attacker with the owner's rights deletes a chain's newest events and rewinds its head to ``kept``."""
    with owner_tampering():
        AuditEvent.objects.filter(pk__in=[event.pk for event in cut]).delete()
        AuditChainHead.objects.filter(chain=kept.chain).update(seq=kept.seq, hash=kept.hash)


def forge_stored_checkpoint(chain: int, seq: int) -> None:
    """An attacker with the owner's rights rewrites the one stored checkpoint's head of ``chain`` (unsigned)."""
    stored = AuditCheckpoint.objects.get()
    forged = json.loads(stored.body)
    forged["heads"][str(chain)]["seq"] = seq
    with owner_tampering():
        AuditCheckpoint.objects.filter(pk=stored.pk).update(body=json.dumps(forged))


def keys_in_distinct_chains(count: int) -> list[uuid.UUID]:
    """Call ids that land in ``count`` different chains."""
    by_chain: dict[int, uuid.UUID] = {}
    while len(by_chain) < count:
        key = uuid.uuid4()
        by_chain.setdefault(chain_for(key, "acme"), key)
    return list(by_chain.values())


def append_events(count: int, key: uuid.UUID | None = None) -> list[AuditEvent]:
    """Append ``count`` events of one call the way the application does."""
    key = key or uuid.uuid4()
    with transaction.atomic():
        return [
            audit_append(
                event_type=f"test.step{index}",
                actor="tester",
                data={"index": index, "amount": Decimal("1.50")},
                call_id=key,
                tool_name="record_effect",
                status="queued",
                tenant="acme",
            )
            for index in range(1, count + 1)
        ]


def verify_audit_fails(*args: str) -> str:
    """Run ``verify_audit`` (one process), which must fail; return what it said."""
    with pytest.raises(CommandError) as excinfo:
        call_command("verify_audit", "--no-progress", "--workers", "1", *args, stdout=StringIO(), stderr=StringIO())
    return str(excinfo.value)


def acknowledge_checkpoint(why: str) -> None:
    """Sign over a contradicted trail as a person would: ``audit_checkpoint --acknowledge``."""
    call_command("audit_checkpoint", "--acknowledge", why, stdout=StringIO(), stderr=StringIO())
