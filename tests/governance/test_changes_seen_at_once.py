"""A governance change is seen by the very next call: no cache may serve a revoked grant, a disabled tool, an old rule.

Each test makes one call, changes governance the way operators do (the admin, the catalogue service, a
rule saved or deleted), and makes the next call at once, through the whole pipeline on PostgreSQL.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from approvals.models import ApprovalRequest, ApprovalRule
from tests.helpers import for_a_worker, principal_for
from tests.testapp.models import SideEffect
from toolhub.audit_verify import verify_audit_chains
from toolhub.catalogue import tool_definition_govern
from toolhub.models import CallStatus, Grant, GrantEffect, Tenant, ToolCall, ToolDefinition
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tasks import execute_tool_call_task
from toolhub.tools.context import ToolContext

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("deny_by_default")]


def _revoke_by_deleting(grant: Grant, **_: Any) -> None:
    grant.delete()


def _revoke_by_turning_into_a_deny(grant: Grant, **_: Any) -> None:
    grant.effect = GrantEffect.DENY
    grant.save()


def _revoke_in_the_admin(grant: Grant, *, admin_client: Client) -> None:
    response = admin_client.post(f"/admin/toolhub/grant/{grant.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302, response.content[:500]
    assert not Grant.objects.filter(pk=grant.pk).exists()


REVOCATIONS = [_revoke_by_deleting, _revoke_by_turning_into_a_deny, _revoke_in_the_admin]


@pytest.fixture
def admin_client() -> Client:
    """A superuser's browser session in the admin (https, as production serves it)."""
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "root-password"))
    return client


@pytest.fixture
def grant(tenant: Tenant) -> Grant:
    return Grant.objects.create(tool_name="record_effect", tenant=tenant, note="acme may record")


@pytest.mark.parametrize("revoke", REVOCATIONS, ids=lambda fn: fn.__name__.removeprefix("_revoke_"))
def test_a_grant_revoked_between_two_calls_denies_the_second(
    request_call: Any, grant: Grant, admin_client: Client, revoke: Any
) -> None:
    first = request_call("record_effect", {"note": "before"})
    assert first.status == CallStatus.SUCCEEDED

    revoke(grant, admin_client=admin_client)
    second = request_call("record_effect", {"note": "after"})

    assert second.status == CallStatus.DENIED
    assert "not granted to you" in second.error or "denied to you" in second.error
    assert list(SideEffect.objects.values_list("call_id", flat=True)) == [str(first.pk)]
    assert verify_audit_chains()[1] == []


@pytest.mark.parametrize("hinted", [True, False], ids=["claim-hint", "no-hint"])
def test_a_grant_revoked_after_the_request_denies_the_execution(
    alice: User, grant: Grant, monkeypatch: pytest.MonkeyPatch, hinted: bool
) -> None:
    """The worker's check sees the revocation too: the call was queued while allowed, and is never run.

    With the message's claim hint the worker claims without reading the call: the claim still checks the
    governance stamp, misses, and the re-check under the new stamp denies.
    """
    dispatched: list[str] = []
    hints: list[Any] = []

    def send(call_id: str, hint: Any = None) -> None:
        dispatched.append(str(call_id))
        hints.append(hint)

    monkeypatch.setattr(execute_tool_call_task, "delay", send)
    request = CallRequest(
        tool_name="record_effect",
        arguments={"note": "queued"},
        principal=principal_for(alice, tenant="acme"),
        context=ToolContext({"tenant": "acme", "user": alice.username, "user_id": alice.pk}),
    )
    with for_a_worker():  # queued for a worker, not run by this process at commit
        call = tool_call_request(request=request)
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.QUEUED
    assert dispatched == [str(call.pk)]

    grant.delete()
    execute_tool_call_task(dispatched[0], hint=hints[0] if hinted else None)  # the worker takes the message

    call.refresh_from_db()
    assert call.status == CallStatus.DENIED
    assert SideEffect.objects.count() == 0
    assert verify_audit_chains()[1] == []


def test_a_grant_given_between_two_calls_allows_the_second(request_call: Any, tenant: Tenant) -> None:
    """The other direction: a denial is not remembered either."""
    assert request_call("record_effect", {"note": "before"}).status == CallStatus.DENIED
    Grant.objects.create(tool_name="record_effect", tenant=tenant)
    assert request_call("record_effect", {"note": "after"}).status == CallStatus.SUCCEEDED


def test_a_tool_disabled_between_two_calls_refuses_the_second(request_call: Any, grant: Grant) -> None:
    assert request_call("record_effect", {"note": "before"}).status == CallStatus.SUCCEEDED

    definition = ToolDefinition.objects.get(name="record_effect")
    tool_definition_govern(definition=definition, actor="operator", enabled=False)
    second = request_call("record_effect", {"note": "after"})

    assert second.status == CallStatus.DENIED
    assert "disabled" in second.error
    assert SideEffect.objects.count() == 1

    tool_definition_govern(definition=definition, actor="operator", enabled=True)
    assert request_call("record_effect", {"note": "again"}).status == CallStatus.SUCCEEDED


