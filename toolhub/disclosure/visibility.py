"""Which tools a run's model sees on its next turn, decided after permissions, from the run's stored state.

The pieces, in order: the agent's tools (a facade's inner tools are hidden until it is called; an
exclusive facade hides every other tool until the run ends), its active groups (a tool in a group
that is put away is hidden), tool search (when on, only resident ``always_visible`` tools, the
``tool_search`` tool and the latest search's hits are shown), the agent's tool provider hook, and
last ``usable_tools`` with the run's context: nothing the principal may not call, and nothing of a group
not eligible for the run, is ever shown or stored, whatever the state says.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolhub.agentic.runstate import agentic_description, agentic_state_after, agentic_visibility
from toolhub.authorization import CallPrincipal, authorize_tools
from toolhub.disclosure.groups import group_eligibility, group_facts, initially_active
from toolhub.disclosure.meta import META_TOOL_NAMES, RESET_EQUIPPED_TOOLS, TOOL_SEARCH
from toolhub.disclosure.state import DisclosureState, done_names
from toolhub.disclosure.unfolding import CONTEXT_SUFFIX, UnfoldingTool, facade_of, tool_seen_by, usable_tools
from toolhub.governance import governance_scope
from toolhub.models import CallStatus
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

__all__ = [
    "DisclosureRequest",
    "Disclosure",
    "disclose",
    "expand_agent_tools",
    "is_navigation",
    "state_after_calls",
    "seen_state",
    "shown_state",
    "equippable_groups",
    "SettledCall",
]


def is_navigation(name: str) -> bool:
    """Meta tools, facades and their context tools, playbooks' and state machines' guides: they only reveal."""
    from toolhub.agentic.runstate import is_agentic_navigation

    return name in META_TOOL_NAMES or facade_of(registry.get(name))[0] is not None or is_agentic_navigation(name)


def _facade(name: str) -> UnfoldingTool | None:
    owner, role = facade_of(registry.get(name))
    return owner if role == "facade" else None


def expand_agent_tools(
    names: Sequence[str], *, tool_search: bool = False, group_switching: bool = False
) -> frozenset[str]:
    """The tools an agent has: its own, its facades' inner and context tools (nested), and its meta tools.

    Its agentic tools' members and inner tools and the chained methods it discovers (``toolhub.agentic``) too.
    """
    from toolhub.agentic.runstate import expand_agentic

    expanded = set(names)
    for name in names:
        facade = _facade(name)
        if facade is not None:
            expanded.add(facade.context_tool.name)
            expanded |= facade.descendant_names()
    expanded |= expand_agentic(expanded)
    if tool_search:
        expanded.add(TOOL_SEARCH)
    if group_switching:
        expanded.add(RESET_EQUIPPED_TOOLS)
    return frozenset(expanded)


@dataclass(frozen=True)
class DisclosureRequest:
    """Everything that decides a run's visible tools; built by the agent loop from the run."""

    agent_tools: Sequence[str]
    principal: CallPrincipal
    state: DisclosureState
    context: Mapping[str, Any] = field(default_factory=dict)
    tool_search: bool = False
    group_switching: bool = False
    #: Names from the agent's tool provider hook (still filtered by grants).
    provided: Sequence[str] = ()
    #: The governance stamp the caller read in its current transaction (``governance_scope(stamp=)``), if any.
    governance_stamp: int | None = None


@dataclass(frozen=True)
class Disclosure:
    """The tools to send (in order), the active groups' prompt additions, and the state to store."""

    tools: list[Tool]
    prompt_additions: list[str]
    active_groups: list[str]
    state: DisclosureState


def disclose(request: DisclosureRequest) -> Disclosure:
    """The run's visible tools for its next turn."""
    with governance_scope(stamp=request.governance_stamp):
        return _disclose(request)


