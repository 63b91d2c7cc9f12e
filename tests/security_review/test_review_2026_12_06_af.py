"""Review 2026-12-06 (af): what ``verify_audit`` calls a missing key, a call's times, two landed console changes.

Each test fails on the reviewed code (main at c448e88) and passes after the fix.

Findings:

1. ``verify_audit`` printed every problem as ``TAMPERED``, the stored checkpoints that could not be checked
   because ``TOOLHUB_AUDIT_KEY`` is not set in the process included, and the console's record kept that line
   as any other problem. Now each problem of a verification carries its kind (``toolhub.audit_proof.TrailProblem``:
   ``TAMPERED`` or ``UNVERIFIABLE``): the command labels it so, the record keeps it as "cannot verify: ...",
   and the run still fails (non-zero exit, recorded as not proven).
2. A call decided and started in this process (the embedded mode) was written with ``started_at`` (and
   ``queued_at``, or a refusal's ``finished_at``) a few ms before its ``created_at``: the pipeline took its ``now``
   before the INSERT stamped ``auto_now_add``. A start before creation reads as tampering to an auditor. Now the
   decision's instant is the row's ``created_at`` too (``insert_params`` keeps an ``auto_now_add`` value given).

Checked and found holding:

- A tampered event with the key missing is still labelled ``TAMPERED`` beside the ``UNVERIFIABLE`` line.
- ``ShownRelation`` ("-" for an empty foreign key): its only caller is ``shared_in_part_relations``
  (admin_helpers), which passes the admin's own ``get_empty_value_display()``; a withheld row still shows the
  withheld label, a visible one its name; list columns and read-only fields alike.
- ``DEMO_NOTIFY_API_KEY`` in settings is set only under ``DEBUG`` (``setdefault``, never overriding a real key);
  ``TOOLHUB_DEMO=1`` without ``DJANGO_DEBUG`` sets nothing (the production settings keep it unset).
- ``reference_warnings`` (MAX_REFERENCE_WARNINGS): its three callers keep their ids (toolhub.W006, W007,
  approvals.W001), the count carries the same id (silencing one silences both), every row is still judged.
  Noted, not a finding: W006 reads grants unordered (``Grant`` has no ``Meta.ordering``), so which 25 are named
  follows the table's order; fixing those listed and running again still reaches the rest.
- The other times of a call (a claim by a worker, a hand-back, a settlement) are taken after the row exists.
"""

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from tests.audit.conftest import append_events, owner_tampering
from tests.helpers import RequestCall
from toolhub.audit_proof import TAMPERED, UNVERIFIABLE, audit_trail_verify
from toolhub.checkpoints import audit_checkpoint_create
from toolhub.models import AuditEvent, AuditVerification, CallStatus

pytestmark = pytest.mark.django_db


def _verify_fails() -> tuple[str, str]:
    err = StringIO()
    with pytest.raises(CommandError) as excinfo:
        call_command("verify_audit", "--no-progress", stdout=StringIO(), stderr=err)
    return str(excinfo.value), err.getvalue()


def test_a_missing_checkpoint_key_is_unverifiable_not_tampered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: without TOOLHUB_AUDIT_KEY, verify_audit printed "TAMPERED the stored checkpoints cannot be checked".
    Expect: labelled UNVERIFIABLE, naming the variable to set; still a failure, recorded as not proven, and the
    record says it could not be checked."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", "review-af-key")
    append_events(2)
    audit_checkpoint_create()
    monkeypatch.delenv("TOOLHUB_AUDIT_KEY")

    error, err = _verify_fails()

    assert "TAMPERED" not in err
    assert err.startswith("UNVERIFIABLE the checkpoint key is not configured here")
    assert "Set the environment variable TOOLHUB_AUDIT_KEY" in err and "does not verify" in error
    record = AuditVerification.objects.get(tenant="")
    assert not record.ok and record.problems.startswith("cannot verify: the checkpoint key is not configured here")


def test_each_problem_carries_its_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: a verification's problems were bare texts, so the command could only call them all TAMPERED.
    Expect: each has its kind; a rewritten event stays TAMPERED beside the missing key's UNVERIFIABLE."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", "review-af-key")
    events = append_events(3)
    audit_checkpoint_create()
    monkeypatch.delenv("TOOLHUB_AUDIT_KEY")
    with owner_tampering():
        AuditEvent.objects.filter(pk=events[1].pk).update(event_type="test.other")

    problems = audit_trail_verify().problems

    assert [problem.kind for problem in problems] == [TAMPERED, UNVERIFIABLE]
    assert f"event #{events[1].pk}" in str(problems[0])
    _, err = _verify_fails()
    assert f"TAMPERED chain {events[1].chain}: event #{events[1].pk}" in err
    assert "UNVERIFIABLE the checkpoint key is not configured here" in err


def test_a_call_run_in_this_process_never_starts_before_it_was_created(request_call: RequestCall, alice: User) -> None:
    """Found: in the embedded mode started_at and queued_at were taken before the INSERT stamped created_at,
    so a call read as started a few ms before it existed. Expect: one instant for all three."""
    call = request_call("record_effect", '{"note": "af"}', user=alice, tenant="acme")

    assert call.status == CallStatus.SUCCEEDED and call.worker == "eager"
    assert call.created_at == call.queued_at == call.started_at <= call.finished_at


def test_a_refused_call_is_not_finished_before_it_was_created(request_call: RequestCall, alice: User) -> None:
    """Found: a refused call's finished_at was the decision's time, before its created_at.
    Expect: finished no earlier than created."""
    call = request_call("no_such_tool_af", "{}", user=alice, tenant="acme")

    assert call.status in {CallStatus.DENIED, CallStatus.INVALID}
    assert call.finished_at is not None and call.created_at <= call.finished_at
