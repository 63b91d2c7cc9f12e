"""A worker's governance cache follows changes made by other processes: the next call it runs sees them."""

import pytest
from django.contrib.auth.models import User
from django.db import transaction

from tests.integration.workers import Worker, wait_for
from tests.testapp.models import SideEffect
from toolhub.authorization import CallPrincipal
from toolhub.governance import governance_triggers_install
from toolhub.models import CallStatus, Grant, GrantEffect, Tenant, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _request(alice: User, note: str) -> ToolCall:
    principal = CallPrincipal(user_id=alice.pk, username="alice", tenant="acme")
    return tool_call_request(
        request=CallRequest(
            tool_name="record_effect", arguments={"note": note}, principal=principal, context=ToolContext()
        )
    )


def _settled(call: ToolCall) -> ToolCall:
    wait_for(lambda: ToolCall.objects.get(pk=call.pk).is_settled, what="call settled")
    return ToolCall.objects.get(pk=call.pk)


def test_a_deny_committed_after_the_request_is_seen_by_a_worker_with_a_warm_cache(
    celery_worker: Worker, alice: User, tenant: Tenant
) -> None:
    # given the stamp row (transactional tests empty it) and a worker whose cache a first call warmed
    governance_triggers_install()
    Grant.objects.create(tool_name="record_effect", tenant=tenant)
    assert _settled(_request(alice, "first")).status == CallStatus.SUCCEEDED

    # when a call is allowed at request and a deny grant commits with it, before any worker picks it up
    with transaction.atomic():
        second = _request(alice, "second")
        assert second.status == CallStatus.QUEUED
        Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", user=alice)

    # then the worker's check at execution sees the deny: nothing ran
    second = _settled(second)
    assert second.status == CallStatus.DENIED
    assert "denied to you" in second.error
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["first"]