def _disclose(request: DisclosureRequest) -> Disclosure:
    state = seen_state(request.state, request.principal, request.context)
    own = [name for name in dict.fromkeys(request.agent_tools) if name in registry]
    hidden: set[str] = set()
    for name in own:
        facade = _facade(name)
        if facade is not None:
            hidden |= facade.descendant_names()
    # Playbooks' and state machines' members and chained methods: only those their run state shows now.
    agentic_hidden, agentic_shown = agentic_visibility(own, state)
    hidden |= agentic_hidden
    if request.tool_search:
        agentic_shown = []  # found by search like any tool (their calls are still gated by the run's state)
    base = [name for name in own if name not in hidden]
    unfolded: list[str] = []
    for facade_name, children in state.unfolded.items():
        unfolded.extend([*children, f"{facade_name}{CONTEXT_SUFFIX}"])
    unfolded.extend(agentic_shown)

    if state.exclusive:
        children = state.unfolded.get(state.exclusive, ())
        candidates = [state.exclusive, *children, f"{state.exclusive}{CONTEXT_SUFFIX}"]
        # Facades nested in the exclusive one unfold within it.
        for facade_name in state.unfolded:
            if facade_name != state.exclusive and facade_name in candidates:
                candidates.extend([*state.unfolded[facade_name], f"{facade_name}{CONTEXT_SUFFIX}"])
    else:
        resident = [name for name in base if _tool(name).always_visible]
        if request.tool_search:
            candidates = [*resident, TOOL_SEARCH, *state.hits, *unfolded, *request.provided]
        else:
            candidates = [*base, *unfolded, *request.provided]
        if request.group_switching:
            candidates.append(RESET_EQUIPPED_TOOLS)
    candidates = [name for name in dict.fromkeys(candidates) if name in registry]

    memberships, eligible = group_eligibility(candidates, principal=request.principal, context=request.context)
    if state.active_groups is not None:
        active = {name for name in state.active_groups if name in eligible}
    else:
        active = initially_active(eligible)
    shown_groups: set[str] = set()
    found = set(state.hits)
    kept = [name for name in candidates if not _put_away(name, memberships.get(name, set()), active, found)]
    visible = usable_tools(kept, request.principal, context=request.context)
    for name in visible:
        shown_groups |= memberships.get(name, set()) & active
    # Guides describe the run's state naming only what the principal may use now (a done tool revoked since is not).
    described = _described(state, request.principal, request.context)
    tools = [_shown(name, described, request.principal, request.context) for name in visible]
    facts = group_facts()
    additions = [facts[g].system_prompt_addition for g in sorted(shown_groups) if g in facts]
    return Disclosure(
        tools=tools,
        prompt_additions=[text for text in additions if text.strip()],
        active_groups=sorted(active),
        state=state.with_visible(visible),
    )


def _put_away(name: str, groups: set[str], active: set[str], found: set[str]) -> bool:
    """Whether the model put ``name``'s groups away (which groups are eligible is ``usable_tools``'s to check).

    A tool the search found is shown all the same (the search equips it); navigation and always-visible tools
    are resident. A tool in no group never is put away.
    """
    if not groups or groups & active or name in found:
        return False
    return not is_navigation(name) and not _tool(name).always_visible


def seen_state(state: DisclosureState, principal: CallPrincipal, context: Mapping[str, Any]) -> DisclosureState:
    """``state`` naming only the tools ``principal`` may see in the run now (``usable_tools``).

    What is stored on the run then names what the model may be shown: never an inner tool that was denied (or
    whose group is not eligible) when its facade unfolded, nor one revoked since. Exclusive mode stays, so the
    model stays confined; people read the state through ``shown_state``.
    """
    return state.keeping(usable_tools(_unfolds_and_hits(state), principal, context=context))


def _unfolds_and_hits(state: DisclosureState) -> list[str]:
    named = [*state.unfolded, *(name for children in state.unfolded.values() for name in children), *state.hits]
    return list(dict.fromkeys(named))


