"""Probe of 2026-12-04 (fourth pass): runs, agentic tools, subagents, external results, artifacts, MCP, sagas.

Each test is an attack that worked on the code as probed, now refused. Its docstring says who the attacker
was, what they reached, where in the code ("Found") and what closed it ("Fix"): an agentic tool names only a
provider its run's agent may use; its inner model reads a denial of a tool outside the run as an unknown tool;
a run's context is bounded (``MAX_RUN_CONTEXT_BYTES``); an external result is scrubbed of sensitive values;
a compensation's result is for operators only.
"""

from collections.abc import Callable, Iterator
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import ModelProvider, ProviderKind, RunStatus
from agents_app.services import RunInputError, agent_create, run_start
from toolhub import Param, Tool, registry, tool
from toolhub.agentic import SimpleAgenticTool
from toolhub.models import CallKind, CallStatus, Tenant, ToolCall

pytestmark = pytest.mark.django_db


@tool(risk="low")
def probe_d_add(a: Annotated[int, Param("First")], b: Annotated[int, Param("Second")]) -> int:
    """Add two numbers."""
    return a + b


#: An agentic tool whose author names a model provider: ``provider=`` (the run's agent's settings, that provider).
PROBE_D_BRAIN = SimpleAgenticTool(
    "probe_d_brain",
    "Work out a sum.",
    tools=[probe_d_add],
    max_iterations=3,
    provider="globex-brain",
)


@pytest.fixture
def brain_tool() -> Iterator[None]:
    with registry.temporarily(probe_d_add, PROBE_D_BRAIN):
        yield


def _start(agent: Any, user: User, committed: Callable[..., Any]) -> Any:
    with committed(execute=True):
        run = run_start(agent=agent, user=user, input="go")
    run.refresh_from_db()
    return run


# --- an agentic tool's provider= reaches a provider bound to another tenant ---------------------------------------


