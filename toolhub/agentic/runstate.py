"""Agentic tools in a run: what they add to an agent, show, refuse and remember, through the disclosure state.

``toolhub.disclosure.visibility`` calls these to decide a turn's tools and to apply a turn's settled
calls; the agent loop asks ``gate`` before it sends a call through the pipeline. Nothing here widens
what a principal may call: every name shown or named in a message is one the run may be shown
(``unfolding.usable_tools`` with the run's context: granted, and of a group eligible for the run).
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from toolhub.agentic.base import AgenticFacts, GatedTools, owner_of
from toolhub.agentic.chaining import ChainedType, method_owner, produced_type, registered_types
from toolhub.authorization import CallPrincipal
from toolhub.disclosure.state import DisclosureState
from toolhub.tools.context import ToolContext
from toolhub.tools.registry import registry

__all__ = [
    "gated_owners",
    "expand_agentic",
    "agentic_visibility",
    "agentic_gate",
    "agentic_state_after",
    "agentic_description",
    "granted_for",
    "held_inside",
    "is_agentic_navigation",
]


def gated_owners(names: Iterable[str]) -> list[GatedTools]:
    """The playbooks and state machines among an agent's tools."""
    owners = []
    for name in names:
        owner = owner_of(registry.get(name))
        if isinstance(owner, GatedTools) and owner.name == name:
            owners.append(owner)
    return owners


def held_inside(names: Iterable[str]) -> dict[str, str]:
    """Members of playbooks and state machines that the agent's agentic tools hold: member -> holder.

    Their steps are the holder's inner model's to take, gated by the state its inner calls left
    (``inner.InnerState``); the run's own model reaches them only through the holder.
    """
    from toolhub.agentic.simple import SimpleAgenticTool

    held: dict[str, str] = {}
    for name in names:
        owner = owner_of(registry.get(name))
        if isinstance(owner, SimpleAgenticTool) and owner.name == name:
            for gated in owner.gated:
                for member in sorted(gated.member_names()):
                    held.setdefault(member, owner.name)
    return held


def is_agentic_navigation(name: str) -> bool:
    """A playbook's or state machine's own tool only guides (its members are governed calls of their own)."""
    owner = owner_of(registry.get(name))
    return isinstance(owner, GatedTools) and owner.name == name


def _discovered(names: set[str]) -> list[ChainedType]:
    """Chained types whose methods an agent gets: returned by one of its tools (auto-discovery), to a fixpoint."""
    found: list[ChainedType] = []
    pending = list(names)
    seen = set(names)
    while pending:
        chained = produced_type(registry.get(pending.pop()))
        if chained is not None and chained.discover and chained not in found:
            found.append(chained)
            for method in chained.method_names() - seen:
                seen.add(method)
                pending.append(method)  # a method may return another chained type
    return found


def expand_agentic(names: Iterable[str]) -> set[str]:
    """The tools agentic tools add to an agent: members, inner tools, discovered chained methods."""
    from toolhub.agentic.simple import SimpleAgenticTool

    added: set[str] = set()
    own = set(names)
    for name in own:
        owner = owner_of(registry.get(name))
        if isinstance(owner, GatedTools | SimpleAgenticTool) and owner.name == name:
            added |= owner.member_names()
    for chained in _discovered(own | added):
        added |= chained.method_names()
    return added


def agentic_visibility(own: Sequence[str], state: DisclosureState) -> tuple[set[str], list[str]]:
    """``(hidden, shown)``: the agentic members hidden from the agent's plain list, and those shown now."""
    hidden: set[str] = set()
    shown: list[str] = []
    facts = AgenticFacts()
    for owner in gated_owners(own):
        hidden |= owner.member_names()
        shown.extend(owner.shown(state.agentic.get(owner.name, {}), facts))
    everything = set(own) | expand_agentic(own)
    for chained in registered_types().values():
        methods = sorted(chained.method_names() & everything, key=lambda n: [t.name for t in chained.methods].index(n))
        hidden |= set(methods)
        if chained.name in state.chained:
            shown.extend(methods)
    return hidden, list(dict.fromkeys(shown))


def agentic_description(name: str, state: DisclosureState) -> str | None:
    """A playbook's or state machine's description as the model sees it now: with its run state."""
    owner = owner_of(registry.get(name))
    if not (isinstance(owner, GatedTools) and owner.name == name):
        return None
    return f"{owner.description}\n{owner.status(state.agentic.get(name, {}), AgenticFacts())}"


def _granted(principal: CallPrincipal, context: Mapping[str, Any]) -> Callable[[Iterable[str]], list[str]]:
    """``granted(names)``: those the run may be shown (a denied tool and one of an ineligible group alike)."""
    from toolhub.disclosure.unfolding import usable_tools

    def granted(names: Iterable[str]) -> list[str]:
        return usable_tools(list(dict.fromkeys(names)), principal, context=context)

    return granted