def shown_state(state: DisclosureState, principal: CallPrincipal | None, context: Mapping[str, Any]) -> DisclosureState:
    """``state`` as people read it (the run's API and admin page): naming only what ``principal`` may use now.

    ``seen_state``'s rule (``usable_tools`` with the run's context) over every field that names a tool or group:
    besides unfolds and hits, the exclusive facade, the tools last shown, agentic entries (and a playbook's done
    tools), chained objects of a type with no usable method left, and the active groups the principal may no longer
    equip. The model's state is cut only when it takes a turn; an ended or waiting run takes none, and a revoked
    grant or a changed group must not read as its current state. The audit trail keeps what the run did.
    ``principal`` ``None``: the run's user was deleted, and no one is left to use anything (a principal without
    a user is trusted code's, and the grants the user held went with them).
    """
    from toolhub.agentic.chaining import registered_types

    if principal is None:
        return state.naming_only((), groups=(), agentic=(), chained=())

    types = registered_types()
    methods = {name: types[name].method_names() if name in types else set() for name in state.chained}
    named = [
        *_unfolds_and_hits(state),
        state.exclusive,
        *state.visible,
        *(key.partition(".")[0] for key in state.agentic),
        *done_names(state.agentic),
        *(name for names in methods.values() for name in names),
    ]
    usable = set(usable_tools([name for name in dict.fromkeys(named) if name], principal, context=context))
    groups = _equippable(principal, context) if state.active_groups else set()
    return state.naming_only(
        usable,
        groups=groups,
        agentic=[key for key in state.agentic if key.partition(".")[0] in usable],
        chained=[name for name, names in methods.items() if names & usable],
    )


def _described(state: DisclosureState, principal: CallPrincipal, context: Mapping[str, Any]) -> DisclosureState:
    """``state`` as the guides' descriptions read it: a playbook's done tools only among those usable now."""
    done = done_names(state.agentic)
    if not done:
        return state
    return state.done_among(usable_tools(done, principal, context=context))


def _tool(name: str) -> Tool:
    tool = registry.get(name)
    assert tool is not None
    return tool


def _shown(name: str, state: DisclosureState, principal: CallPrincipal, context: Mapping[str, Any]) -> Tool:
    """The tool as the model sees it: an unfolded facade becomes the guide to its inner tools.

    A by-category facade offers only the categories holding a tool the principal may see (``tool_seen_by``).
    """
    tool = tool_seen_by(_tool(name), principal, context=context) or _tool(name)
    agentic = agentic_description(name, state)
    if agentic is not None:
        return tool.with_description(agentic)
    if name in state.unfolded:
        return tool.with_description(
            f"Guide to the tools of {name}, already unfolded: call them directly. Calling this lists them again."
        )
    return tool


@dataclass(frozen=True)
class SettledCall:
    """A settled call of the last turn, as the loop read it."""

    tool_name: str
    status: str
    arguments: Mapping[str, Any]
    result: Any
    call_id: str = ""


def state_after_calls(
    state: DisclosureState,
    calls: Sequence[SettledCall],
    *,
    principal: CallPrincipal,
    context: Mapping[str, Any],
    agent_tools: Sequence[str] = (),
) -> DisclosureState:
    """Apply the last turn's successful calls, in order: unfolds, searches, group switches.

    And the agent's agentic tools' steps: a playbook step done, a state machine's transition, a chained object bound.
    An unfold stores what its answer listed: the facade's selection that ``principal`` may see (``seen_state``).
    """
    for call in calls:
        if call.status != CallStatus.SUCCEEDED:
            continue
        state = agentic_state_after(
            state, tool_name=call.tool_name, call_id=call.call_id, result=call.result, agent_tools=agent_tools
        )
        result = call.result if isinstance(call.result, Mapping) else {}
        if call.tool_name == TOOL_SEARCH:
            state = state.with_hits([n for n in result.get("tools", []) if isinstance(n, str)])
        elif call.tool_name == RESET_EQUIPPED_TOOLS:
            state = state.with_groups([n for n in result.get("active_groups", []) if isinstance(n, str)])
        else:
            facade = _facade(call.tool_name)
            if facade is not None:
                state = state.with_unfolded(facade.name, facade.select(call.arguments), exclusive=facade.exclusive)
    return seen_state(state, principal, context)


def equippable_groups(ctx: ToolContext) -> set[str]:
    """The groups a call's principal may equip: eligible for it, holding a tool of its agent it is granted."""
    from toolhub.disclosure.principals import principal_of_context

    return _equippable(principal_of_context(ctx), dict(ctx))


def _equippable(principal: CallPrincipal, context: Mapping[str, Any]) -> set[str]:
    names = sorted(principal.agent_tools) if principal.agent_tools is not None else registry.names()
    names = [name for name in names if name in registry and not is_navigation(name)]
    verdicts = authorize_tools(names, principal)
    granted = {name for name in names if verdicts.get(name) is None}
    _, eligible = group_eligibility(granted, principal=principal, context=context)
    return set(eligible)
