"""The SDK side: toolhub tools as ``FunctionTool``s, runs paused on toolhub approvals and resumed on decisions.

In-process by design: the agent runs inside the Django project, so its tools call the governed pipeline
through ``toolhub.direct`` as the authenticated Django user (no API token to hand to the agent, the
same transaction and audit as the REST API). ``needs_approval`` *is* toolhub's pipeline decision: the
first time the SDK asks, the call is requested; held for approval, the SDK interrupts the run, which is
stored here until the operators decide in toolhub (admin or ``/api/v1/approvals/``). Resuming applies
their decisions: an approved call has already run on toolhub's side, once, with the arguments the
operator approved (edited or not), and the tool hands its result to the model; a rejected one reaches
the model as the operator's comment.
"""

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agents import Agent, FunctionTool, RunConfig, RunContextWrapper, Runner, RunResult, RunState
from agents import __version__ as sdk_version
from agents._tool_invocation import tool_invocation_identity
from agents.tool_context import ToolContext as SDKToolContext
from asgiref.sync import sync_to_async
from django.contrib.auth.models import AbstractBaseUser

from toolhub.adapters._common import offered_tools
from toolhub.conf import toolhub_settings
from toolhub.direct import caller_principal
from toolhub.models import CallStatus
from toolhub.storable import storable_value
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

from .models import PausedAgentRun
from .store import (
    AdapterError,
    PendingItem,
    RunNotDecidedError,
    governed_call,
    governed_call_id,
    governed_call_result,
    paused_run_claim,
    paused_run_create,
    paused_run_refused,
    paused_run_release,
    redacted_state,
)

__all__ = [
    "RUN_KEY",
    "GovernedRunOutcome",
    "RunNotDecidedError",
    "governed_tools",
    "run_context",
    "run_governed",
    "resume_governed",
]

#: The key of the SDK run context that ties the run's tool calls to toolhub calls.
RUN_KEY = "toolhub_run"
_CLIENT = {"name": "openai-agents", "version": sdk_version}


@dataclass(frozen=True)
class GovernedRunOutcome:
    """An SDK run's result and, when it stopped on approvals, the stored paused run to resume."""

    result: RunResult
    paused: PausedAgentRun | None = None

    @property
    def final_output(self) -> Any:
        return None if self.paused is not None else self.result.final_output


def run_context(**values: Any) -> dict[str, Any]:
    """A new SDK run context (a mapping, so ``RunState`` serializes it) with the run's toolhub key."""
    return {**values, RUN_KEY: uuid.uuid4().hex}


def _run_key(ctx: RunContextWrapper[Any]) -> str:
    context = ctx.context
    key = context.get(RUN_KEY) if isinstance(context, Mapping) else None
    if not isinstance(key, str) or not key:
        raise AdapterError(
            "Run the agent with context=run_context() (or run_governed), so toolhub can follow its calls."
        )
    return key


def governed_tools(
    *, user: AbstractBaseUser, tenant: str | None = None, names: list[str] | None = None
) -> list[FunctionTool]:
    """The toolhub tools ``user`` may call (all of them, or ``names``) as SDK ``FunctionTool``s.

    Their calls run as ``user`` (in ``tenant``, or the user's only tenant); the model never picks either.
    A name the user may not call is refused here, naming only tools the user may call.
    """
    principal = caller_principal(user, tenant=tenant)
    offered = offered_tools(principal)
    if names is not None:
        available = [tool.name for tool in offered]
        refused = sorted(set(names) - set(available))
        if refused:
            raise AdapterError(
                f"Not available to {principal.username}: {', '.join(refused)[:300]}; "
                f"available: {', '.join(available)[:300] or 'none'}."
            )
        offered = [tool for tool in offered if tool.name in names]
    return [_function_tool(tool, user=user, tenant=principal.tenant or None) for tool in offered]


