"""A call the OpenAI Agents SDK paused on, held for approval (reviews cm and cp)."""

from django.contrib.auth.models import User

from toolhub.adapters.openai_agents import store
from toolhub.models import CallStatus, ToolCall

__all__ = ["HELD", "held_sdk_call"]

#: The SDK's pending item for a high-risk call (the test app's ``risky_effect``, held for an operator).
HELD = store.PendingItem(tool_name="risky_effect", sdk_call_id="call_1", arguments='{"note": "wire money"}')


def held_sdk_call(user: User, run_key: str, tenant: str = "acme") -> ToolCall:
    """``HELD`` governed for ``user``'s run ``run_key``: a toolhub call pending approval."""
    held = store.governed_call(
        user=user,
        tenant=tenant,
        run_key=run_key,
        tool_name=HELD.tool_name,
        sdk_call_id=HELD.sdk_call_id,
        arguments=HELD.arguments,
    )
    assert held.status == CallStatus.PENDING_APPROVAL
    return held
