"""Review (c) of the fixes of 2026-12-04 (probes l..q): each test states what it found (``Found: ... / Expect: ...``).

The PostgreSQL tests force one interleaving deterministically, as probe (p) did: another session holds the
tenant's audit chain head, so the guarded write waits for it while a deny grant commits.
"""

import uuid
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User
from pydantic import BaseModel

from tests.helpers import RequestCall, principal_for
from tests.security_review.pg_races import chain_head_locked, dsn, in_thread, wait_for_lock_waiter
from tests.testapp.models import SideEffect
from toolhub import registry, tool
from toolhub.audit_hash import chain_for
from toolhub.models import CallStatus, Grant, GrantEffect, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext


def _one_chain(settings: Any) -> None:
    """Every call of a tenant on one chain, so a test can hold the head the next call's write waits for."""
    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "AUDIT_CHAINS": 1}


def _earlier_call(user: User) -> ToolCall:
    """A call of ``user`` in acme: its chain's head row exists (and can be locked)."""
    return tool_call_request(
        request=CallRequest(
            tool_name="record_effect",
            arguments={"note": "earlier"},
            principal=principal_for(user, tenant="acme"),
            context=ToolContext({}),
        )
    )


# --- governance_moved: paths that run a call after a guarded write ----------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_agentic_tools_inner_call_written_while_its_grant_is_revoked_is_not_run(alice: User, settings: Any) -> None:
    """Found: an agentic tool's inner call (``toolhub.agentic.inner.inner_tool_call``) is written already claimed
    (``inline_execution``: status running, worker = the outer worker) and then run by ``inner_tool_call`` itself
    with ``tool_call_run_claimed``, whatever ``call.governance_moved`` says. The fix re-checks a moved call only in
    ``pipeline.run_here`` (the eager path) and in the worker's claim; the inline path's ``_nothing`` follow-up and
    ``inner_tool_call`` never look at it. A deny grant for alice that commits while the inner call's row waits for
    the chain head is not honoured: record_effect runs for her after the revocation.
    Expect: the inner call is checked again (as a worker's claim is; now in ``tool_call_run_claimed``): denied,
    nothing executed.
    """
    from toolhub.agentic.inner import inner_tool_call

    _one_chain(settings)
    earlier = _earlier_call(alice)
    chain = chain_for(earlier.id, "acme")
    ctx = ToolContext({"tenant": "acme", "user_id": alice.id, "user": "alice"})

    def inner() -> ToolCall:
        return inner_tool_call(
            ctx,
            name="record_effect",
            arguments='{"note": "inner after revoke"}',
            model_call_id="m1",
            position=0,
            gate=lambda name: None,
            owner="effect_desk",
        )

    with chain_head_locked(chain):
        thread, result = in_thread(inner)
        wait_for_lock_waiter("WITH ")
        Grant.objects.create(user=alice, tool_name="record_effect", effect=GrantEffect.DENY, note="revoked")
    thread.join(30)
    assert not thread.is_alive()
    assert not isinstance(result[0], BaseException), result

    inner_call = ToolCall.objects.get(tool_name="record_effect", arguments__note="inner after revoke")
    assert SideEffect.objects.filter(note="inner after revoke").count() == 0, (
        f"the inner call ran after its grant was revoked (status {inner_call.status})"
    )
    assert inner_call.status == CallStatus.DENIED, inner_call.status


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_atomic_tool_that_suspends_while_its_grant_is_revoked_keeps_nothing(alice: User) -> None:
    """Found: ``execution.tool_call_run_with_intent`` rolls an atomic tool back when ``call.governance_moved``
    (a grant revoked while the row waited for the chain head) only on its settled branch; its suspension branch
    is ``call_insert(call, intent, stamp=stamp) and _suspend(...)``, which ignores ``governance_moved``. An atomic
    tool that writes and then suspends (``atomic_effect`` with ``suspend``) commits its effects and parks the call
    awaiting a result, after alice's grant was revoked.
    Expect: as on the settled branch, nothing is kept and the call is decided again: denied, no side effect.
    """
    earlier = _earlier_call(alice)
    chain = chain_for(earlier.id, "acme")
    call_id = next(key for key in iter(uuid.uuid4, None) if chain_for(key, "acme") == chain)
    request = CallRequest(
        tool_name="atomic_effect",
        arguments={"note": "atomic after revoke", "suspend": "storable"},
        principal=principal_for(alice, tenant="acme"),
        context=ToolContext({}),
        call_id=call_id,
    )

    with chain_head_locked(chain):
        thread, result = in_thread(lambda: tool_call_request(request=request))
        wait_for_lock_waiter("WITH ")
        Grant.objects.create(user=alice, tool_name="atomic_effect", effect=GrantEffect.DENY, note="revoked")
    thread.join(30)
    assert not thread.is_alive()
    assert not isinstance(result[0], BaseException), result

    call = ToolCall.objects.get(pk=call_id)
    assert SideEffect.objects.filter(note="atomic after revoke").count() == 0, (
        f"the atomic tool's effect was kept after its grant was revoked (status {call.status})"
    )
    assert call.status == CallStatus.DENIED, call.status


# --- sensitive mapping keys --------------------------------------------------------------------------------------