def test_an_agentic_tool_in_acmes_run_uses_a_model_provider_bound_to_globex(
    brain_tool: None,
    alice: User,
    tenant: Tenant,
    other_tenant: Tenant,
    django_capture_on_commit_callbacks: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model provider bound to globex ("only this tenant's agents may use it") serves acme's run.

    Attacker: alice, a plain member of acme, who may call an agentic tool whose author named a provider
    (``SimpleAgenticTool(provider="globex-brain")``). The platform bound that provider to globex: its endpoint
    and its API key (globex's account, globex's private deployment) are globex's. acme's agent cannot name it
    (``providers_usable_by`` refuses), yet the agentic tool builds its inner model on it for acme's run, so
    acme's conversation goes to globex's endpoint, billed to globex's key.

    Found: ``agents_app/agentic.py`` ``agentic_model``: ``ModelProvider.objects.filter(name=provider).first()``,
    with no check of the provider's tenant (``agents_app.selectors.providers_usable_by``).
    Fix: look the provider up among ``providers_usable_by(<the run's tenant id>)`` and answer a provider of
    another tenant like a missing one ("not configured; ask an administrator").
    """
    ModelProvider.objects.create(name="globex-brain", kind=ProviderKind.SCRIPTED, tenant=other_tenant)
    # acme's own agents may not name globex's provider ...
    with pytest.raises(RunInputError):
        agent_create(name="acme-on-globex", tenant="acme", provider="globex-brain", script=[], tools=[])

    import agents_app.agentic as agentic

    built_on: list[tuple[str, str | None]] = []
    original = agentic.adapter_for

    def spying(agent: Any) -> Any:
        built_on.append((agent.provider.name, agent.provider.tenant.slug if agent.provider.tenant_id else None))
        return original(agent)

    monkeypatch.setattr(agentic, "adapter_for", spying)
    # ... but an acme agent calling the agentic tool runs its inner model on it.
    agent = agent_create(
        name="summer",
        tenant="acme",
        provider="scripted",
        tools=["probe_d_brain"],
        script=[
            {"tool_calls": [{"name": "probe_d_brain", "arguments": {"task": "2+3"}}]},
            {"content": "done"},
            {"content": "done"},
        ],
    )

    run = _start(agent, alice, django_capture_on_commit_callbacks)

    assert run.tenant == "acme"
    outer = ToolCall.objects.get(run_id=run.id, kind=CallKind.CALL, tool_name="probe_d_brain")
    assert ("globex-brain", "globex") not in built_on, (
        f"acme's run built its agentic tool's model on globex's provider (outer call {outer.status}: "
        f"{outer.result or outer.error!r})"
    )
    assert outer.status != CallStatus.SUCCEEDED or run.status != RunStatus.COMPLETED


# --- an agentic tool's inner model learns which tools exist beyond the run's ---------------------------------------


@tool(risk="low")
def probe_d_payroll_export() -> str:
    """Export the payroll (a tool of another team: not among the run's agent's tools)."""
    return "payroll"


#: An agentic tool whose inner model is the named agent's (looked up in the run's tenant).
PROBE_D_DESK = SimpleAgenticTool(
    "probe_d_desk", "Work out a sum.", tools=[probe_d_add], max_iterations=3, agent="probe-d-desk-brain"
)


@pytest.fixture
def desk_tool() -> Iterator[None]:
    with registry.temporarily(probe_d_add, probe_d_payroll_export, PROBE_D_DESK):
        yield


def test_an_agentic_tools_inner_model_reads_a_denial_for_a_tool_outside_the_run_and_unknown_for_a_missing_one(
    desk_tool: None, alice: User, tenant: Tenant, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    """Inside an agentic tool, the catalogue can be probed name by name, which the run's own turn forbids.

    Attacker: the model (or alice, who scripts or steers it) inside ``SimpleAgenticTool``'s inner loop. A call
    of a registered tool the run may not use is answered "Tool 'probe_d_payroll_export' is not available to
    agent ..." (status ``denied``), a call of a name that does not exist "Unknown tool ..." (``invalid``): the
    difference confirms which tools exist. The outer call's result, stored and shown in the run's API and
    messages, lists each inner call's status, so the run's user reads it too. The run's own turns answer both
    alike (``agents_app.loop._texts_for_model``; REST and MCP too, ``toolhub.direct.call_hidden_from``).

    Found: ``toolhub/agentic/simple.py`` ``_orchestrate``: the inner model reads ``call.model_text()`` and the
    result lists ``call.status`` as stored, with no caller view of a denial of a tool outside the run's
    (``toolhub.caller_view`` / ``call_hidden_from``).
    Fix: give the inner model, and the result's ``calls``, a denied call of a tool the principal may not see as
    the unknown-tool message and status ``invalid``, as the run loop does.
    """
    agent_create(
        name="probe-d-desk-brain",
        tenant="acme",
        provider="scripted",
        tools=[],
        script=[
            {"tool_calls": [{"name": "probe_d_no_such_tool", "arguments": {}}]},
            {"tool_calls": [{"name": "probe_d_payroll_export", "arguments": {}}]},
            {"content": "{last_tool_result}"},
        ],
    )
    agent = agent_create(
        name="desk",
        tenant="acme",
        provider="scripted",
        tools=["probe_d_desk"],
        script=[
            {"tool_calls": [{"name": "probe_d_desk", "arguments": {"task": "2+3"}}]},
            {"content": "done"},
        ],
    )

    run = _start(agent, alice, django_capture_on_commit_callbacks)

    outer = ToolCall.objects.get(run_id=run.id, kind=CallKind.CALL, tool_name="probe_d_desk")
    assert outer.status == CallStatus.SUCCEEDED, outer.error
    statuses = {entry["tool"]: entry["status"] for entry in outer.result["calls"]}
    answer = outer.result["answer"]
    # The run's own loop would answer both as unknown tools; here the existing one reads as denied.
    assert "probe_d_payroll_export" not in answer or answer.startswith("Unknown tool"), answer
    assert statuses["probe_d_payroll_export"] == statuses["probe_d_no_such_tool"], statuses


# --- a run's context is unbounded, and copied into every call row and its append-only audit event -----------------


def test_a_members_megabyte_run_context_is_copied_into_every_call_and_its_undeletable_audit_event(
    brain_tool: None, alice: User, tenant: Tenant, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    """One request's context is written again with every call of the run, for ever, in the audit trail.

    Attacker: alice, a plain member with an API token. ``POST /api/v1/runs/`` takes ``context`` as any JSON
    object of any size (only the request body's 2.5 MB bound applies), while a direct call's context takes
    only allow-listed keys of 500 characters at most (``toolhub.direct.client_context``). The run's context is
    layered into every call's context: each call row stores it, and each ``call.requested`` audit event stores
    it again in its data; audit events cannot be deleted (triggers, ``toolhub_db_roles``), and children of
    subagents copy it. So a 1 MB request makes 2 MB of permanent rows per tool call (20 MB for the default
    10 calls of one run, 600 MB a minute at the ``runs`` rate of 30/minute), from one user.

    Found: ``agents_app/api.py`` ``RunInputSerializer.context`` (a bare ``DictField``) and
    ``agents_app/services.py`` ``run_start`` (``json_storage_problem`` checks characters, not size);
    ``toolhub/pipeline.py`` ``_request_data`` puts ``call.context`` into the audit event.
    Fix: bound a run's context as a direct call's is (a key count, a length per value, a total size, e.g.
    ``MAX_ARGUMENTS_BYTES``) and answer 400 beyond it.
    """
    from tests.security_review.conftest import client_for
    from toolhub.models import AuditEvent

    agent_create(
        name="adder",
        tenant="acme",
        provider="scripted",
        tools=["probe_d_add"],
        script=[
            {"tool_calls": [{"name": "probe_d_add", "arguments": {"a": 1, "b": 2}}]},
            {"content": "{last_tool_result}"},
        ],
    )
    big = "x" * 1_000_000

    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(alice).post(
            "/api/v1/runs/", {"agent": "adder", "input": "add", "context": {"notes": big}}, format="json"
        )

    call = ToolCall.objects.filter(tool_name="probe_d_add", user=alice).first()
    stored = len(str(call.context)) if call is not None else 0
    audited = sum(len(str(e.data)) for e in AuditEvent.objects.filter(call_id=call.id)) if call is not None else 0
    assert response.status_code == 400, (
        f"a 1 MB run context was accepted ({response.status_code}); its call stores {stored} characters of "
        f"context and its audit events {audited}"
    )


# --- an external result repeating a sensitive argument is kept and shown in clear ---------------------------------


PROBE_D_KYC = Tool.external(
    "probe_d_kyc",
    "Check a person's identity (answered by the KYC connector).",
    {"type": "object", "properties": {"ssn": {"type": "string"}}, "required": ["ssn"]},
    sensitive=("ssn",),
)


def test_an_external_result_repeating_a_sensitive_argument_is_stored_and_shown_in_clear(
    alice: User, tenant: Tenant, acme_operator: User
) -> None:
    """A connector that echoes the sensitive argument puts it, unscrubbed, in the result everyone reads.

    Attacker: none needed; who reads it: anyone who may see the call (its user, the tenant's auditors and
    operators, MCP's status tool, the run's messages when a run made it). The README's promise: a sensitive
    argument's value is replaced by ``[secret]`` where the tool repeats it (its result, an error). A worker
    applies ``SecretScrubber.for_call`` to what a tool returns; an external tool's result and error, supplied
    by ``POST /api/v1/calls/{id}/result/`` (KYC connectors and CRMs routinely echo the looked-up key), are
    stored as sent.

    Found: ``toolhub/waiting.py`` ``tool_call_submit_result`` stores ``result`` and ``error`` as given.
    Fix: scrub them with ``SecretScrubber.for_call(tool, call.arguments)`` before storing (and before the
    size and SHA-256 are taken), as ``toolhub.outcomes`` does for a worker's outcome.
    """
    from tests.security_review.conftest import client_for

    ssn = "123-45-6789"
    with registry.temporarily(PROBE_D_KYC):
        made = client_for(alice).post(
            "/api/v1/calls/", {"tool": "probe_d_kyc", "arguments": {"ssn": ssn}}, format="json"
        )
        assert made.status_code == 202, made.content
        call_id = made.json()["id"]
        assert ssn not in made.content.decode()  # the argument itself is redacted

        answered = client_for(acme_operator).post(
            f"/api/v1/calls/{call_id}/result/", {"result": {"match": True, "ssn": ssn}}, format="json"
        )
        assert answered.status_code == 200, answered.content
        shown = client_for(alice).get(f"/api/v1/calls/{call_id}/").content.decode()

    assert ssn not in str(ToolCall.objects.get(pk=call_id).result), "the sensitive value is stored in the result"
    assert ssn not in shown, "the call's API shows the sensitive value in its result"


# --- the step's own user settles the external compensation that undoes their step --------------------------------


PROBE_D_REVOKE = Tool.external(
    "probe_d_revoke_access",
    "Revoke a badge (done by the security desk's system, which posts the result).",
    {"type": "object", "properties": {"badge": {"type": "string"}}, "required": ["badge"]},
    idempotent=True,
)


@tool(
    risk="low",
    compensate_with="probe_d_revoke_access",
    compensation_mapping=lambda arguments, result: {"badge": arguments["badge"]},
)
def probe_d_grant_access(badge: Annotated[str, Param("The badge to open the server room to.")]) -> dict:
    """Open the server room to a badge."""
    return {"badge": badge}


def test_the_steps_own_user_posts_the_result_of_the_external_compensation_that_undoes_their_step(
    alice: User, tenant: Tenant, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    """A member marks their own step undone: the external system that must undo it is pre-empted.

    Attacker: alice, a plain member. Her direct saga's step opened the server room to her badge; its
    compensation is an external tool (the security desk's system revokes the badge and posts the result).
    After a rollback, the compensation call awaits its result, and it is "made for" alice (the step's user),
    so ``POST /api/v1/calls/{id}/result/`` lets her answer it herself: the compensation succeeds, her step reads
    ``compensated``, the saga is done, and the desk's system, when it answers, gets 409. Cancelling a
    compensation is refused for this very reason ("it undoes a completed step"); supplying its result is not.

    Found: ``toolhub/api/views.py`` ``CallResultView`` (``call_may_operate``: the call's user) and
    ``toolhub/waiting.py`` ``tool_call_submit_result``, which never look at ``call.kind``.
    Fix: a compensation's result is for operators (``toolhub.change_toolcall`` in the tenant) only, never for
    the user whose step it undoes.
    """
    from tests.security_review.conftest import client_for

    client = client_for(alice)
    with registry.temporarily(PROBE_D_REVOKE, probe_d_grant_access):
        with django_capture_on_commit_callbacks(execute=True):
            assert client.post("/api/v1/sagas/", {"saga_id": "badge-s1"}, format="json").status_code == 201
            step = client.post(
                "/api/v1/calls/",
                {"tool": "probe_d_grant_access", "arguments": {"badge": "B-7"}, "saga_id": "badge-s1"},
                format="json",
            )
        assert ToolCall.objects.get(pk=step.json()["id"]).status == CallStatus.SUCCEEDED, step.content
        with django_capture_on_commit_callbacks(execute=True):
            rolled = client.post("/api/v1/sagas/badge-s1/rollback/", format="json")
        assert rolled.status_code == 202, rolled.content
        compensation = ToolCall.objects.get(kind=CallKind.COMPENSATION, tool_name="probe_d_revoke_access")
        assert compensation.status == CallStatus.AWAITING_RESULT, compensation.error
        assert compensation.user_id == alice.id

        with django_capture_on_commit_callbacks(execute=True):
            answered = client.post(
                f"/api/v1/calls/{compensation.id}/result/", {"result": {"revoked": True}}, format="json"
            )

    step_row = ToolCall.objects.get(pk=step.json()["id"])
    assert answered.status_code in (403, 404), (
        f"alice answered the compensation of her own step ({answered.status_code}); her step is now {step_row.status}"
    )
