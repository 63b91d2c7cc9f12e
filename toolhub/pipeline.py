"""The governed call pipeline, request side: resolve, validate, authorize, approve, dispatch.

Every call, whoever asks, goes through ``tool_call_request`` and leaves one ``ToolCall`` row plus its
audit events. Execution happens on a worker (``toolhub.execution``).
"""

import hmac
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from toolhub.audit import EventSpec, redact, redacted_arguments_text
from toolhub.audit_hash import canonical_json
from toolhub.authorization import (
    CallPrincipal,
    authorization_denial,
    tool_definitions,
)
from toolhub.call_arguments import CallRefused, PreparedArguments, prepared_arguments
from toolhub.calls import call_insert, notify_settled, one_write
from toolhub.disclosure.unfolding import tool_seen_by, usable_tools
from toolhub.dispatch import EAGER_WORKER, call_lease, dispatch_call, inline_worker, runs_in_this_process
from toolhub.feedback import unknown_tool_message
from toolhub.governance import governance_scope
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.policy import approval_verdict, decision_stamp
from toolhub.rowwrite import new_instance
from toolhub.signals import approval_needed
from toolhub.storable import storable_text, storable_value
from toolhub.tools.context import RESERVED_CONTEXT_KEYS, ToolContext
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

__all__ = [
    "CallRequest",
    "tool_call_request",
    "approval_hash",
    "approval_hash_matches",
    "visible_tool_names",
    "run_context",
]


@dataclass(frozen=True)
class CallRequest:
    """A request to call a tool, as the model (or an API client) made it, plus where it belongs."""

    tool_name: str
    arguments: str | Mapping[str, Any] | None
    principal: CallPrincipal
    context: ToolContext
    run_id: uuid.UUID | None = None
    turn: int = 0
    position: int = 0
    model_call_id: str = ""
    saga_id: str = ""
    kind: CallKind = CallKind.CALL
    #: Context of this one interaction, layered over ``context`` (it wins, except on the boundary's keys).
    interaction_context: Mapping[str, Any] | None = None
    #: Who sent a call from outside (an MCP client's name and version, an API client), for the audit trail.
    client: Mapping[str, Any] | None = None
    #: The new call's id, when the caller needs to know it before the call is written (to follow it).
    call_id: uuid.UUID | None = None
    #: ``gate(tool_name)``: why the call may not run in its run's state now (an agentic tool's guidance), else None.
    #: Asked after authorization, so a denied tool is answered as denied, never with guidance.
    gate: Callable[[str], str | None] | None = None


#: Separates the approval binding's key from every other key Django derives from ``SECRET_KEY``.
APPROVAL_HASH_SALT = "toolhub.approval_hash"


def approval_hash(tool_name: str, tool_version: str, arguments: Mapping[str, Any]) -> str:
    """What an approval is bound to: the tool, its version and the canonical arguments, keyed by the server.

    An HMAC (SHA-256, a key derived from ``SECRET_KEY``), not a plain digest: the hash is published to
    operators and auditors, in the audit trail and in webhooks, while the arguments' sensitive values are
    not, and a plain digest of everything else shown plus a short secret (a PIN) gives the secret away to
    a few thousand guesses.
    """
    return _keyed(tool_name, tool_version, arguments, settings.SECRET_KEY)


def approval_hash_matches(bound: str, tool_name: str, tool_version: str, arguments: Mapping[str, Any]) -> bool:
    """Whether ``bound`` binds these arguments, under ``SECRET_KEY`` or a key it replaced (``SECRET_KEY_FALLBACKS``).

    A key rotated while calls wait for approval or a worker keeps their approvals valid, as Django's signing does.
    Compared as bytes: ``hmac.compare_digest`` raises on a ``str`` with a non-ASCII character, and a stored or
    client-given hash holding one must not match, never stop the worker or the decision with a ``TypeError``.
    """
    given = bound.encode("utf-8", "surrogatepass") if isinstance(bound, str) else b""
    keys = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return any(hmac.compare_digest(given, _keyed(tool_name, tool_version, arguments, key).encode()) for key in keys)


def _keyed(tool_name: str, tool_version: str, arguments: Mapping[str, Any], key: str) -> str:
    material = canonical_json({"tool": tool_name, "version": tool_version, "arguments": arguments})
    return salted_hmac(APPROVAL_HASH_SALT, material, secret=key, algorithm="sha256").hexdigest()


@dataclass
class _Decision:
    """What policy made of a request: the audit events of the new row, and what follows once it is written."""

    events: list[EventSpec]
    then: Callable[[ToolCall], None]
    #: ``then`` writes rows that must commit with the call's (an approval request): one transaction for both.
    then_writes: bool = False
    #: Writes the row itself instead, with ``events`` and under the stamp, or returns False (decide again).
    written_by: Callable[[ToolCall, list[EventSpec], int | None, int | None], bool] | None = None