def granted_for(ctx: ToolContext, names: Iterable[str]) -> list[str]:
    """``names`` the principal of a call may use and be shown in its run (``unfolding.usable_in_call``)."""
    from toolhub.disclosure.unfolding import usable_in_call

    return usable_in_call(names, ctx)


def agentic_gate(
    *,
    agent_tools: Sequence[str],
    state: DisclosureState,
    principal: CallPrincipal,
    run_id: Any,
    turn: int,
    context: Mapping[str, Any],
) -> Callable[..., str | None]:
    """``gate(tool_name, position)``: why a call may not run in this run's agentic state now (guidance), else ``None``.

    ``position``: the call's place in its model turn's answer. The turn's calls are checked against the state
    the turn started in; the calls before it (those recorded with a lower position and not refused when
    requested) can hold a state machine in it for the rest of the turn (``GatedTools.held_refusal``).
    """
    owners = gated_owners(agent_tools)
    granted = _granted(principal, context)
    # A member of a playbook or state machine held by an agentic tool, and not the agent's own in any other way
    # (listed, or gated by a playbook or state machine of its own), would skip its steps if the run's model
    # called it directly.
    reachable = set(agent_tools).union(*(owner.member_names() for owner in owners))
    held = {name: holder for name, holder in held_inside(agent_tools).items() if name not in reachable}
    cache: dict[str, frozenset[str]] = {}

    def artifacts() -> frozenset[str]:
        if "names" not in cache:
            from toolhub.models import CallStatus, ToolCallArtifact

            rows = ToolCallArtifact.objects.filter(
                call__run_id=run_id, call__tenant=principal.tenant, call__status=CallStatus.SUCCEEDED
            ).values_list("name", flat=True)
            cache["names"] = frozenset(rows[:1000]) if run_id else frozenset()
        return cache["names"]

    def earlier(position: int | None) -> list[str]:
        """The turn's calls before ``position`` that were let through, in the model's order."""
        if position is None or not run_id:
            return []
        from toolhub.models import CallKind, CallStatus, ToolCall

        rows = (
            ToolCall.objects.filter(
                run_id=run_id, tenant=principal.tenant, turn=turn, kind=CallKind.CALL, position__lt=position
            )
            .exclude(status__in=(CallStatus.INVALID, CallStatus.DENIED))
            .order_by("position")
            .values_list("tool_name", flat=True)
        )
        return list(rows[:1000])

    def gate(tool_name: str, position: int | None = None) -> str | None:
        holder = held.get(tool_name)
        if holder is not None:
            usable = granted([holder])
            via = f"; call {usable[0]!r} instead" if usable else ""
            return f"Tool {tool_name!r} runs only as a step inside another tool; it was not run{via}."
        for owner in owners:
            if tool_name not in owner.member_names():
                continue
            entry = state.agentic.get(owner.name, {})
            refusal = owner.held_refusal(tool_name, entry, earlier(position)) if owner.held_by_turn else None
            if refusal:
                return refusal
            done = frozenset(name for name in entry.get("done", []) if isinstance(name, str))
            facts = AgenticFacts(done=done, artifacts=artifacts(), turn=turn, context=context)
            refusal = owner.refusal(tool_name, entry, facts, granted)
            if refusal:
                return refusal
        chained = method_owner(registry.get(tool_name))
        if chained is not None and chained.name not in state.chained:
            producers = [t.name for t in registry.all() if produced_type(t) is chained]
            named = ", ".join(granted(producers)) or "none you may use"
            return (
                f"Tool {tool_name!r} works on a {chained.name} you retrieved, and none is retrieved yet in this run; "
                f"it was not run. Tools that retrieve one: {named}."
            )
        return None

    return gate


def agentic_state_after(
    state: DisclosureState, *, tool_name: str, call_id: str, result: Any, agent_tools: Sequence[str]
) -> DisclosureState:
    """Apply one successful call: a playbook step done, a state machine's transition, a chained object bound."""
    for owner in gated_owners(agent_tools):
        if tool_name in owner.member_names():
            state = state.with_agentic(owner.name, owner.after_call(tool_name, state.agentic.get(owner.name, {})))
    owner = owner_of(registry.get(tool_name))
    if getattr(owner, "gated", None) and owner.name == tool_name and isinstance(result, Mapping):
        # A SimpleAgenticTool's inner playbooks and state machines, as its call left them (for people to see).
        inner = result.get("state")
        for name, entry in (inner if isinstance(inner, Mapping) else {}).items():
            if isinstance(entry, Mapping):
                state = state.with_agentic(f"{tool_name}.{name}", entry)
    chained = produced_type(registry.get(tool_name))
    if chained is not None and chained.accepts(result):
        state = state.with_chained(chained.name, {"type": chained.name, "call_id": call_id, "data": result})
    return state
