"""The agent side of progressive disclosure: a run's visible tools and prompt additions, from its stored state.

``toolhub.disclosure`` decides (after permissions); this module feeds it the run (agent settings,
principal, context, the agent's tool provider hook) and keeps the state on the run row, so a run
resumed on another worker sees the same tools.
"""

import logging
from collections.abc import Callable, Sequence
from typing import Any

from django.utils.module_loading import import_string

from agents_app.models import Agent, AgentRun
from toolhub.agentic.runstate import agentic_gate
from toolhub.disclosure.state import DisclosureState
from toolhub.disclosure.visibility import (
    Disclosure,
    DisclosureRequest,
    SettledCall,
    disclose,
    expand_agent_tools,
    shown_state,
    state_after_calls,
)
from toolhub.governance import governance_scope
from toolhub.models import ToolCall

__all__ = [
    "agent_tool_names",
    "run_disclosure",
    "run_state_after_calls",
    "run_gate",
    "run_shown_disclosure",
    "messages_with_additions",
    "provided_tools",
]

logger = logging.getLogger(__name__)

#: Most names an agent's tool provider hook may add to one turn.
MAX_PROVIDED = 100


def agent_tool_names(agent: Agent) -> frozenset[str]:
    """Every tool the agent has: its list, its facades' inner tools, and its meta tools."""
    return expand_agent_tools(agent.tools, tool_search=agent.tool_search, group_switching=agent.group_switching)


def provided_tools(run: AgentRun) -> list[str]:
    """The agent's tool provider hook's names for this turn (LangChain4j ToolProvider); grants filter them later.

    A hook that fails or answers something else than names adds nothing (logged): it can only ever
    show tools, never hide or grant them. The hook must still be among ``TOOLHUB["TOOL_PROVIDERS"]`` now,
    not only when the agent was saved: one an administrator withdrew (or a path the row got another way)
    is never imported or called.
    """
    from agents_app.services import tool_provider_problem

    path = run.agent.tool_provider
    if not path:
        return []
    problem = tool_provider_problem(path)
    if problem:
        logger.warning("agent %s: tool provider not called: %s", run.agent.name, problem)
        return []
    latest = next((m.get("content") or "" for m in reversed(run.messages) if m.get("role") == "user"), run.input)
    try:
        names = import_string(path)(run, latest)
    except Exception:  # noqa: BLE001 - an operator's hook must not stop the run
        logger.exception("tool provider %s failed for run %s", path, run.id)
        return []
    if isinstance(names, str) or not isinstance(names, Sequence | set | frozenset):
        logger.warning("tool provider %s returned %r, not a list of tool names", path, type(names).__name__)
        return []
    return [name for name in names if isinstance(name, str)][:MAX_PROVIDED]


def run_disclosure(run: AgentRun, *, governance_stamp: int | None = None) -> Disclosure:
    """What the run's model is shown on its next turn, with the state to store.

    ``governance_stamp``: the stamp the caller read with the run, in its current transaction (else read here).
    """
    from agents_app.loop import run_principal, run_tool_context

    return disclose(
        DisclosureRequest(
            agent_tools=list(run.agent.tools),
            principal=run_principal(run),
            state=DisclosureState.from_json(run.disclosure),
            context=dict(run_tool_context(run)),
            tool_search=run.agent.tool_search,
            group_switching=run.agent.group_switching,
            provided=provided_tools(run),
            governance_stamp=governance_stamp,
        )
    )


def run_state_after_calls(run: AgentRun, calls: list[ToolCall], *, governance_stamp: int | None = None) -> None:
    """Apply the last turn's settled navigation calls (facades, searches, group switches) to the run's state.

    Stored naming only what the run's principal may see (``state_after_calls``), as its API and admin show it.
    ``governance_stamp``: as for ``run_disclosure`` (the lookups then read no stamp of their own).
    """
    from agents_app.loop import run_principal, run_tool_context

    settled = [SettledCall(c.tool_name, c.status, c.arguments or {}, c.result, str(c.id)) for c in calls]
    with governance_scope(stamp=governance_stamp):
        state = state_after_calls(
            DisclosureState.from_json(run.disclosure),
            settled,
            principal=run_principal(run),
            context=dict(run_tool_context(run)),
            agent_tools=list(run.agent.tools),
        )
    run.disclosure = state.to_json()


def run_shown_disclosure(run: AgentRun) -> dict[str, Any]:
    """The run's stored state as its API and admin page show it: naming only what its principal may use now.

    ``shown_state``: a grant revoked or a group changed since the run's last turn leaves what is shown at once,
    ended runs' too (the stored row and the audit trail keep what the run saw); a run whose user was deleted
    (no user left on it) shows nothing as usable, as one whose user was deactivated.
    """
    from agents_app.loop import run_principal, run_tool_context

    state = DisclosureState.from_json(run.disclosure)
    principal = run_principal(run) if run.user_id is not None else None
    return shown_state(state, principal, dict(run_tool_context(run))).to_json()


def run_gate(run: AgentRun) -> Callable[..., str | None]:
    """Why a call of this run's model may not run in its agentic tools' state now (guidance), else None.

    ``gate(tool_name, position=...)``: the call's position in the turn's answer (``agentic_gate``).
    """
    from agents_app.loop import run_principal, run_tool_context

    return agentic_gate(
        agent_tools=list(run.agent.tools),
        state=DisclosureState.from_json(run.disclosure),
        principal=run_principal(run),
        run_id=run.id,
        turn=run.turn,
        context=dict(run_tool_context(run)),
    )


def messages_with_additions(messages: list[dict[str, Any]], additions: list[str]) -> list[dict[str, Any]]:
    """The conversation as sent: the active groups' prompt additions in the leading system message (not stored)."""
    if not additions:
        return messages
    text = "\n\n".join(additions)
    if messages and messages[0].get("role") == "system":
        first = {**messages[0], "content": f"{messages[0].get('content') or ''}\n\n{text}".strip()}
        return [first, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]
