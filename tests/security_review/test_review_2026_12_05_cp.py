r"""Review of 2026-12-05 (cp): the newest commits on main (reviews ce, cf, ci, cg and the streamed-turn charge).

Each test fails on the reviewed code (main at 3132a14) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A run's transcript (the run's change page) drew each call's tool name raw: a refused call of ``add\u200b`` read
   ``add`` there, the one console page review ce's display helper did not reach (a template of its own).
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.helpers import console

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("hidden", ["\u200b", "\u202e"])
def test_a_run_transcript_writes_out_an_invisible_character_of_a_call_name(
    hidden: str, request_call: Any, alice: User, superuser: User
) -> None:
    """Found: a run's transcript drew each call's heading from ``call.tool_name`` raw, so a refused call of
    ``add\\u200b`` read ``add`` on the run's page, though the call list and its own page write it out (review ce).
    Expect: the transcript writes the character out (``add\\u200b``) as every other console page does."""
    from agents_app.models import AgentRun
    from agents_app.services import agent_create
    from toolhub.models import CallStatus

    agent = agent_create(name="reviewer", tenant="acme")
    run = AgentRun.objects.create(agent=agent, user=alice, tenant="acme", input="add two numbers")
    call = request_call(f"add{hidden}", {"a": 1, "b": 2}, alice, run.id, tenant="acme")
    assert call.status == CallStatus.INVALID and call.run_id == run.id
    html = console(superuser).get(f"/admin/agents_app/agentrun/{run.pk}/change/").content.decode()
    assert "toolhub-call-head" in html
    assert f"add\\u{ord(hidden):04x}" in html
    assert hidden not in html
