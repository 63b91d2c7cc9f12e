"""Probe of 2026-12-04 (k): the heads read before the check, the per-tenant records, concurrent appends.

Each test failed on the code as probed (its docstring says how) and passes now: the heads about to be signed
are checked apart against the run signed before (none goes back), and a run's checkpoints naming a head behind
an earlier one's is a problem; an acknowledged checkpoint covers its own acknowledgement; a wiped chain's
problem goes to its tenant's record; a head that moved during verification is read again, not reported.
"""

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from tests.audit.conftest import (
    append_events,
    cut_chain_tail,
    keys_in_distinct_chains,
    owner_tampering,
    verify_audit_fails,
)
from toolhub import audit_verify, checkpoints
from toolhub.checkpoints import CheckpointRefusedError, audit_checkpoint_create
from toolhub.models import AuditChainHead, AuditCheckpoint, AuditEvent, AuditVerification, Tenant

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("kind", ["delta", "full"])
def test_a_head_rewound_for_the_read_and_restored_for_the_check_is_signed_away(
    audit_key: str, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The newest commit reads the heads it signs *before* ``_standing_problems()``, in another statement of a
    READ COMMITTED transaction. The owner turns that order around: the head row of chain a is rewound (to an
    older, genuine event) when beat reads the heads, and put back before the check reads the database
    (deterministically: hold ACCESS EXCLUSIVE on toolhub_auditcheckpoint, so beat blocks in the check right
    after the read; restore the head; release). The check sees an intact trail, and beat signs the rewound head
    (a delta names it as "moved", ``_named`` lets it win over the full one's; a full one just names it).
    Then the owner cuts the tail for real: verify_audit reports the trail intact from then on.
    (toolhub/checkpoints.py ``audit_checkpoint_create``: heads and check read different snapshots, and the
    heads to sign are never compared with the heads signed before.) Simulated on one connection here.
    """
    first, second = keys_in_distinct_chains(2)
    a = append_events(4, first)
    append_events(2, second)
    audit_checkpoint_create()  # #1 names chain a at seq 4

    with owner_tampering():  # rewound only for beat's read of the heads
        AuditChainHead.objects.filter(chain=a[0].chain).update(seq=a[1].seq, hash=a[1].hash)

    checked = checkpoints._standing_problems

    def restored_then_checked(*heads: Any) -> list[Any]:
        with owner_tampering():
            AuditChainHead.objects.filter(chain=a[0].chain).update(seq=a[3].seq, hash=a[3].hash)
        return checked(*heads)

    monkeypatch.setattr(checkpoints, "_standing_problems", restored_then_checked)
    try:
        audit_checkpoint_create(full=(kind == "full"))  # beat
    except CheckpointRefusedError:
        pass  # refusing is a fix too
    monkeypatch.setattr(checkpoints, "_standing_problems", checked)

    cut_chain_tail(a[1], a[2], a[3])  # now the owner cuts the two newest events for good

    assert f"chain {a[0].chain}" in verify_audit_fails()


def test_the_nightly_run_records_a_tenant_with_a_wiped_chain_as_intact(audit_key: str, tenant: Tenant) -> None:
    """``verify_audit`` (whole trail) records each tenant's share (``_record_each_tenant``) by walking the
    chain *results*: only chains that still have a head row or an event. A chain the owner wiped (events and
    head) has neither, so the checkpoint's problem "chain N: ... the chain was wiped" (it carries its chain)
    is attributed to no tenant: acme's record, which its auditors read in the console as their proof, says
    ok=True with no problem, while the whole trail's run fails (toolhub/audit_proof.py ``_record_each_tenant``).
    """
    first, second = keys_in_distinct_chains(2)
    a = append_events(3, first)
    append_events(2, second)
    audit_checkpoint_create()
    with owner_tampering():
        AuditEvent.objects.filter(chain=a[0].chain).delete()
        AuditChainHead.objects.filter(chain=a[0].chain).delete()

    assert "the chain was wiped" in verify_audit_fails()  # the whole trail's run catches it ...

    acme = AuditVerification.objects.get(tenant="acme")
    assert not acme.ok and "the chain was wiped" in acme.problems  # ... and acme's own record must say so


def test_an_append_during_verification_is_not_reported_as_tampering(
    audit_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``verify_chains`` reads every chain head first, then walks each chain later in a transaction of its
    own. A legitimate append to a chain in between (any call, while the nightly run reads other chains) puts an
    event after the head read: the walk ends one seq beyond it and reports "chain head says seq N: the newest
    events were removed": TAMPERED on an untouched trail, for every busy chain of a live system
    (toolhub/audit_verify.py ``verify_chains``/``_verify_chain``: the head compared is not read with the walk).
    """
    events = append_events(2)
    real = audit_verify._verify_chain

    def append_then_walk(chain: int, *args: Any, **kwargs: Any) -> Any:
        if chain == events[0].chain and AuditEvent.objects.filter(chain=chain).count() == 2:
            append_events(1, events[0].call_id)  # a call's event, committed by another connection meanwhile
        return real(chain, *args, **kwargs)

    monkeypatch.setattr(audit_verify, "_verify_chain", append_then_walk)
    out = StringIO()
    call_command("verify_audit", "--no-progress", "--workers", "1", stdout=out, stderr=StringIO())
    assert "every chain intact" in out.getvalue()


def test_the_acknowledged_checkpoint_covers_its_own_acknowledgement(audit_key: str) -> None:
    """README: a person's acknowledgement signs "a full checkpoint, after an audit.checkpoint_acknowledged event
    in the trail with who, why and the problems". Since the newest commit the heads are read before the check,
    so before ``_acknowledged`` appends that event: the acknowledged checkpoint does not name it, and until the
    next beat the owner can delete the record of who signed over which tampering (the tail of the platform's
    chain 0) and rewind its head, unseen (toolhub/checkpoints.py ``audit_checkpoint_create``).
    """
    events = append_events(3)
    audit_checkpoint_create()
    cut_chain_tail(events[0], events[1], events[2])

    call_command("audit_checkpoint", "--acknowledge", "incident 45", stdout=StringIO(), stderr=StringIO())

    acknowledged = AuditEvent.objects.get(event_type="audit.checkpoint_acknowledged")
    newest = AuditCheckpoint.objects.order_by("-seq").first()
    heads = json.loads(newest.body)["heads"]
    assert heads.get(str(acknowledged.chain), {}).get("seq") == acknowledged.seq


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgresql_the_rewind_and_restore_is_deterministic_with_a_lock_on_the_checkpoints(
    audit_key: str,
) -> None:
    """The first test with real connections on PostgreSQL: no timing luck is needed. The owner rewinds the
    head, holds ACCESS EXCLUSIVE on toolhub_auditcheckpoint, waits until beat blocks on it (right after its
    read of the heads), restores the head and releases. Beat signs the rewound head; the owner cuts the tail
    for good; verify_audit reports the trail intact.
    """
    import threading
    import time

    import psycopg
    from django.db import connection, connections

    first, second = keys_in_distinct_chains(2)
    a = append_events(4, first)
    append_events(2, second)
    audit_checkpoint_create()
    chain = a[0].chain

    params = connection.get_connection_params()
    dsn = {k: v for k, v in params.items() if k in {"dbname", "user", "password", "host", "port"}}
    owner = psycopg.connect(**dsn, autocommit=True)
    # the owner's rewinds go past the head's forward-only trigger (migration 0026), as its DDL rights allow
    owner.execute("SET session_replication_role = replica")
    locker = psycopg.connect(**dsn)
    owner.execute(
        "UPDATE toolhub_auditchainhead SET seq = %s, hash = %s WHERE chain = %s", [a[1].seq, a[1].hash, chain]
    )
    locker.execute("LOCK TABLE toolhub_auditcheckpoint IN ACCESS EXCLUSIVE MODE")

    outcome: list[Any] = []

    def beat() -> None:
        try:
            outcome.append(audit_checkpoint_create())
        except Exception as exc:  # noqa: BLE001
            outcome.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=beat)
    thread.start()
    for _ in range(100):  # beat has read the heads and waits for the checkpoint table
        waiting = owner.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%%auditcheckpoint%%'"
        ).fetchone()[0]
        if waiting:
            break
        time.sleep(0.05)
    owner.execute(
        "UPDATE toolhub_auditchainhead SET seq = %s, hash = %s WHERE chain = %s", [a[3].seq, a[3].hash, chain]
    )
    locker.rollback()
    thread.join(30)
    locker.close()

    owner.execute("ALTER TABLE toolhub_auditevent DISABLE TRIGGER USER")
    owner.execute("DELETE FROM toolhub_auditevent WHERE id IN (%s, %s)", [a[2].pk, a[3].pk])
    owner.execute("ALTER TABLE toolhub_auditevent ENABLE TRIGGER USER")
    owner.execute(
        "UPDATE toolhub_auditchainhead SET seq = %s, hash = %s WHERE chain = %s", [a[1].seq, a[1].hash, chain]
    )
    owner.close()

    assert not isinstance(outcome[0], Exception) or isinstance(outcome[0], CheckpointRefusedError), outcome
    assert f"chain {chain}" in verify_audit_fails()
