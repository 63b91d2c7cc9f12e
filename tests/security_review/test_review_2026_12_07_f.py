"""Review 2026-12-07 (f): bad input end to end, values that change when stored, from review gh's and gl's
``stored_numbers`` (``toolhub.storable``) onwards: NUL characters, lone surrogates, NaN/Infinity, integers past
2**63 and 2**1024, ``-0.0``, deep nesting, non-text keys and Python values no JSON holds, in arguments and results.

Each finding's test fails on the code as found (main at 8711560) and says what was found and what is expected.

Findings:

1. (PostgreSQL) An OpenAI Agents SDK run (``toolhub.adapters.openai_agents``) whose model wrote a NUL character or
   a lone surrogate anywhere in what the run keeps (its text beside a tool call, a reasoning item, a tool call's
   id) could not pause: ``paused_run_create`` wrote ``RunState.to_json()`` as it was into ``PausedAgentRun.state``
   (jsonb), which refused it, so ``run_governed`` raised Django's ``DataError`` ("unsupported Unicode escape
   sequence") to its caller, and the toolhub calls its ``needs_approval`` had already requested (committed) stayed
   on the approval desk for a run that was never stored: approved, one ran for a run nobody could resume, its
   result read by no model. The state is now kept storable (``toolhub.storable.storable_value``: a NUL or a lone
   surrogate written out as its escape, as toolhub's own runs keep a model's text, ``model_answers``), with the
   SDK's call-id fingerprints computed again over the arguments kept. The run pauses, the operator's decision
   runs the call once and the resumed run reads its result.
   ``test_an_sdk_run_whose_model_wrote_a_nul_pauses_and_resumes``.
2. (Any database) The same SDK run whose tool call's id (the endpoint's) held a lone surrogate failed at once:
   ``governed_call_id`` encoded it to UTF-8 for ``uuid5`` and raised ``UnicodeEncodeError`` (the SDK's ``UserError``
   "Error running tool ..."); one holding a NUL, once the state is kept escaped (finding 1), would resume under
   another derived id than the one its pause requested. ``governed_call_id`` now derives from the id as the state
   keeps it (``storable_text``); the same test, id ``"call\\u0000\\ud800"``.

Checked and holding (probed on PostgreSQL through ``tool_call_request``, a low-risk tool run by the eager worker,
``assert_audit_intact`` after each; no test kept for those earlier reviews already hold):

- A tool's RESULT holding ``Decimal("1.10")``/``Decimal("NaN")`` (stored as the texts ``"1.10"``, ``"NaN"``),
  a datetime (ISO text), ``b"abc"`` (``"abc"``), a set (a list), int/None/tuple/float keys (``"1"``, ``"None"``,
  ``"1,2"``, ``"nan"``; keys that would merge as text are refused by ``to_json_value``), ``2**64`` and ``2**1030``
  (stored exactly), ``1e16`` and ``-0.0`` (stored as jsonb gives them back; no binding covers a result),
  ``Decimal("1e100000")`` (its text): succeeded, stored, audit intact.
- A result holding ``NaN``/``inf``, a NUL or a lone surrogate in a value, a key or a text result, invalid UTF-8
  bytes, ``10**5000``, an ``object()``: the call fails with "The tool returned a value that cannot be serialized to
  JSON." (bounded; the traceback kept for operators), nothing stored, audit intact. A result nested 900 or 5,000
  deep, or a list holding itself: ``read_now`` (in ``Tool.invoke``) raises ``RecursionError``, recorded as the
  tool's internal error ("do not retry with the same arguments"): failed and recorded, never stuck.
- A ``ToolSuspend`` payload holding ``1e16``/``-0.0`` (parked, stored as jsonb gives back), int keys, Decimals; one
  holding NaN, a NUL, a lone surrogate or 900 levels fails its call with "The tool suspended itself with a payload
  that cannot be stored as JSON; nothing awaits a result." and the problem named; a reason holding a NUL and a
  lone surrogate is stored escaped.
- ``POST /api/v1/calls/{id}/result/`` (an external tool's call): ``1e16``/``-0.0`` stored as jsonb gives them back
  (200; ``result_sha256`` is over the result as posted, as review gl noted), a 30-digit integer exactly, duplicate
  keys (the last wins); ``NaN`` (400, not valid JSON), ``1e400`` (400, not a finite number), a NUL in the result or
  the error, a lone surrogate in a key (400, named, "nothing was done"), ``{"error": 5}`` (failed, "5"), a 3 MB
  body (413): the call keeps awaiting its result when refused, audit intact.
- ``POST /api/v1/approvals/{id}/approve/`` with edited arguments on PostgreSQL: a NUL or a lone surrogate in a
  value, ``NaN``, ``1e400``, a comment holding a NUL or ``NaN``: 400 with the place named, nothing run, the call
  still pending; ``1e16``, ``-0.0`` and a 30-digit integer: approved, run once with the value as stored (the
  release binds the version read back), audit intact. Arguments sent as text: 400 (an object is asked for).

"""

