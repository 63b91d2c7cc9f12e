"""A remote MCP tool on a real Celery worker process: held, approved, executed once there, audited."""

import pytest
from django.contrib.auth.models import User

from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.integration.workers import Worker, wait_for
from tests.mcpclient.fake_server import FakeCrm, serving
from toolhub.authorization import CallPrincipal
from toolhub.mcp_client.models import RemoteMcpServer, RemoteMcpTool
from toolhub.mcp_client.services import remote_server_sync, remote_tool_accept
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_worker_calls_the_remote_server_once_after_approval(
    celery_worker: Worker, alice: User, operator: User
) -> None:
    fake = FakeCrm()
    with serving(fake) as url:
        server = RemoteMcpServer.objects.create(
            name="crm", url=url, risk="high", credential_required=False, select_names=["lookup_customer"]
        )
        remote_server_sync(server=server, actor="operator:operator")
        remote_tool_accept(row=RemoteMcpTool.objects.get(), actor="operator:operator", user=operator)

        principal = CallPrincipal(user_id=alice.pk, username="alice", tenant="acme")
        call = tool_call_request(
            request=CallRequest(
                tool_name="crm__lookup_customer",
                arguments={"customer_id": "c-7"},
                principal=principal,
                context=ToolContext(),
            )
        )
        assert call.status == CallStatus.PENDING_APPROVAL and fake.calls == []

        approval_approve(request_id=ApprovalRequest.objects.get(call=call).pk, user=operator)
        done = wait_for(
            lambda: (c := ToolCall.objects.get(pk=call.pk)).status in {"succeeded", "failed"} and c,
            timeout=30,
            what="remote call on the worker",
        )

    assert done.status == CallStatus.SUCCEEDED, done.error
    assert done.worker.startswith(celery_worker.name)
    assert done.result == {"customer": "c-7", "tier": "gold"}
    assert fake.calls == [{"customer_id": "c-7"}]
    events = list(AuditEvent.objects.filter(call_id=call.id).order_by("seq").values_list("event_type", flat=True))
    assert events[0] == "call.requested" and events[-1] == "call.succeeded"
