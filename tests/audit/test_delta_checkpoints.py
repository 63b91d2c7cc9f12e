"""Beat's checkpoints name only the heads that moved, on a full one; together they prove what a full one would."""

import json
import uuid
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import transaction

from tests.audit.conftest import (
    append_events,
    cut_chain_tail,
    forge_stored_checkpoint,
    keys_in_distinct_chains,
    owner_tampering,
    verify_audit_fails,
)
from toolhub import checkpoints
from toolhub.audit import audit_append
from toolhub.checkpoints import CheckpointRefusedError, audit_checkpoint_create, audit_stored_checkpoint_problems
from toolhub.models import AuditCheckpoint, AuditEvent

pytestmark = pytest.mark.django_db


def _bodies() -> list[dict[str, Any]]:
    return [json.loads(row.body) for row in AuditCheckpoint.objects.order_by("seq")]


def _verify() -> str:
    out = StringIO()
    call_command("verify_audit", "--no-progress", stdout=out, stderr=StringIO())
    return out.getvalue()


def _two_chains() -> tuple[list[AuditEvent], list[AuditEvent]]:
    first, second = keys_in_distinct_chains(2)
    return append_events(4, first), append_events(3, second)


def test_a_delta_names_only_the_heads_that_moved_and_its_base_proves_the_rest(audit_key: str) -> None:
    # given a full checkpoint of two chains, then one more event in chain a and a delta
    a, b = _two_chains()
    audit_checkpoint_create()
    append_events(1, a[0].call_id)
    audit_checkpoint_create()
    full, delta = _bodies()
    assert sorted(full["heads"]) == sorted([str(a[0].chain), str(b[0].chain)]) and "base" not in full
    assert delta["base"] == 1 and list(delta["heads"]) == [str(a[0].chain)]
    output = _verify()
    assert "every chain intact and matches stored checkpoint #2 of " in output
    assert " (a delta on full checkpoint #1)" in output

    # when chain b, which only the full checkpoint names, loses its newest event and its head is rewound
    cut_chain_tail(b[1], b[2])

    # then verification against the newest (a delta) still catches it, through its base
    error = verify_audit_fails()
    assert f"chain {b[0].chain}: the checkpoint's head (seq 3) is missing: the tail was truncated" in error
    assert "(per stored checkpoint #1)" in error


def test_a_chain_rewound_to_before_its_delta_head_is_caught_per_that_delta(audit_key: str) -> None:
    a, _ = _two_chains()
    audit_checkpoint_create()
    more = append_events(2, a[0].call_id)
    audit_checkpoint_create()

    cut_chain_tail(more[0], more[1])

    error = verify_audit_fails()
    assert f"chain {a[0].chain}: the checkpoint's head (seq 6) is missing" in error
    assert "(per stored checkpoint #2)" in error


def test_a_full_checkpoint_follows_once_the_deltas_would_name_more_heads_than_there_are_chains(
    audit_key: str,
) -> None:
    a, _ = _two_chains()  # 2 chains
    for _ in range(4):
        audit_checkpoint_create()
        append_events(1, a[0].call_id)  # one head moves between checkpoints
    kinds = ["delta" if "base" in body else "full" for body in _bodies()]
    # #2 and #3 name 1 head each (2 in all, as many as there are chains); #4 would make 3
    assert kinds == ["full", "delta", "delta", "full"]
    assert "matches stored checkpoint #4" in _verify()


def test_a_full_checkpoint_follows_after_deltas_per_full_deltas(
    audit_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoints, "DELTAS_PER_FULL", 2)
    append_events(2)
    for _ in range(5):
        audit_checkpoint_create()  # nothing moves: the deltas name no head

    bodies = _bodies()
    assert [body.get("base") for body in bodies] == [None, 1, 1, None, 4]
    assert [len(body["heads"]) for body in bodies] == [1, 0, 0, 1, 0]


def test_a_forged_checkpoint_is_never_signed_over_unless_someone_acknowledges_it(audit_key: str) -> None:
    events = append_events(3)
    audit_checkpoint_create()
    forge_stored_checkpoint(events[0].chain, 1)

    # beat signs nothing over it: the forgery stays the newest checkpoint, and verify_audit keeps reporting it
    with pytest.raises(CheckpointRefusedError, match="stored checkpoint #1: signature does not match"):
        audit_checkpoint_create()
    assert AuditCheckpoint.objects.count() == 1

    # once investigated, a person signs over it: a full checkpoint, after an event saying who, why and what
    audit_checkpoint_create(acknowledge="restored from backup after incident 42", actor="command:root")
    assert "base" not in _bodies()[1]  # a full one, which stands alone
    acknowledged = AuditEvent.objects.get(event_type="audit.checkpoint_acknowledged")
    assert acknowledged.actor == "command:root"
    assert acknowledged.payload["reason"] == "restored from backup after incident 42"
    assert any("signature does not match" in problem for problem in acknowledged.payload["problems"])


def test_a_deleted_base_fails_verification(audit_key: str) -> None:
    a, b = _two_chains()
    audit_checkpoint_create()
    append_events(1, a[0].call_id)
    audit_checkpoint_create()

    with owner_tampering():
        AuditCheckpoint.objects.filter(seq=1).delete()

    error = verify_audit_fails()
    assert "stored checkpoint #1 is missing (the oldest left is #2): checkpoints were deleted" in error