#: Decisions made again when governance changed between a decision and its write, before one unchecked write.
_DECISION_ATTEMPTS = 3


def tool_call_request(*, request: CallRequest) -> ToolCall:
    """Record a call and take it as far as policy allows: refused, waiting for approval, queued, or running here.

    *Decide*, then *record*. Policy decides first and writes nothing: governance lookups come from this
    process's cache under the stamp it last saw. The row and its audit events are then written in one
    statement that also checks that stamp is still current (on PostgreSQL, outside a caller's transaction,
    that statement is the whole transaction). When a governance change committed in between, nothing is
    written and the call is decided again under the new governance, so a revoked grant is seen by the very
    next call. Then the decision's follow-up runs.
    """
    context = _effective_context(request)
    prepared: dict[str, PreparedArguments] = {}

    def prepare(tool: Tool) -> PreparedArguments:
        if tool.name not in prepared:
            prepared[tool.name] = prepared_arguments(tool, request, context)
        return prepared[tool.name]

    attempt = 0
    while True:
        call = _new_call(request, context)
        with governance_scope(checked_by_write=attempt == 0) as stamp:
            decision = _decide(call, request, context, prepare)
        checked = stamp if attempt < _DECISION_ATTEMPTS else None
        if decision.written_by is not None:
            if decision.written_by(call, decision.events, checked, stamp):
                return call
        else:
            with transaction.atomic() if decision.then_writes else one_write():
                if call_insert(call, decision.events, stamp=checked, decided_stamp=stamp):
                    decision.then(call)
                    return call
        attempt += 1


def _new_call(request: CallRequest, context: ToolContext) -> ToolCall:
    """The call's row before policy decides (its status is provisional)."""
    return new_instance(
        ToolCall,
        id=request.call_id or uuid.uuid4(),
        kind=request.kind,
        tool_name=storable_text(request.tool_name[:200], within=200),
        status=CallStatus.QUEUED,
        tenant=request.principal.tenant,
        user_id=request.principal.user_id,
        agent_name=request.principal.agent_name,
        run_id=request.run_id,
        turn=request.turn,
        position=request.position,
        model_call_id=storable_text(request.model_call_id[:100], within=100),
        saga_id=request.saga_id,
        context=_storable_context(context),
    )


