"""Review of 2026-12-05 (bn): the commits of the last hour on the sagas' bulk actions, the agent loop's token stop
and model adapters, and the recorded audit export.

Each test fails on the reviewed code (main at bc53989) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. The confirmation page of the sagas' and compensations' "Retry" and "Resolve by hand" carried each listed
   compensation's mark in a hidden field of its own (``mark_<id>``). Django refuses a POST of more than
   ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` (1,000) fields, so confirming a page that lists about a thousand
   compensations (one list page of sagas with ten failed compensations each) answered a bare "Bad Request (400)":
   the operator could never retry or resolve them from the list. The marks now travel in one hidden field.
2. The lists' bulk Retry and Resolve lock the selected sagas in id order (``compensations_retry``); rolling a run
   back with its subagents (``run_rollback_with_subagents``) locked the run's saga, then its descendants'. A
   parent that asked its subagent before doing a step of its own has the higher saga id, so the two took the
   family's locks in opposite orders and PostgreSQL failed one of them with "deadlock detected". Every lock of
   several sagas now goes through ``toolhub.sagas.records.lock_sagas`` (id order).
3. ``audit_export_lines`` holds a transaction open between the pieces it yields (its server-side cursor). When
   the command could not write the file midway (a full disk: the error raised by the write, not by the reading),
   ``RecordedExport.fail`` recorded ``audit.export_failed`` inside that still-open transaction, which rolled back
   when the reading was closed after: the trail held ``audit.export_started`` and no outcome. ``fail`` now stops
   the reading first (as the console's ``close`` did), then records the failure.

Checked and holding:

- Tenant scope of the confirmation pages: the confirming POST re-reads the selected rows from the admin's
  tenant-scoped queryset, so another tenant's ids in ``_selected_action`` act on nothing of theirs; a mark forged
  for another tenant's compensation is not among the scope's marks, so the comparison refuses the confirm.
- Double submit: the first confirm moves each compensation (status, attempts, ``updated_at``), so the second POST
  of the same page is refused as stale (review m's test).
- Four-eyes on resolve: ``compensations_resolve`` calls ``compensation_resolve(by=...)`` per row, which refuses the
  operator's own step (reported, left as it is) and resolves the others.
- The export header's signature is domain-separated from a checkpoint's: its signed text starts with
  ``toolhub-audit-export-header/1``, a checkpoint's body is JSON (``trusted_body`` parses it), so neither passes
  for the other. ``python -m toolhub.audit_file_verify`` runs with ``DJANGO_SETTINGS_MODULE`` unset.
- ``_stopped_on_tokens`` before asking ends the run through ``run_finish`` with its step released (lease and token
  cleared), the tool results appended that turn saved with it (``END_FIELDS`` holds ``messages``), as the
  immediate-return stop does; a run at exactly its budget after a turn still has that turn's calls run.
- The adapters: usage the endpoint reports is taken as reported (``reported_or_estimated``), so reasoning is only
  added to an estimate; a stream broken off is charged once (``RefusedTurn``), a ``ModelError`` re-raised as is.
- ``ModelProviderAdmin``'s base URL check reads ``urlsplit``'s user info, query and fragment only: a host with a
  port (``http://127.0.0.1:11434/v1``, load_demo's; the tests' fakes on 127.0.0.1) is accepted.
- The console export records its start before opening the export, as the command does, so the start is in the
  file whose range reaches it; a cut-off download closes the reading before recording (``close``).

Noted, not changed:

- A confirmation page still carries one ``_selected_action`` field per selected row: "select all" of more than
  about a thousand sagas is refused by Django (400) at the confirm, for Resolve as before and now for Retry.
- An endpoint sending the same reasoning in both ``reasoning_content`` and ``reasoning`` has it counted twice in an
  estimate (only when it reports no usage) and against the stream's size bound.
"""

import errno
import io
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import psycopg
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

import toolhub.audit_export as audit_export_service
import toolhub.management.commands.audit_export as audit_export_command
from agents_app.models import AgentRun
from agents_app.rollbacks import run_rollback_with_subagents
from tests.audit.test_trail_export import trails  # noqa: F401 - fixture
from tests.helpers import action_confirmation, console
from tests.sagas.sample_tools import LOG, TOOLS
from tests.security_review.pg_races import dsn, in_thread, wait_for_lock_waiter
from tests.subagents.conftest import MakeAgent, StartRun, make_agent, start  # noqa: F401 - fixtures
from tests.subagents.test_rollback import CHILD_BOOKS
from tests.tenancy.conftest import AcmeData
from tests.testapp.tools import ask_researcher
from toolhub.models import AuditEvent, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus, Saga, SagaStatus
from toolhub.tools.registry import registry

SAGAS = "/admin/sagas/saga/"

#: More compensations than Django's ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` (1,000) counts fields of one POST.
MANY = 1000


def _many_failed(acme: AcmeData) -> list[Compensation]:
    """acme's saga with ``MANY`` more steps whose compensation failed (each step its own call, as recorded)."""
    template = acme.artifact_call
    calls = []
    for i in range(MANY):
        call = ToolCall.objects.get(pk=template.pk)
        call.id, call.key = uuid.uuid4(), f"bn-step-{i}"
        calls.append(call)
    ToolCall.objects.bulk_create(calls)
    Saga.objects.filter(pk=acme.saga.pk).update(status=SagaStatus.NEEDS_ATTENTION)
    return Compensation.objects.bulk_create(
        Compensation(
            saga=acme.saga,
            tenant=acme.saga.tenant,  # bulk_create skips save(): the database holds it (sagas 0013)
            sequence=acme.compensation.sequence + 1 + i,
            step_call=call,
            step_tool=call.tool_name,
            tool_name="credit",
            status=CompensationStatus.FAILED,
            last_error="the bank timed out",
        )
        for i, call in enumerate(calls)
    )