def test_the_export_is_a_full_checkpoint_between_deltas(audit_key: str, tmp_path: Path) -> None:
    a, b = _two_chains()
    audit_checkpoint_create()
    append_events(1, a[0].call_id)
    exported = tmp_path / "checkpoint.json"

    call_command("audit_checkpoint", "--output", str(exported), stderr=StringIO())

    document = json.loads(exported.read_text())
    assert "base" not in document and sorted(document["heads"]) == sorted([str(a[0].chain), str(b[0].chain)])
    assert "and the checkpoint" in _verify_with(exported)


def _verify_with(path: Path) -> str:
    out = StringIO()
    call_command("verify_audit", "--no-progress", "--checkpoint", str(path), stdout=out, stderr=StringIO())
    return out.getvalue()


def test_a_delta_file_whose_base_file_is_gone_fails(audit_key: str, settings: Any, tmp_path: Path) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "AUDIT_CHECKPOINT_DIR": str(tmp_path)}
    a, _ = _two_chains()
    audit_checkpoint_create()
    append_events(1, a[0].call_id)
    audit_checkpoint_create()
    assert "and checkpoint file audit-checkpoint-000000000002.json." in _verify()

    (tmp_path / "audit-checkpoint-000000000001.json").unlink()

    error = verify_audit_fails()
    assert (
        "checkpoint file audit-checkpoint-000000000001.json, which audit-checkpoint-000000000002.json builds on, "
        "is missing or unreadable"
    ) in error


def test_a_checkpoint_of_many_chains_is_checked_in_a_few_queries(
    audit_key: str, django_assert_max_num_queries: Any
) -> None:
    # given 60 tenants' chains, one event each, and a full checkpoint naming every head
    for index in range(60):
        _append_for(f"tenant-{index}")
    audit_checkpoint_create()
    assert len(_bodies()[0]["heads"]) == 60

    # then checking it takes the same few queries as for one chain, not one per chain (the seventh: whether a
    # recorded verification compared the trail with a checkpoint numbered past every stored one)
    with django_assert_max_num_queries(7):
        newest, problems = audit_stored_checkpoint_problems()
    assert newest is not None and problems == []


def _append_for(tenant: str) -> None:
    with transaction.atomic():
        audit_append(
            event_type="test.step",
            actor="tester",
            data={},
            call_id=uuid.uuid4(),
            tool_name="record_effect",
            status="queued",
            tenant=tenant,
        )


def test_a_signed_file_copied_under_another_number_fails(audit_key: str, settings: Any, tmp_path: Path) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "AUDIT_CHECKPOINT_DIR": str(tmp_path)}
    a, _ = _two_chains()
    for _ in range(3):
        audit_checkpoint_create()
        append_events(1, a[0].call_id)
    second, third = (tmp_path / f"audit-checkpoint-00000000000{seq}.json" for seq in (2, 3))

    # when delta #2's file is overwritten with a copy of #3's (signed: only its number betrays it)
    second.write_text(third.read_text())

    error = verify_audit_fails()
    assert "checkpoint file audit-checkpoint-000000000002.json holds checkpoint #3: it was renamed" in error


def test_a_checkpoint_directory_set_after_deltas_starts_with_a_full_checkpoint(
    audit_key: str, settings: Any, tmp_path: Path
) -> None:
    a, _ = _two_chains()
    audit_checkpoint_create()
    append_events(1, a[0].call_id)
    audit_checkpoint_create()  # a delta, stored in the database only

    settings.TOOLHUB = {**settings.TOOLHUB, "AUDIT_CHECKPOINT_DIR": str(tmp_path)}
    audit_checkpoint_create()
    audit_checkpoint_create()

    # the directory's first file is a full checkpoint (its base's file is not there), the next a delta on it
    third, fourth = (json.loads((tmp_path / f"audit-checkpoint-00000000000{seq}.json").read_text()) for seq in (3, 4))
    assert "base" not in third and fourth["base"] == 3
    assert "and checkpoint file audit-checkpoint-000000000004.json." in _verify()


def test_a_forged_delta_between_the_full_one_and_the_newest_fails(audit_key: str) -> None:
    a, b = _two_chains()
    audit_checkpoint_create()
    append_events(1, a[0].call_id)
    audit_checkpoint_create()
    append_events(1, b[0].call_id)
    audit_checkpoint_create()
    assert [body.get("base") for body in _bodies()] == [None, 1, 1]

    # when the delta in the middle is rewritten to name an older head of chain a
    middle = AuditCheckpoint.objects.get(seq=2)
    forged = json.loads(middle.body)
    forged["heads"][str(a[0].chain)]["seq"] = 2
    with owner_tampering():
        AuditCheckpoint.objects.filter(pk=middle.pk).update(body=json.dumps(forged))

    error = verify_audit_fails()
    assert "stored checkpoint #2: signature does not match: it was altered or signed with another key" in error
    # and the next checkpoint signs nothing over it
    with pytest.raises(CheckpointRefusedError):
        audit_checkpoint_create()
    assert len(_bodies()) == 3
