"""The approval binding is keyed by the server: published everywhere, it gives no sensitive value away.

``arguments_hash`` / ``approval_hash`` is shown to operators and auditors, written in the audit trail and
sent in webhooks, while a sensitive argument is withheld. A plain SHA-256 over the canonical arguments let
anyone holding the hash and the rest of the arguments try every PIN (found by the probe of 2026-12-04).
"""

import hashlib
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.helpers import RequestCall, audit_text
from tests.security_review.conftest import client_for
from toolhub import Param, registry, tool
from toolhub.audit_hash import canonical_json
from toolhub.exceptions import ApprovalError
from toolhub.models import CallStatus, ToolCall

PIN = "7391"


@tool(sensitive=("pin",), risk="high")
def keyed_card_payment(
    card: Annotated[str, Param("The card's last four digits.")],
    amount: Annotated[int, Param("How much.")],
    pin: Annotated[str, Param("The card's PIN.")],
) -> dict:
    """Pay by card; held for an operator."""
    return {"card": card, "amount": amount}


@pytest.fixture
def payment_tool() -> Iterator[None]:
    with registry.temporarily(keyed_card_payment):
        yield


def _plain(call: ToolCall, arguments: dict[str, Any]) -> str:
    """The binding as it was before: SHA-256 of the canonical tool, version and arguments."""
    material = canonical_json({"tool": call.tool_name, "version": call.tool_version, "arguments": arguments})
    return hashlib.sha256(material.encode()).hexdigest()


@pytest.mark.django_db
def test_the_published_hash_does_not_give_a_short_sensitive_value_away(
    payment_tool: None, request_call: RequestCall, alice: User, operator: User
) -> None:
    call = request_call("keyed_card_payment", {"card": "4242", "amount": 30, "pin": PIN}, alice, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)
    shown = client_for(operator).get(f"/api/v1/approvals/{request.pk}/").json()
    assert PIN not in str(shown) and PIN not in audit_text(call)
    published, visible = shown["arguments_hash"], {k: v for k, v in shown["arguments"].items() if k != "pin"}

    guessed = [pin for pin in (f"{n:04d}" for n in range(10_000)) if _plain(call, {**visible, "pin": pin}) == published]

    assert guessed == []
    assert len(published) == 64 and published == call.approval_hash  # still one 64-character binding


@pytest.mark.django_db
def test_a_rotated_secret_key_keeps_waiting_approvals_valid_while_it_is_a_fallback(
    payment_tool: None,
    request_call: RequestCall,
    alice: User,
    operator: User,
    committed: Callable[..., Any],
    settings: Any,
) -> None:
    settings.SECRET_KEY = "the-key-before-rotation-" + "x" * 40
    rotated = request_call("keyed_card_payment", {"card": "4242", "amount": 30, "pin": PIN}, alice, tenant="acme")
    dropped = request_call("keyed_card_payment", {"card": "4343", "amount": 40, "pin": PIN}, alice, tenant="acme")

    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "the-key-after-rotation-" + "y" * 40, [settings.SECRET_KEY]
    committed(approval_approve, request_id=ApprovalRequest.objects.get(call=rotated).pk, user=operator)
    assert ToolCall.objects.get(pk=rotated.pk).status == CallStatus.SUCCEEDED

    # Once the old key is no longer a fallback, what it bound is no longer trusted: nothing runs.
    settings.SECRET_KEY_FALLBACKS = []
    with pytest.raises(ApprovalError, match="no longer match the version that was approved"):
        committed(approval_approve, request_id=ApprovalRequest.objects.get(call=dropped).pk, user=operator)
    assert ToolCall.objects.get(pk=dropped.pk).status == CallStatus.PENDING_APPROVAL


def _migrate(targets: list[tuple[str, str]]) -> None:
    MigrationExecutor(connection).migrate(targets)


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_rebinds_waiting_calls_and_pending_requests_so_their_approvals_still_run(
    payment_tool: None, request_call: RequestCall, alice: User, operator: User, committed: Callable[..., Any]
) -> None:
    # given a held call and a settled one, bound as before the upgrade (a plain digest)
    held = request_call("keyed_card_payment", {"card": "4242", "amount": 30, "pin": PIN}, alice, tenant="acme")
    settled = request_call("keyed_card_payment", {"card": "4343", "amount": 40, "pin": PIN}, alice, tenant="acme")
    legacy = {call.pk: _plain(call, call.arguments) for call in (held, settled)}
    for call in (held, settled):
        ToolCall.objects.filter(pk=call.pk).update(approval_hash=legacy[call.pk])
        ApprovalRequest.objects.filter(call=call).update(arguments_hash=legacy[call.pk])
    ToolCall.objects.filter(pk=settled.pk).update(status=CallStatus.REJECTED)
    ApprovalRequest.objects.filter(call=settled).update(status="rejected")

    # when the migrations run
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    _migrate([("toolhub", "0021_tenant_audit_chain_base"), ("approvals", "0005_argument_versions")])
    _migrate(latest)

    # then the waiting call and its request are bound again, and its approval runs it
    request = ApprovalRequest.objects.get(call=held)
    held.refresh_from_db()
    assert held.approval_hash == request.arguments_hash != legacy[held.pk]
    committed(approval_approve, request_id=request.pk, user=operator, expected_round=1)
    assert ToolCall.objects.get(pk=held.pk).status == CallStatus.SUCCEEDED
    # and a settled call keeps the hash it was decided under
    assert ToolCall.objects.get(pk=settled.pk).approval_hash == legacy[settled.pk]


def test_a_hash_holding_a_non_ascii_character_does_not_match_and_raises_nothing() -> None:
    """A hash planted in a call row (or given by a client) with a non-ASCII character, e.g. ``"é" * 64``.

    Found: ``hmac.compare_digest`` raises ``TypeError`` on such a ``str``, so the worker's check of a call's
    approval binding (``execution``) and the decision's (``approvals.services``) crashed instead of answering.
    Expect: it simply does not match.
    """
    from toolhub.pipeline import approval_hash, approval_hash_matches

    arguments = {"card": "1234", "amount": 5}
    assert approval_hash_matches(approval_hash("t", "1", arguments), "t", "1", arguments)
    assert not approval_hash_matches("é" * 64, "t", "1", arguments)
    assert not approval_hash_matches("\udc80" * 64, "t", "1", arguments)