def _decide(
    call: ToolCall, request: CallRequest, context: ToolContext, prepare: Callable[[Tool], PreparedArguments]
) -> _Decision:
    """Set the new call's status and fields from policy; write nothing.

    ``prepare(tool)`` gives the arguments as they would run (or why not); it runs the user's hooks and is
    made once per request, however many times governance makes the call be decided again.
    """
    principal = request.principal
    actor = _actor(principal)
    # One instant for the row's creation and the times decided with it (queued, started, finished): a call
    # must never read as started before it was created (auditors compare them; ``insert_params`` keeps it).
    now = call.created_at = timezone.now()
    seen_in = run_context(request)
    try:
        tool = _resolve(request.tool_name, principal, seen_in)
        definition = tool_definitions().get(tool.name)
        # Who may call the tool is decided before its arguments are read: a caller it is denied to learns
        # nothing of its parameters from a validation error, and no interceptor sees the call.
        denial = authorization_denial(tool.name, principal, definition=definition)
        if denial:
            raise CallRefused(CallStatus.DENIED, denial)
        # A facade as this caller sees it: offering only what holds a tool it may use (or nothing at all); in a
        # run, as its model is shown it (a facade of a group not eligible for the run is not shown, nor unfolds).
        seen = tool_seen_by(tool, principal, context=seen_in)
        if seen is None:
            raise CallRefused(CallStatus.DENIED, f"Tool {tool.name!r} holds no tool you may use; do not call it.")
        tool = seen
        arguments = prepare(tool)
        if arguments.refusal is not None:
            raise arguments.refusal
        validated, stored, rewrites = arguments.validated, arguments.stored, arguments.rewrites
        call.tool_version = tool.version
        call.arguments = stored
        guidance = request.gate(tool.name) if request.gate is not None else None
        if guidance:
            raise CallRefused(CallStatus.INVALID, storable_text(guidance)[:2000], actor="agentic", gate=True)
    except CallRefused as refusal:
        call.raw_arguments = _raw_text(request.tool_name, request.arguments)
        call.status, call.error, call.finished_at = refusal.status, refusal.message, now
        call.error_detail = refusal.detail
        refused = EventSpec(f"call.{refusal.status}", refusal.actor, {"reason": refusal.message, **refusal.data})
        return _Decision(
            [EventSpec("call.requested", actor, _request_data(call, None, request.client)), refused], _notify_on_commit
        )
    # ``call.requested`` holds the arguments that run; each interceptor's rewrite follows it as a diff.
    requested, rewritten = EventSpec("call.requested", actor, _request_data(call, tool, request.client)), rewrites

    already_loaded = _one_shot_answer(tool, context)
    if already_loaded is not None:
        # A one-shot tool called again in the same loop answers without running (nor asking approval).
        call.status, call.result, call.finished_at = CallStatus.SUCCEEDED, already_loaded, now
        reason = "one shot per loop: already called in this loop; not run"
        answered = EventSpec("call.succeeded", "policy", {"reason": reason, "loop_id": context.loop_id})
        return _Decision([requested, *rewritten, answered], _notify_on_commit)

    verdict = approval_verdict(tool=tool, definition=definition, arguments=validated, ctx=context, principal=principal)
    if verdict:
        call.status = CallStatus.PENDING_APPROVAL
        call.approval_hash = approval_hash(tool.name, tool.version, call.arguments)
        pending = {"reason": verdict.reason, "source": verdict.source, "rule_id": verdict.rule_id}

        def ask(call: ToolCall) -> None:
            approval_needed.send(sender=ToolCall, call=call, reason=verdict.reason, verdict=verdict)

        return _Decision(
            [requested, *rewritten, EventSpec("call.pending_approval", "policy", pending)], ask, then_writes=True
        )
    # When the call is queued, or (an external tool's) begins to wait for its result: its expiry counts from here.
    call.queued_at = now
    if tool.is_external:
        call.status = CallStatus.AWAITING_RESULT
        external = {"reason": "external tool: its result comes from outside"}
        return _Decision([requested, *rewritten, EventSpec("call.awaiting_result", "policy", external)], _nothing)
    # The stamp the policy let it through under: a worker finding it moved judges the call again (a rule added, a
    # risk raised while it waited in the queue holds it then), and reads nothing while it holds.
    call.approved_under = decision_stamp(tool.name)
    queued = EventSpec("call.queued", "policy", {"reason": "no approval needed"}, status=CallStatus.QUEUED)
    if not runs_in_this_process():
        call.status = CallStatus.QUEUED
        return _Decision([requested, *rewritten, queued], dispatch_call)
    # This process executes the call itself: the row is written already claimed (durably, before the
    # tool runs), so no claim transaction follows and nothing is checked twice within one decision.
    inline = inline_worker.get()
    if inline:
        # The caller (an agentic tool's inner loop, on its worker) runs the claimed call itself once this returns.
        call.status, call.attempts, call.worker, call.started_at = CallStatus.RUNNING, 1, inline, now
        call.lease_expires_at = now + call_lease(tool)
        return _Decision(
            [requested, *rewritten, queued, EventSpec("call.running", f"worker:{inline}", {"attempt": 1})], _nothing
        )
    call.status, call.attempts, call.worker, call.started_at = CallStatus.RUNNING, 1, EAGER_WORKER, now
    call.lease_expires_at = now + call_lease(tool)
    running = EventSpec("call.running", f"worker:{EAGER_WORKER}", {"attempt": 1})
    if tool.atomic and not tool.needs_progress and not transaction.get_connection().in_atomic_block:
        # Nothing an atomic tool does outlives a rollback: its intent, effects and outcome commit together.
        def run_with_intent(call: ToolCall, events: list[EventSpec], stamp: int | None, decided: int | None) -> bool:
            from toolhub.execution import tool_call_run_with_intent

            return tool_call_run_with_intent(
                call=call, intent=events, stamp=stamp, decided_stamp=decided, tool=tool, arguments=validated
            )

        return _Decision([requested, *rewritten, queued, running], _nothing, written_by=run_with_intent)

    def run_here(call: ToolCall) -> None:
        from toolhub.execution import tool_call_run_claimed

        transaction.on_commit(
            lambda: tool_call_run_claimed(call=call, tool=tool, arguments=validated, worker=EAGER_WORKER), robust=True
        )

    return _Decision([requested, *rewritten, queued, running], run_here)


def _notify_on_commit(call: ToolCall) -> None:
    transaction.on_commit(lambda: notify_settled(call), robust=True)


def _nothing(call: ToolCall) -> None:
    return None


def _resolve(name: str, principal: CallPrincipal, context: Mapping[str, Any] | None) -> Tool:
    tool = registry.get(name) if isinstance(name, str) else None
    if tool is None:
        raise CallRefused(CallStatus.INVALID, unknown_tool_message(str(name), visible_tool_names(principal, context)))
    return tool


def run_context(request: CallRequest) -> Mapping[str, Any] | None:
    """The context a run's call is seen in (the tool groups' activation rules read it); ``None`` outside a run."""
    return dict(request.context) if request.run_id is not None else None