def test_an_approval_rule_changed_between_two_calls_governs_the_second(request_call: Any, grant: Grant) -> None:
    rule = ApprovalRule.objects.create(name="hold records", tool_name="record_effect", enabled=False)
    assert request_call("record_effect", {"note": "before"}).status == CallStatus.SUCCEEDED

    rule.enabled = True
    rule.save()
    held = request_call("record_effect", {"note": "held"})
    assert held.status == CallStatus.PENDING_APPROVAL
    assert ApprovalRequest.objects.get(call=held).rule == rule

    rule.argument, rule.operator, rule.value = "note", "contains", "wire"
    rule.save()
    assert request_call("record_effect", {"note": "plain"}).status == CallStatus.SUCCEEDED
    assert request_call("record_effect", {"note": "wire it"}).status == CallStatus.PENDING_APPROVAL

    rule.delete()
    assert request_call("record_effect", {"note": "wire again"}).status == CallStatus.SUCCEEDED
    assert verify_audit_chains()[1] == []


handled: list[str] = []


def _writes_the_call_row(sql: str, verb: str) -> bool:
    """``sql`` is the call row's INSERT or UPDATE (alone, or on PostgreSQL with its audit events)."""
    return sql.startswith((f'{verb} "toolhub_toolcall"', f'{verb} INTO "toolhub_toolcall"', f"WITH change AS ({verb}"))


def counting_handler(tool_name: str, errors: list[dict[str, Any]]) -> str:
    """An argument-error handler that records each time it runs (a hook with an effect outside toolhub)."""
    handled.append(tool_name)
    return f"{tool_name}: bad arguments"


def test_a_call_decided_under_a_stale_stamp_is_decided_again_and_runs_the_hooks_once(
    request_call: Any, grant: Grant, settings: Any
) -> None:
    # given a process whose governance cache was filled under the current stamp
    assert request_call("record_effect", {"note": "warm"}).status == CallStatus.SUCCEEDED
    settings.TOOLHUB = {**settings.TOOLHUB, "ARGUMENT_ERROR_HANDLER": f"{__name__}.counting_handler"}
    handled.clear()

    # when governance changes behind it (the process has not read the new stamp) and bad arguments arrive
    grant.delete()
    refused = request_call("record_effect", {"note": 7})
    denied = request_call("record_effect", {"note": "after"})

    # then the first write (invalid arguments, decided under the stale stamp) wrote nothing; the call was
    # decided again under the new governance, denied before its arguments were read, and the argument-error
    # handler ran once all the same; the next call sees the revocation too
    assert refused.status == CallStatus.DENIED and "record_effect" in refused.error
    assert handled == ["record_effect"]
    assert denied.status == CallStatus.DENIED
    assert ToolCall.objects.count() == 3
    assert verify_audit_chains()[1] == []


def test_with_governance_unchanged_a_call_reads_no_stamp_of_its_own(request_call: Any, grant: Grant) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    request_call("record_effect", {"note": "warm"})
    with CaptureQueriesContext(connection) as captured:
        call = request_call("record_effect", {"note": "measured"})

    assert call.status == CallStatus.SUCCEEDED
    stamp_reads = [query["sql"] for query in captured.captured_queries if "toolhub_governanceversion" in query["sql"]]
    # the stamp is checked inside the call row's write, not read before it
    assert len(stamp_reads) == 1 and _writes_the_call_row(stamp_reads[0], "INSERT")


def test_a_worker_checks_the_stamp_in_its_claim_and_reads_none_when_nothing_changed(
    alice: User, grant: Grant, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    dispatched: list[str] = []
    monkeypatch.setattr(execute_tool_call_task, "delay", lambda call_id, **_: dispatched.append(str(call_id)))
    principal = principal_for(alice, tenant="acme")
    context = ToolContext({"tenant": "acme", "user": alice.username, "user_id": alice.pk})
    with for_a_worker():
        for note in ("warm", "measured"):
            tool_call_request(
                request=CallRequest(
                    tool_name="record_effect", arguments={"note": note}, principal=principal, context=context
                )
            )
    execute_tool_call_task(dispatched[0])  # the worker's cache holds the current stamp

    with CaptureQueriesContext(connection) as captured:
        execute_tool_call_task(dispatched[1])

    assert ToolCall.objects.get(pk=dispatched[1]).status == CallStatus.SUCCEEDED
    stamp_reads = [query["sql"] for query in captured.captured_queries if "toolhub_governanceversion" in query["sql"]]
    assert len(stamp_reads) == 1 and _writes_the_call_row(stamp_reads[0], "UPDATE")  # inside the claim
