"""Review of 2026-12-05 (as): regressions and holes in the newest commits (a48e13e..7e2198f).

The reconciler's count of a call's lost attempts (``toolhub.sweeper._lost_in_a_row``), the reading of an iterator
a tool returns within its time limit (``Tool.invoke``, ``toolhub.tools.results.read_now``), the approval rules'
comparison of date-times as instants (``approvals.rules._normal``/``_instant``) and the console actions' reading of
the ticked rows with ``list_select_related``. Each test fails on the reviewed code (main at 7e2198f); its
docstring says "Found: ..." and "Expect: ...".

Findings:

1. ``_lost_in_a_row`` read the call's ``call.queued`` events newest first by ``seq``, which orders events of one
   chain only. A call's chain is ``crc32(id) % AUDIT_CHAINS`` (of its tenant), and the README's production notes
   say to raise ``AUDIT_CHAINS`` for more concurrent writers: after such a deploy a call queued before it writes
   its later events to another chain, whose numbers may be far below the old chain's. Its request's ``call.queued``
   (a decision, which ends the row) then sorted first for ever, so the row was always 1: a call whose every run
   takes its worker down was queued again once per lease, without end (``CALL_MAX_ATTEMPTS`` never applied).
   The call's timeline (``selectors.tool_call_audit_events``, ``chain, seq``) showed those events out of order
   too. Fixed: a call's events are read in the order they were appended (``id``, the table's own order) by the
   one selector, which the reconciler now uses.
2. ``read_now`` read an iterator only when the tool returned one itself: one inside the result (a dict's value,
   ``{"rows": (… for …)}``, or an artifact's data, ``ToolResult.artifact(map(…), …)``) was still read when the
   result was serialized, after the time limit (left open by review aq). Fixed: ``read_now`` reads iterators
   wherever serialization reaches them through a dict, list, tuple or ``ToolResult``, and returns a result with
   none in it as it is (not copied).

Checked and found holding (no test here): ``_lost_in_a_row`` cannot be fooled by an actor's name: users and
operators act as ``user:…``/``operator:…``, so none is the bare ``reconciler`` nor starts with ``worker:``; a
compensation's next attempt (``saga``/``saga-sweeper``/``user:…``), an operator's retry and an approval's release
end the row, a batch's hand-back (``worker:…``) neither counts nor ends it, a worker's re-approval moves the call to
``pending_approval`` (not ``queued``) and its release is a decision; only the call's own events are read
(``call_id``, indexed), at most ``CALL_MAX_ATTEMPTS`` rows, one query per expired call of an idempotent or atomic
tool. ``read_now``: a str, bytes, dict, dict view, list, pydantic model or ``ToolResult`` is not an ``Iterator``
and is returned as it is; a file object is one and is read as its lines (it was read so at serialization before);
an infinite iterator is read until the time limit stops it (``SIGALRM`` on a worker's main thread), as its
serialization did before with no limit at all; an async tool returning an async generator is not awaitable and
fails its serialization as before. Approval rules: ``MAX_ARGUMENTS_BYTES`` and ``MAX_REQUEST_NESTING`` bound
``_normal``'s walk; a naive against an aware date-time raises ``TypeError`` only when ordered (``lt``/``gt``…),
which holds the call; ``eq``/``in``/``contains`` compare them as unequal, as their texts were before.
``CommentActionMixin.response_action`` reads the ticked rows from the changelist's own queryset with its
``list_select_related``, still filtered to the ticked ids and the operator's tenants.
"""

import time
import zlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from tests.helpers import for_a_worker, principal_for
from toolhub import Param, pipeline, sweeper, tool
from toolhub.audit import audit_call_event
from toolhub.claims import tool_call_claim
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.selectors import tool_call_audit_events
from toolhub.sweeper import calls_reconcile_expired_leases
from toolhub.tools.context import ToolContext
from toolhub.tools.registry import registry
from toolhub.tools.results import ToolResult, read_now

# --- 1. the lost-attempt count read a call's events by seq, which orders one chain only -----------------------


@tool(idempotent=True)
def crashes_its_worker(item: str) -> str:
    """Look an item up (idempotent); in this test its every run takes its worker down."""
    return item


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(pipeline, "dispatch_call", lambda call: None)
    monkeypatch.setattr(sweeper, "dispatch_call", lambda call: None)
    with registry.temporarily(crashes_its_worker):
        yield


def _shard(call: ToolCall, chains: int) -> int:
    return zlib.crc32(str(call.pk).encode()) % chains


def _more_chains(call: ToolCall, chains: int) -> int:
    """A larger ``AUDIT_CHAINS`` under which the call's events go to another chain."""
    return next(n for n in range(chains + 1, 4096) if _shard(call, n) != _shard(call, chains))


