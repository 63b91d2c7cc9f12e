"""Review 2026-12-06 cv: four eyes and approvals (a review of reviews bx, cm, cp, br).

Findings:

Checked and holding:
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_approve
from tests.helpers import RequestCall
from toolhub import Risk, registry, tool
from toolhub.exceptions import EditedArgumentsError
from toolhub.models import ToolCall

RAN: list[str] = []


@tool(risk=Risk.HIGH)
def cv_move_funds(tenant_id: str, amount: int) -> dict[str, Any]:
    """Move funds within a tenant (high risk: an operator approves)."""
    RAN.append(tenant_id)
    return {"moved": amount}


@pytest.mark.django_db
def test_an_edit_naming_another_tenant_is_refused_at_the_desk(
    request_call: RequestCall, alice: User, operator: User
) -> None:
    """Found: an operator's edit went through the intake (schema, interceptors) but not the tenant-argument check the
    model's request goes through: editing ``tenant_id`` to ``globex`` was recorded as the version under approval and
    released, and only the worker refused it (the call failed as denied after being approved).

    Expect: the edit is refused as the model's request would be (``EditedArgumentsError``, nothing recorded); the
    request stays pending on the model's version.
    """
    with registry.temporarily(cv_move_funds):
        call = request_call("cv_move_funds", {"tenant_id": "acme", "amount": 5}, alice, tenant="acme")
        request = ApprovalRequest.objects.get(call=call)

        with pytest.raises(EditedArgumentsError, match="your own tenant"):
            approval_approve(request_id=request.pk, user=operator, arguments={"tenant_id": "globex"})

    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING and request.round == 1
    assert request.arguments == {"tenant_id": "acme", "amount": 5}
    assert not request.decisions.exists() and RAN == []
    assert ToolCall.objects.get(pk=call.pk).arguments == {"tenant_id": "acme", "amount": 5}
