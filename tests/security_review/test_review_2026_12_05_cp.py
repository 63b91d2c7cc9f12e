r"""Review of 2026-12-05 (cp): the newest commits on main (reviews ce, cf, ci, cg and the streamed-turn charge).

Each test fails on the reviewed code (main at 3132a14) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A run's transcript (the run's change page) drew each call's tool name raw: a refused call of ``add\u200b`` read
   ``add`` there, the one console page review ce's display helper did not reach (a template of its own).
2. A streamed answer broken off by the transport (a connection reset, a read error) or by an event that is not
   JSON, after the endpoint had streamed part of it, cost the run nothing: only a stream that ended cleanly without
   its finish reason was charged (``RefusedTurn``) by the commit that meant to charge every stream given up.
3. Review cg's "an untouched field is not saved" removed untouched fields from ``cleaned_data`` inside the form's
   ``clean()``, so a form layered over it (the grant page's ``TenantGrantForm``, made after ``StaleEditsRefused``
   wrapped the admin's form) validated without them: a tenant's developer flipped their own deny of the built-in
   ``list_directory`` to allow (tool name untouched) and the "only the platform grants them" check read no tool.
4. Review ce's display helper wrote out every line break a browser sends (``\r\n``) as ``\u000d``: a multi-line
   text typed in a textarea (an operator's cancel reason, kept in the call's error; a decision's comment) read
   ``first line\u000d`` on every page that draws it.

Checked and found holding (no test here):

- ce: the agent admin does not call ``agent_update``, so an admin save appends one governance event, not two; the
  agent API's writes run in ``transaction.atomic`` with their event; ``shown`` leaves ``SafeData`` (boolean icons,
  ``format_html`` links, the admin's empty-value dash) alone and returns plain text otherwise, which Django then
  escapes (no escaping lost); non-text values pass through; ``pretty_json`` keeps ``ensure_ascii`` (arguments and
  payloads read escaped); the desk's and the audit console's own templates draw tool names through ``visible``.
- cf: every caller of ``tool_call_cancel`` passes the person asking as ``reader`` (REST ``request.user``, MCP's
  user, the admin action's ``request.user``); the admin's users are staff, so ``CallerView`` shows them true
  statuses.
- ci: ``retry_marks`` are read from the database on both sides (the same microseconds, the same offset), so a
  legitimate retry is not refused; a forged ``seen`` can only be refused or retry what needs attention now (what
  the unbound button did); an empty ``fields_version`` is the single page's own rule (a script's POST).
- cg: ``ToolDefinitionAdmin.save_model`` reads ``cleaned_data.get``: an untouched ``enabled``/``risk_override`` is
  ``None``, which ``tool_definition_govern`` reads as "no change" (a cleared override is ``""``, still applied);
  ``_save_m2m`` and the formset's unique checks skip fields absent from ``cleaned_data``; the tool group page's
  filtered ``activation_rules`` are saved only by people who cross tenants (who see them unfiltered); the login
  guard's /64 bucket handles scoped (``fe80::1%eth0``) and IPv4-mapped addresses.
- streaming: a ``RefusedTurn`` is a ``ModelError``: the run's step (``model_answers.failure``: same message, still
  retryable) and an agentic tool's inner loop (``ToolError`` with the message) treat it alike, only charging it;
  ``API_TOKEN_MAX_AGE_SECONDS`` is bounded by the settings' schema (no overflow in ``timedelta``).

Not fixed:

- A model provider bound to a tenant now has its governance events (base URL, ``credential_env``) in that tenant's
  chains, which the tenant's auditors read, while ``ModelProviderAdmin`` says nobody but those who cross the
  boundary ever reads a provider's URL or credential reference. Review ce chose the tenant's chains on purpose (its
  test asserts ``credential_env`` there); which of the two holds is a design decision, not one to take here.
- ``visible_text`` walks text character by character in Python: about 1 s per MB, paid by a change page drawing a
  run's large output or input through ``display_for_field``. An ASCII fast path would cut it; not measured as a
  failure worth a timing test.
- Tabs in free text are written out as ``\u0009`` (in identifiers that is wanted; in a pasted text it is noise).
- An SSE ``error`` event mid-stream (``openai.APIError``) is still not charged: whether the endpoint billed the
  answer is unknown there.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models_adapters.base import CHARS_PER_TOKEN
from tests.builtins.conftest import builtins, root  # noqa: F401 - fixtures
from tests.helpers import console
from tests.profiles.conftest import MakeAgent, fake_model, openai_agent  # noqa: F401, F811 - fixtures
from tests.tenancy.conftest import make_user, roles  # noqa: F401 - fixtures
from tests.unit.fake_openai import FakeModel, streamed

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


@pytest.mark.django_db(transaction=True)
def test_a_stream_broken_off_by_a_bad_event_is_charged_what_was_read(
    fake_model: FakeModel,  # noqa: F811 - the fixture imported above
    openai_agent: MakeAgent,  # noqa: F811
    alice: User,
) -> None:
    """Found: a stream that broke off with an error while being read (a transport error, an event that is not JSON)
    after the endpoint had streamed 4,000 characters failed the turn as a plain ``ModelError``: the run was charged
    nothing, though a stream that merely ended early is charged as read (``RefusedTurn``), and a run's or a child's
    ``max_tokens`` budget did not see it. Expect: charged what was read, the run failing as before (retryable)."""
    from agents_app.models import RunStatus, StopReason
    from agents_app.services import run_start

    reply = streamed(content=["x" * 400] * 10)
    reply.chunks = [*(reply.chunks or [])[:11], b"data: {not json\n\n"]
    fake_model.queue(reply)
    run = run_start(agent=openai_agent(stream=True), user=alice, input="write a long answer")
    run.refresh_from_db()
    assert (run.status, run.stop_reason, run.retryable) == (RunStatus.FAILED, StopReason.MODEL_ERROR, True)
    assert "broke off" in run.error
    assert run.prompt_tokens > 0
    assert run.completion_tokens >= 4_000 // CHARS_PER_TOKEN


@pytest.mark.usefixtures("builtins")
def test_a_grant_flipped_to_allow_a_built_in_tool_is_refused_with_its_tool_untouched(
    tenant: Any,
    roles: Any,  # noqa: F811 - the fixture imported above
) -> None:
    """Found: the grant page's tenant check (``TenantGrantForm.clean``: built-in tools are the platform's to allow)
    runs after ``ShownValuesKept.clean`` dropped every untouched field from ``cleaned_data``: changing only the effect
    of a tenant's own deny of ``list_directory`` to allow read no tool name, and the allow was saved. Expect: every
    ``clean()`` layer reads the whole form; only the save leaves untouched fields as stored (the allow refused)."""
    from toolhub.models import Grant, GrantEffect

    developer = make_user("acme-dev-cp", tenant=tenant, staff=True, groups=(roles["developers"],))
    deny = Grant.objects.create(
        tenant=tenant, tool_name="list_directory", effect=GrantEffect.DENY, set_by_platform=False
    )
    shown = {"effect": "deny", "note": "", "tool_group": "", "tool_name": "list_directory", "tenant": tenant.pk}
    posted = {**shown, **{f"initial-{name}": value for name, value in shown.items()}, "effect": "allow"}
    response = console(developer).post(f"/admin/toolhub/grant/{deny.pk}/change/", posted)
    assert response.status_code == 200, response.status_code  # the form again, with its error
    assert "only the platform grants them" in response.content.decode()
    assert Grant.objects.get(pk=deny.pk).effect == GrantEffect.DENY


def test_a_text_typed_on_several_lines_is_drawn_without_escaped_carriage_returns(
    request_call: Any, alice: User, superuser: User
) -> None:
    """Found: browsers send a textarea's line breaks as ``\\r\\n`` and Django keeps them (an operator's cancel reason
    lands in the call's error so), but ``visible_text`` escaped every control character but ``\\n``: the call's page
    read ``first line\\u000d``. Expect: a line break as browsers send it drawn as one; a lone ``\\r`` still written
    out (it is no line break), and so are zero-width characters."""
    from toolhub.models import ToolCall
    from toolhub.visible import visible_text

    call = request_call("add", {"a": 1, "b": 2}, alice, tenant="acme")
    ToolCall.objects.filter(pk=call.pk).update(error="cancelled by op: first line\r\nsecond line")
    html = console(superuser).get(f"/admin/toolhub/toolcall/{call.pk}/change/").content.decode()
    assert "first line" in html and "second line" in html
    assert "\\u000d" not in html
    assert visible_text("a\r\nb") == "a\r\nb"
    assert visible_text("add\r") == "add\\u000d" and visible_text("a\u200b") == "a\\u200b"