def visible_tool_names(principal: CallPrincipal, context: Mapping[str, Any] | None = None) -> list[str]:
    """The tools ``principal`` may call now: its agent's (without an agent, the catalogue's) it may use.

    Authorized, and for a facade, holding a tool it may use (``usable_tools``, the one rule of every listing);
    with a run's ``context``, only tools of groups eligible for the run, as its model is shown them. An unknown
    name is answered with suggestions from these only: naming a tool the run may not use, or one of a group
    bound to another tenant, role or agent, would reveal the rest of the catalogue.
    """
    if principal.agent_tools is None:
        candidates = registry.names()
    else:
        candidates = [name for name in principal.agent_tools if name in registry]
    return sorted(usable_tools(candidates, principal, context=context))


def nameable_tool_names(principal: CallPrincipal) -> list[str]:
    """The tools ``principal`` (a person, no agent) may name on an agent and read on one: as their runs use them.

    Those they may call, and the guides reaching one (facades with their context tools, playbooks' and state
    machines' own tools): a run takes the agent's say for a navigation tool, so a guide of tools granted to them
    needs no grant of its own (``usable_tools`` still leaves out one reaching none of theirs).
    """
    from toolhub.disclosure.meta import META_TOOL_NAMES
    from toolhub.disclosure.visibility import is_navigation

    guides = [name for name in registry.names() if is_navigation(name) and name not in META_TOOL_NAMES]
    through_an_agent = replace(principal, agent_tools=frozenset(registry.names()))
    return sorted({*visible_tool_names(principal), *usable_tools(guides, through_an_agent)})


def _effective_context(request: CallRequest) -> ToolContext:
    """Run-level context, then the interaction's on top; the boundary's reserved keys are never overridden."""
    if not request.interaction_context:
        return request.context
    interaction = {k: v for k, v in request.interaction_context.items() if k not in RESERVED_CONTEXT_KEYS}
    return request.context.merged(interaction)


def _one_shot_answer(tool: Tool, context: ToolContext) -> str | None:
    """For a one-shot tool already called in this loop, what the model is told instead of running it again."""
    loop_id = context.loop_id
    if not tool.one_shot_per_loop or not loop_id:
        return None
    earlier = ToolCall.objects.filter(
        tool_name=tool.name, context__loop_id=str(loop_id), status__in=_ONE_SHOT_TAKEN
    ).exists()
    if not earlier:
        return None
    answer = (
        f"ALREADY LOADED. The body of '{tool.name}' was returned earlier in this turn \u2014 read it from your "
        "conversation history above. Do not call this tool again."
    )
    return f"{answer}\n{tool.advice}" if tool.advice else answer


#: A one-shot tool's earlier call in the loop counts when it ran, runs, or may still run.
_ONE_SHOT_TAKEN = [
    CallStatus.QUEUED,
    CallStatus.RUNNING,
    CallStatus.SUCCEEDED,
    CallStatus.PENDING_APPROVAL,
    CallStatus.AWAITING_RESULT,
]


#: Context values a JSON round trip gives back unchanged (the boundary's own: tenant, user, ids).
_JSON_SCALARS = (str, int, bool, type(None))


def _storable_context(ctx: ToolContext) -> dict[str, Any]:
    """The context as its JSON column stores it; plain values need no round trip through JSON text."""
    values = ctx.as_dict()
    if all(type(key) is str and type(value) in _JSON_SCALARS for key, value in values.items()):
        return dict(sorted(values.items()))
    return json.loads(canonical_json(values))


def _request_data(call: ToolCall, tool: Tool | None, client: Mapping[str, Any] | None = None) -> dict[str, Any]:
    arguments = _redacted(call.tool_name, call.arguments) if tool else {}
    data: dict[str, Any] = {
        "arguments": arguments,
        "tool_version": call.tool_version,
        "agent": call.agent_name,
        "user_id": call.user_id,
        "kind": call.kind,
        "context": call.context,
    }
    if call.saga_id:
        data["saga_id"] = call.saga_id
    if client:
        # What a client says of itself (an MCP client's name and version) is its own text: a NUL or a lone
        # surrogate in it must not stop the event, and with it the call, from being recorded.
        data["client"] = storable_value(dict(client))
    return data


def _redacted(tool_name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    tool = registry.get(tool_name)
    return redact(arguments, tool.withheld(arguments) if tool else frozenset())


def _raw_text(tool_name: str, raw: str | Mapping[str, Any] | None) -> str:
    """Keep what the model sent for a refused call, bounded, for auditors; sensitive values withheld."""
    tool = registry.get(tool_name) if isinstance(tool_name, str) else None
    text = redacted_arguments_text(tool, raw)
    return storable_text(text[:2000])


def _actor(principal: CallPrincipal) -> str:
    parts = [f"user:{principal.username}" if principal.username else "anonymous"]
    if principal.agent_name:
        parts.append(f"agent:{principal.agent_name}")
    return " via ".join(parts)
