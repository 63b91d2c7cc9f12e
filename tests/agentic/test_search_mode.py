"""With tool search on, agentic members are found by search like any tool, and their calls are still gated."""

import pytest
from django.contrib.auth.models import User

from toolhub.agentic.runstate import agentic_gate
from toolhub.authorization import CallPrincipal
from toolhub.disclosure.state import DisclosureState
from toolhub.disclosure.visibility import DisclosureRequest, disclose, expand_agent_tools

pytestmark = pytest.mark.django_db


def _principal(user: User) -> CallPrincipal:
    tools = expand_agent_tools(["order_processor"], tool_search=True)
    return CallPrincipal(user_id=user.pk, username="alice", tenant="acme", agent_name="agentic", agent_tools=tools)


def test_members_come_from_search_hits_not_from_the_state(alice: User) -> None:
    principal = _principal(alice)

    first = disclose(
        DisclosureRequest(
            agent_tools=["order_processor"], principal=principal, state=DisclosureState(), tool_search=True
        )
    )
    found = disclose(
        DisclosureRequest(
            agent_tools=["order_processor"],
            principal=principal,
            state=DisclosureState().with_hits(["ship_order"]),
            tool_search=True,
        )
    )

    assert [tool.name for tool in first.tools] == ["tool_search"]
    assert [tool.name for tool in found.tools] == ["tool_search", "ship_order"]
    # a hit of another state is shown, but its call is refused with the tools available now
    gate = agentic_gate(
        agent_tools=["order_processor"], state=DisclosureState(), principal=principal, run_id=None, turn=1, context={}
    )
    assert "not available in state 'draft'" in (gate("ship_order") or "")
    assert gate("add_item") is None