def _function_tool(tool: Tool, *, user: AbstractBaseUser, tenant: str | None) -> FunctionTool:
    name = tool.name
    wait_seconds = toolhub_settings().CALL_WAIT_MAX_SECONDS

    def request(run_key: str, sdk_call_id: str, arguments: str | Mapping[str, Any]) -> Any:
        return governed_call(
            user=user,
            tenant=tenant,
            run_key=run_key,
            tool_name=name,
            sdk_call_id=sdk_call_id,
            arguments=arguments,
            client=_CLIENT,
        )

    async def needs_approval(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        call = await sync_to_async(request)(_run_key(ctx), call_id, params)
        return bool(call.status == CallStatus.PENDING_APPROVAL)

    async def invoke(ctx: SDKToolContext[Any], arguments: str) -> str:
        def settled() -> str:
            call = request(_run_key(ctx), ctx.tool_call_id, arguments)
            return governed_call_result(call, wait_seconds=wait_seconds)

        return await sync_to_async(settled)()

    return FunctionTool(
        name=name,
        description=tool.description,
        params_json_schema=tool.json_schema,
        on_invoke_tool=invoke,
        strict_json_schema=False,
        needs_approval=needs_approval,
    )


async def run_governed(
    agent: Agent[Any],
    input: Any,
    *,
    user: AbstractBaseUser,
    tenant: str | None = None,
    context: Mapping[str, Any] | None = None,
    **runner_options: Any,
) -> GovernedRunOutcome:
    """Run ``agent``; when it stops on approvals, store it paused (its calls are in the operators' queue)."""
    values = dict(context or {})
    values.setdefault(RUN_KEY, uuid.uuid4().hex)
    result = await Runner.run(agent, input, context=values, **_traced_without_data(runner_options))
    return await _outcome(result, agent=agent, user=user, tenant=tenant, run_key=values[RUN_KEY])


async def resume_governed(
    paused_run_id: uuid.UUID | str, agent: Agent[Any], *, user: AbstractBaseUser, **runner_options: Any
) -> GovernedRunOutcome:
    """Resume a paused run with the operators' decisions; it may pause again on new approvals.

    Raises :class:`RunNotDecidedError` while a call still waits (nothing changed, try again later).
    """
    paused, decisions = await sync_to_async(paused_run_claim)(paused_run_id=paused_run_id, user=user)
    state = await RunState.from_json(agent, paused.state)
    for item in state.get_interruptions():
        decision = decisions.get(str(governed_call_id(paused.run_key, _sdk_call_id(item.raw_item))))
        if decision is not None and decision.approve:
            state.approve(item)
        else:
            state.reject(item, rejection_message=decision.message if decision else "Not decided in toolhub.")
    try:
        result = await Runner.run(agent, state, **_traced_without_data(runner_options))
    except BaseException:
        await sync_to_async(paused_run_release)(paused_run_id=paused.pk, user=user)
        raise
    return await _outcome(result, agent=agent, user=user, tenant=paused.tenant or None, run_key=paused.run_key)


async def _outcome(
    result: RunResult, *, agent: Agent[Any], user: AbstractBaseUser, tenant: str | None, run_key: str
) -> GovernedRunOutcome:
    if not result.interruptions:
        return GovernedRunOutcome(result)
    items = [
        PendingItem(
            tool_name=item.tool_name or "",
            sdk_call_id=_sdk_call_id(item.raw_item),
            arguments=_field(item.raw_item, "arguments") or "",
        )
        for item in result.interruptions
    ]
    known = await sync_to_async(registry.names)()  # remote MCP tools come from the database
    foreign = sorted({item.tool_name for item in items} - set(known))
    if foreign:
        refused = f"Only toolhub tools can pause a governed run; not toolhub's: {', '.join(foreign)[:300]}."
        await sync_to_async(paused_run_refused)(
            user=user, tenant=tenant, run_key=run_key, items=items, reason=f"The run was not stored. {refused}"[:500]
        )
        raise AdapterError(f"{refused} Its toolhub calls held for approval were withdrawn.")
    state = _kept_state(result.to_state().to_json())
    paused = await sync_to_async(paused_run_create)(
        user=user, tenant=tenant, run_key=run_key, agent_name=agent.name, state=state, items=items, client=_CLIENT
    )
    return GovernedRunOutcome(result, paused)


def _traced_without_data(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with, unless the caller gave a ``run_config``, traces that keep no tool arguments nor results.

    The SDK exports its traces (to OpenAI's by default) with every tool call's arguments and output unless told
    not to (``trace_include_sensitive_data``, on by default): a ``sensitive=`` value would leave toolhub there. A
    developer who passes their own ``run_config`` decides this themselves.
    """
    if "run_config" in options:
        return options
    return {**options, "run_config": RunConfig(trace_include_sensitive_data=False)}


def _kept_state(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` as stored: tool calls redacted (``redacted_state``), storable, the SDK's ledger bound to what is kept.

    Storable (``storable_value``): a model's NUL character or lone surrogate (in its text, a reasoning item, a
    call's arguments) is written out as its escape, as toolhub's own runs keep a model's text; jsonb refuses it,
    and the run, its calls already on the approval desk, could not be stored.

    The SDK binds each call id to a fingerprint of its arguments and refuses a restored call whose arguments
    differ ("reused a tool call ID"): a redacted or escaped call's binding is computed again, by the SDK's own
    function, from the arguments kept, only where the stored binding is the one of the arguments the model sent.
    """
    kept = storable_value(redacted_state(state))
    ledger = (kept.get("context") or {}).get("tool_invocations")
    if not isinstance(ledger, dict):
        return kept
    for sent, stored in zip(_function_calls(state), _function_calls(kept), strict=True):
        entry = ledger.get(stored.get("call_id"))
        if sent == stored or not isinstance(entry, dict):
            continue
        before, after = tool_invocation_identity(sent), tool_invocation_identity(stored)
        if before is not None and after is not None and entry.get("fingerprint") == before[2]:
            entry["fingerprint"] = after[2]
    return kept


def _function_calls(value: Any) -> list[dict[str, Any]]:
    """Every function call item in a serialized state, in document order."""
    if isinstance(value, list):
        return [found for item in value for found in _function_calls(item)]
    if not isinstance(value, dict):
        return []
    found = [value] if value.get("type") == "function_call" else []
    return found + [item for child in value.values() for item in _function_calls(child)]


def _field(raw: Any, name: str) -> Any:
    return raw.get(name) if isinstance(raw, Mapping) else getattr(raw, name, None)


def _sdk_call_id(raw: Any) -> str:
    return str(_field(raw, "call_id") or _field(raw, "id") or "")