import json
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from tests.helpers import assert_audit_intact
from tests.interop.openai_agents.test_openai_agents_adapter import NO_TRACING, agent_for, run, tool_messages
from tests.testapp.models import SideEffect
from tests.unit.fake_openai import FakeModel, completion, serve
from toolhub.adapters.openai_agents import resume_governed, run_governed
from toolhub.adapters.openai_agents.models import PausedAgentRun
from toolhub.models import CallStatus, ToolCall


@pytest.fixture
def fake() -> Iterator[FakeModel]:
    """A local fake OpenAI endpoint for the SDK's model (offline)."""
    with serve(FakeModel()) as model:
        yield model


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("written", "call_id"),
    [("note\u0000", "call_1"), ("note\ud800", "call_1"), ("note", "call\u0000\ud800")],
    ids=["NUL", "lone surrogate", "in the call's id"],
)
def test_an_sdk_run_whose_model_wrote_a_nul_pauses_and_resumes(
    written: str, call_id: str, fake: FakeModel, alice: User, operator_client: APIClient
) -> None:
    """The model answers with text holding a NUL (or a lone surrogate) beside a call of a high-risk tool.

    Found (PostgreSQL): ``run_governed`` raised ``DataError`` ("unsupported Unicode escape sequence"): the paused
    run was never stored, and the call it had requested stayed pending on the approval desk for nobody.
    Expect: the run pauses (its state stored, the text escaped); the operator approves; the call runs once; the
    resumed run reads its result and ends; the audit verifies.
    """
    arguments = json.dumps({"note": "kept"})
    fake.queue(
        completion(content=written, tool_calls=[{"id": call_id, "name": "risky_effect", "arguments": arguments}]),
        completion(content="Recorded."),
    )
    agent = agent_for(fake, alice, "risky_effect")

    outcome = run(run_governed(agent, "record it", user=alice, run_config=NO_TRACING))

    assert outcome.paused is not None
    stored = json.dumps(PausedAgentRun.objects.get(pk=outcome.paused.pk).state)
    assert "\\\\u0000" in stored or "\\\\ud800" in stored
    request = ApprovalRequest.objects.get(call__tool_name="risky_effect")
    approved = operator_client.post(f"/api/v1/approvals/{request.pk}/approve/", {}, format="json")
    assert approved.status_code == 200, approved.content

    resumed = run(resume_governed(outcome.paused.pk, agent, user=alice, run_config=NO_TRACING))

    assert resumed.paused is None and resumed.final_output == "Recorded."
    call = ToolCall.objects.get()
    assert (call.status, call.arguments) == (CallStatus.SUCCEEDED, {"note": "kept"})
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["kept"]
    assert json.loads(tool_messages(fake)[-1]) == {"effect_id": SideEffect.objects.get().pk}
    assert_audit_intact()