def _queued(user: User) -> ToolCall:
    with for_a_worker():
        call = tool_call_request(
            request=CallRequest(
                tool_name="crashes_its_worker",
                arguments={"item": "x"},
                principal=principal_for(user, tenant="acme"),
                context=ToolContext(tenant="acme"),
            )
        )
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.QUEUED
    return call


@pytest.mark.django_db
def test_a_call_lost_on_every_run_needs_attention_after_audit_chains_were_raised(
    held: None, alice: User, settings: Any
) -> None:
    """Found: ``_lost_in_a_row`` ordered the call's ``call.queued`` events by ``seq``, a number of one chain. After
    a deploy that raised ``AUDIT_CHAINS`` (as the README advises for more writers) a call queued before it appends
    its later events to another, younger chain: its request's ``call.queued`` (seq high in the old, busy chain)
    sorted before every requeue and ended the row at once, so the call was queued again after every lost worker,
    for ever. Expect: after ``CALL_MAX_ATTEMPTS`` (3) attempts lost in a row it needs attention, and its events
    read in the order they happened.
    """
    busy = _queued(alice)
    with transaction.atomic():  # the old chain is a busy one: other calls' events
        for _ in range(50):
            audit_call_event(busy, "call.noted", actor="test")
    call = next(c for c in iter(lambda: _queued(alice), None) if _shard(c, 8) == _shard(busy, 8))
    settings.TOOLHUB = {**settings.TOOLHUB, "AUDIT_CHAINS": _more_chains(call, 8)}  # the deploy

    moves = []
    for attempt in range(1, 11):
        if ToolCall.objects.get(pk=call.pk).status != CallStatus.QUEUED:
            break
        assert tool_call_claim(call_id=call.pk, worker=f"w{attempt}") is not None
        ToolCall.objects.filter(pk=call.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        moves.append(calls_reconcile_expired_leases())

    assert moves == [{"requeued": 1, "needs_attention": 0}] * 2 + [{"requeued": 0, "needs_attention": 1}]
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.NEEDS_ATTENTION
    timeline = list(tool_call_audit_events(call).values_list("id", flat=True))
    assert timeline == sorted(AuditEvent.objects.filter(call_id=call.pk).values_list("id", flat=True))


# --- 2. a lazy iterator inside a result (a dict's value, an artifact's data) ran after the time limit -------


@tool(risk="low", timeout=0.2)
def as_report(n: Annotated[int, Param("How many rows.")]) -> Any:
    """A report whose rows are looked up slowly: returned as a generator expression inside a dict."""
    return {"title": "report", "rows": ({"row": i, "slept": time.sleep(0.3)} for i in range(n))}


@tool(risk="low", timeout=0.2)
def as_export(n: Annotated[int, Param("How many rows.")]) -> Any:
    """An export whose rows are looked up slowly: an artifact whose data is a ``map``."""
    return ToolResult.artifact(map(lambda i: {"row": i, "slept": time.sleep(0.3)}, range(n)), name="rows.json")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", ["as_report", "as_export"])
def test_a_lazy_iterator_inside_a_result_is_held_to_the_time_limit(alice: User, name: str) -> None:
    """Found: ``read_now`` (a84e09b) read an iterator the tool returned only at the top: a generator expression
    as a dict's value (``{"rows": (… for …)}``) or as an artifact's data (``ToolResult.artifact(map(…))``) was read
    when the result was serialized, after the limit was lifted: a tool with ``timeout=0.2`` whose rows take 0.3 s
    each succeeded after 0.6 s (an endless one held the worker until Celery's limit).
    Expect: iterators anywhere in the containers of a result (dict, list, tuple, ``ToolResult``) are read within
    the limit: the call fails with the tool's timeout error.
    """
    with registry.temporarily(as_report, as_export):
        call = tool_call_request(
            request=CallRequest(
                tool_name=name,
                arguments={"n": 2},
                principal=principal_for(alice, tenant="acme"),
                context=ToolContext(tenant="acme"),
            )
        )
    row = ToolCall.objects.get(pk=call.pk)
    assert row.status == CallStatus.FAILED, (row.status, row.result)
    assert "time limit" in row.error, row.error


def test_a_result_without_lazy_parts_is_returned_as_it_is() -> None:
    """Found: (the fix's other side) reading nested iterators must not copy or retype what needs no reading.
    Expect: a result with no iterator in it is the very object the tool returned; one with an iterator keeps its
    other values and its container types.
    """
    plain = {"a": [1, (2, 3)], "b": ToolResult.text("x"), "c": "text", "d": b"bytes"}
    assert read_now(plain) is plain
    assert read_now({"rows": iter([1, 2]), "n": (1, iter([3]))}) == {"rows": [1, 2], "n": (1, [3])}
    artifact = read_now(ToolResult.artifact(iter([{"a": 1}]), name="a.json"))
    assert (artifact.value, artifact.name) == ([{"a": 1}], "a.json")