class _Card(BaseModel):
    number: str
    holder: str


@tool(sensitive=("card",))
def review_charge_card(card: _Card, amount: int) -> dict:
    """Charge a card (a sensitive parameter whose type is a model: its field names are in the tool's schema)."""
    return {"status": "charged", "message": f"charged {amount} to the card holder's account", "holder": "on file"}


def test_a_sensitive_models_field_names_are_not_scrubbed_from_the_result(request_call: RequestCall) -> None:
    """Found: ``secrets.sensitive_values`` now collects every key of a sensitive mapping (commit d09d2a2, for a split
    payment keyed by IBAN), and a model's or a dataclass's value reaches it as a mapping too (``to_jsonable_python``):
    the field names of a sensitive parameter typed by a model (``card: Card`` with ``number`` and ``holder``), which
    the tool's published JSON schema lists, become "secrets". ``SecretScrubber.value`` replaces them in the result's
    text and in its keys: ``{"holder": "on file"}`` comes back as ``{"[secret]": "on file"}`` and "the card holder's"
    as "the card [secret]'s"; the same words are scrubbed from every error and log line of the call.
    Expect: only the values a caller sent are secrets (and a free mapping's keys); the names a schema declares
    (a model's fields) are not, so the result reads as the tool returned it.
    """
    with registry.temporarily(review_charge_card):
        call = request_call(
            "review_charge_card", {"card": {"number": "4111111111111111", "holder": "Carol Smith"}, "amount": 12}
        )
    assert call.status == "succeeded", (call.status, call.error)
    assert call.result == {
        "status": "charged",
        "message": "charged 12 to the card holder's account",
        "holder": "on file",
    }, call.result


# --- the claim's last, unchecked attempt ----------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_grant_revoked_while_the_last_claim_attempt_waits_on_the_chain_head_is_not_honoured(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: ``execution.tool_call_execute`` runs a single claim's re-check with
    ``stamp_checked=limit == 1 and not call.governance_moved`` (the process's cached governance, no stamp read).
    A claim's last attempt (``claims._claim``, ``attempt == _CLAIM_ATTEMPTS - 1``) checks no stamp at all
    (``checked_stamp=None``, so no ``stamp_after`` either and ``governance_moved`` stays False), yet the re-check is
    still told the claim checked it. After two governance changes made the first attempts miss, a deny grant that
    commits while the last attempt's statement waits for the chain head is not seen: the re-check answers from
    the cache of the stamp read before the wait (here filled by a decision of the same process under that stamp),
    and record_effect runs for alice after her grant was revoked.
    Expect: a claim that checked no stamp is re-checked under a stamp read after it (or the unchecked write also
    returns the stamp after its locks and compares it with the one it read): denied, nothing executed.
    """
    from toolhub import claims, pipeline
    from toolhub.celery import app
    from toolhub.execution import tool_call_execute
    from toolhub.execution_checks import refusal_at_execution
    from toolhub.governance import governance_scope
    from toolhub.tools.registry import registry as tools

    monkeypatch.setattr(pipeline, "dispatch_call", lambda call: None)
    app.conf.task_always_eager = False  # restored by the _celery_mode fixture
    call = tool_call_request(
        request=CallRequest(
            tool_name="record_effect",
            arguments={"note": "last attempt after revoke"},
            principal=principal_for(alice, tenant="acme"),
            context=ToolContext({}),
        )
    )
    call.refresh_from_db()
    assert call.status == CallStatus.QUEUED
    chain = chain_for(call.id, "acme")

    real_hold = claims.governance_hold  # the claim reads its stamp as the governance it holds
    reads: list[int | None] = []

    def hold_then(*, assume_current: bool) -> Any:
        held = real_hold(assume_current=assume_current)
        reads.append(held.stamp)
        if len(reads) < claims._CLAIM_ATTEMPTS:
            # a governance change commits between the stamp's read and the claim's statement: the claim misses
            with psycopg.connect(**dsn(), autocommit=True) as bump:
                bump.execute(
                    "UPDATE toolhub_governanceversion SET stamp = nextval('toolhub_governance_stamp') WHERE id = 1"
                )
        else:
            # the process decides something for alice under this stamp (another call): its cache holds her grants
            queued = ToolCall.objects.get(pk=call.pk)
            with governance_scope():
                assert refusal_at_execution(queued, tools.get("record_effect")) is None
        return held

    monkeypatch.setattr(claims, "governance_hold", hold_then)

    with chain_head_locked(chain):
        worker, result = in_thread(lambda: tool_call_execute(call_id=call.id, worker="w1"))
        wait_for_lock_waiter("WITH ")
        Grant.objects.create(user=alice, tool_name="record_effect", effect=GrantEffect.DENY, note="revoked")
    worker.join(30)
    assert not worker.is_alive()
    assert not isinstance(result[0], BaseException), result
    assert len(reads) == claims._CLAIM_ATTEMPTS, reads

    call.refresh_from_db()
    assert SideEffect.objects.filter(note="last attempt after revoke").count() == 0, (
        f"the tool ran after its grant was revoked (status {call.status})"
    )
    assert call.status == CallStatus.DENIED, call.status