@pytest.mark.django_db(transaction=True)
def test_a_confirmation_page_of_a_thousand_compensations_can_be_confirmed(acme: AcmeData, acme_operator: User) -> None:
    """Found: "Resolve by hand" on acme's saga with a thousand failed compensations showed its page, but confirming
    it posted a field per compensation and Django refused the POST ("Bad Request (400)"): nothing could be resolved
    from the list.

    Expect: the confirm is read and acts: every listed compensation resolved by the operator with their note.
    """
    failed = _many_failed(acme)
    client = console(acme_operator)
    confirmation = action_confirmation(client, SAGAS, "resolve_selected", [acme.saga.pk])

    answer = client.post(SAGAS, {**confirmation, "note": "refunded by hand"}, follow=True)

    assert answer.status_code == 200, answer.status_code
    assert f"{MANY} compensation(s) resolved." in [str(m) for m in answer.context["messages"]]
    resolved = Compensation.objects.filter(pk__in=[c.pk for c in failed], status=CompensationStatus.RESOLVED)
    assert resolved.count() == MANY
    assert set(resolved.values_list("resolved_by", flat=True)) == {"user:acme-operator"}


@pytest.fixture
def _subagent_tools() -> Iterator[None]:
    LOG.clear()
    with registry.temporarily(ask_researcher, *TOOLS):
        yield


def _family_child_saga_first(make: MakeAgent, run: StartRun, alice: User) -> tuple[Saga, Saga, AgentRun]:
    """A completed parent run that asked its researcher to book a flight, then reserved a seat itself: the child's
    saga was opened first (the lower id), the parent's after it."""
    make(name="researcher", tools=["book"], script=CHILD_BOOKS)
    script = [
        {"content": "", "tool_calls": [{"name": "ask_researcher", "arguments": {"task": "book a flight"}}]},
        {"content": "", "tool_calls": [{"name": "reserve", "arguments": {"item": "seat"}}]},
        {"content": "done"},
    ]
    parent = run(make(tools=["ask_researcher", "reserve"], script=script), alice)
    child_saga = Saga.objects.get(run_id=AgentRun.objects.get(parent_run=parent).id)
    parent_saga = Saga.objects.get(run_id=parent.id)
    assert child_saga.pk < parent_saga.pk
    return child_saga, parent_saga, parent


@pytest.mark.postgres  # row locks: SQLite has none
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("_subagent_tools")
def test_a_rollback_with_subagents_locks_the_sagas_in_the_order_a_bulk_retry_does(
    make_agent: MakeAgent,  # noqa: F811 - the fixture imported above
    start: StartRun,  # noqa: F811 - the fixture imported above
    alice: User,
) -> None:
    """Found: the list's bulk Retry and Resolve lock the selected sagas in id order; rolling a run back with its
    subagents locked its own saga, then its children's. A parent whose saga was opened after its child's (it asked
    the subagent first) took its lock while a bulk retry of both held the child's and waited for the parent's:
    PostgreSQL broke the deadlock by failing one of them.

    Expect: the rollback locks the family's sagas in id order too: it waits behind the retry holding the child's
    saga, the retry then takes the parent's saga, and both end without error.
    """
    child_saga, parent_saga, parent = _family_child_saga_first(make_agent, start, alice)
    retry = psycopg.connect(**dsn())  # a bulk retry of both sagas, in id order: the child's first
    try:
        retry.execute("SET lock_timeout = '5s'")
        retry.execute("SELECT id FROM sagas_saga WHERE id = %s FOR UPDATE", [child_saga.pk])
        thread, result = in_thread(lambda: run_rollback_with_subagents(run=parent, actor="user:alice"))
        wait_for_lock_waiter("sagas_saga")
        retry.execute("SELECT id FROM sagas_saga WHERE id = %s FOR UPDATE", [parent_saga.pk])
        retry.rollback()
        thread.join(30)
    finally:
        retry.close()
    assert result and not isinstance(result[0], BaseException), result
    assert Saga.objects.get(pk=child_saga.pk).rollbacks.exists()
    assert Saga.objects.get(pk=parent_saga.pk).rollbacks.exists()


def test_a_command_export_that_cannot_be_written_midway_is_recorded_as_failed(
    trails: None,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: ``audit_export`` reads the trail in one transaction held open between the pieces it yields. When the
    file could not be written midway (a full disk), the command recorded ``audit.export_failed`` while that reading
    was still open, inside its transaction; the reading was closed after, its transaction rolled back, and the
    failure record with it: the trail said an export started and never what became of it.

    Expect: the reading is stopped before the outcome is recorded: ``audit.export_failed`` (the disk full) is in the
    trail after the command, and no ``audit.exported``.
    """
    monkeypatch.setattr(audit_export_service, "_LINES_PER_WRITE", 1)  # a piece per event: the disk fills midway

    def disk_fills(path: Path, content: Iterable[str]) -> None:
        pieces = iter(content)
        next(pieces), next(pieces)  # the header and the first event were written
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(audit_export_command, "write_new", disk_fills)
    with pytest.raises(CommandError, match="No space left on device"):
        call_command("audit_export", "--tenant", "acme", "-o", str(tmp_path / "acme.jsonl"), stdout=io.StringIO())

    outcomes = list(
        AuditEvent.objects.filter(tenant="acme", event_type__startswith="audit.export")
        .order_by("seq")
        .values_list("event_type", flat=True)
    )
    assert outcomes == ["audit.export_started", "audit.export_failed"], outcomes
