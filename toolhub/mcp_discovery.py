"""What MCP lists, and the stable pair that finds and describes the rest: find tools, describe one.

The navigation tools (``tool_search``, ``reset_equipped_tools``, unfolding facades and their
``<name>_context`` tools) change what one run's model sees on its next turn, through the run's stored
state. An MCP client has no run, and its ``tools/list`` must vary only with its authorization (MCP
2026-07-28), so MCP neither lists nor calls them. Their inner tools are listed like any granted tool,
and the stable pair stands in for them: ``toolhub_find_tools`` searches the per-principal index
``tool_search`` uses (a facade shows as a group naming its granted tools) and ``toolhub_describe_tool``
gives one tool's definition. A tool found this way is called by name with the ordinary ``tools/call``,
authorized when it executes like any call.

The pair is answered by the server, read-only, like ``tools/list`` and ``toolhub_call_status``: it
runs no tool and reveals nothing ``tools/list`` in mode "all" would not, so it makes no ``ToolCall``.

``TOOLHUB["MCP_TOOL_LISTING"]``: ``"all"`` lists every granted tool; ``"search"`` only the always-visible
ones, the rest being found on demand (a long catalogue stays out of the client's context).
"""

import json
from collections.abc import Iterable, Mapping
from typing import Any

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolhub.authorization import CallPrincipal, authorize_tools
from toolhub.conf import toolhub_settings
from toolhub.disclosure.meta import MAX_CATEGORY_LENGTH, MAX_QUERY_LENGTH, MAX_SEARCH_RESULTS, SearchCategory
from toolhub.disclosure.search import principal_index
from toolhub.disclosure.unfolding import UnfoldingTool, facade_of
from toolhub.disclosure.visibility import is_navigation
from toolhub.feedback import invalid_arguments_message, unknown_tool_message
from toolhub.tools.definition import Tool
from toolhub.tools.export import buildable, listable_names, tool_definition
from toolhub.tools.registry import registry

__all__ = [
    "DESCRIBE_TOOL",
    "DESCRIBE_TOOL_DEFINITION",
    "FIND_TOOL",
    "FIND_TOOL_DEFINITION",
    "callable_names",
    "describe_tool",
    "find_tools",
    "listed_tools",
]

FIND_TOOL = "toolhub_find_tools"
DESCRIBE_TOOL = "toolhub_describe_tool"
_MAX_NAME_LENGTH = 200
_MAX_DESCRIPTION_LENGTH = 500


class _FindArguments(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    query: str = Field(min_length=1, max_length=MAX_QUERY_LENGTH)
    max_results: int = Field(default=5, ge=1, le=MAX_SEARCH_RESULTS)
    category: SearchCategory = None


class _DescribeArguments(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=_MAX_NAME_LENGTH)


FIND_TOOL_DEFINITION: dict[str, Any] = {
    "name": FIND_TOOL,
    "description": (
        "Find toolhub tools you may use for a task: their names, descriptions and categories (tools of one "
        f"facade also name their group). Call a tool found by its name; {DESCRIBE_TOOL} gives its input schema."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY_LENGTH,
                "description": "What you need to do, in a few words.",
            },
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_SEARCH_RESULTS,
                "default": 5,
                "description": f"How many tools to return, 1 to {MAX_SEARCH_RESULTS}.",
            },
            "category": {
                "type": ["string", "null"],
                "maxLength": MAX_CATEGORY_LENGTH,
                "description": "Only tools of this category.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    "annotations": {"readOnlyHint": True, "idempotentHint": True},
}

DESCRIBE_TOOL_DEFINITION: dict[str, Any] = {
    "name": DESCRIBE_TOOL,
    "description": (
        "Describe one toolhub tool you may use: its description, input schema and output schema (or, for a "
        "group of tools, its description, usage notes and tools)."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": _MAX_NAME_LENGTH,
                "description": f"The tool's name, as {FIND_TOOL} gave it.",
            }
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    "annotations": {"readOnlyHint": True, "idempotentHint": True},
}


# --- what is listed and callable -------------------------------------------------------------------------


def _granted(principal: CallPrincipal, names: Iterable[str]) -> set[str]:
    names = list(names)
    verdicts = authorize_tools(names, principal)
    return {name for name in names if verdicts.get(name) is None}


def callable_names(principal: CallPrincipal) -> list[str]:
    """The tools ``principal`` may call over MCP: granted, navigation tools left out (they need a run)."""
    candidates = [name for name in registry.names() if not is_navigation(name)]
    return sorted(_granted(principal, candidates))


def listed_tools(principal: CallPrincipal) -> list[Tool]:
    """The registry tools ``tools/list`` shows ``principal`` under ``MCP_TOOL_LISTING`` (in registry order)."""
    granted = set(callable_names(principal))
    search_only = toolhub_settings().MCP_TOOL_LISTING == "search"
    return [tool for tool in registry.all() if tool.name in granted and (tool.always_visible or not search_only)]


# --- facades as groups -----------------------------------------------------------------------------------


def _facades() -> dict[str, UnfoldingTool]:
    """Every registered facade by name."""
    found: dict[str, UnfoldingTool] = {}
    for tool in registry.all():
        owner, role = facade_of(tool)
        if owner is not None and role == "facade":
            found[owner.name] = owner
    return found


def _group(facade: UnfoldingTool, granted: set[str]) -> dict[str, Any] | None:
    """A facade as a group of the tools it holds that the caller may call; ``None`` when it shows nothing.

    The facade itself must be granted too, as it must for a run's model to see it.
    """
    # Never one whose schema cannot be built: ``tools/list`` and ``toolhub_describe_tool`` leave it out.
    tools = listable_names(
        sorted(name for name in facade.descendant_names() if name in granted and not is_navigation(name))
    )
    if not tools or facade.name not in granted:
        return None
    return {
        "name": facade.name,
        "description": facade.description[:_MAX_DESCRIPTION_LENGTH],
        "usage_notes": facade.child_usage_notes[:_MAX_DESCRIPTION_LENGTH],
        "tools": tools,
    }


def _groups_by_tool(granted: set[str]) -> tuple[dict[str, list[str]], dict[str, dict[str, Any]]]:
    """For each tool, the shown groups that hold it directly; and those groups by name."""
    groups: dict[str, dict[str, Any]] = {}
    holders: dict[str, list[str]] = {}
    for name, facade in sorted(_facades().items()):
        group = _group(facade, granted)
        if group is None:
            continue
        groups[name] = group
        for child in facade.child_names():
            holders.setdefault(child, []).append(name)
    return holders, groups


# --- the pair --------------------------------------------------------------------------------------------


def _answer(structured: dict[str, Any]) -> types.CallToolResult:
    text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"), default=str)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured)


def _refusal(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _parsed(model: type[BaseModel], tool_name: str, arguments: Mapping[str, Any] | None) -> BaseModel | str:
    try:
        return model.model_validate(dict(arguments or {}))
    except ValidationError as exc:
        return invalid_arguments_message(tool_name, exc)


def find_tools(principal: CallPrincipal, arguments: Mapping[str, Any] | None) -> types.CallToolResult:
    """``toolhub_find_tools``: the best granted tools for a query, from the principal's ``tool_search`` index."""
    parsed = _parsed(_FindArguments, FIND_TOOL, arguments)
    if isinstance(parsed, str):
        return _refusal(parsed)
    assert isinstance(parsed, _FindArguments)
    query = " ".join(parsed.query.split())
    if not query:
        return _refusal(
            f"{FIND_TOOL} needs a query: describe the capability you need in a few words, e.g. 'refund an order'."
        )
    names = principal_index(principal).search(query, k=parsed.max_results, category=parsed.category or None)
    granted = set(callable_names(principal))
    # The index answers only the tools it was built over (``principal_index``), each one ``tools/list`` shows.
    hits = list(dict.fromkeys(names))[: parsed.max_results]
    holders, groups = _groups_by_tool(granted | _granted(principal, _facades()))
    tools = []
    for name in hits:
        tool = registry.get(name)
        assert tool is not None
        tools.append(
            {
                "name": name,
                "description": tool.description[:_MAX_DESCRIPTION_LENGTH],
                "category": tool.category,
                "groups": holders.get(name, []),
            }
        )
    shown = sorted({group for entry in tools for group in entry["groups"]})
    note = (
        f"Call a tool by its name; {DESCRIBE_TOOL} gives its input schema."
        if tools
        else "No tool matched. Rephrase the query with other words for the capability."
    )
    return _answer({"tools": tools, "groups": [groups[name] for name in shown], "note": note})


def describe_tool(principal: CallPrincipal, arguments: Mapping[str, Any] | None) -> types.CallToolResult:
    """``toolhub_describe_tool``: a granted tool's MCP definition, or a group's; anything else is "unknown tool"."""
    parsed = _parsed(_DescribeArguments, DESCRIBE_TOOL, arguments)
    if isinstance(parsed, str):
        return _refusal(parsed)
    assert isinstance(parsed, _DescribeArguments)
    name = parsed.name
    granted = set(callable_names(principal))
    tool = registry.get(name)
    # One whose schema cannot be built is described as no tool (``buildable`` names it to operators).
    described = buildable([tool], lambda each: tool_definition(each, "mcp")) if tool and name in granted else []
    if tool is not None and described:
        holders, _ = _groups_by_tool(granted | _granted(principal, _facades()))
        return _answer({"tool": described[0], "category": tool.category, "groups": holders.get(name, [])})
    facade = _facades().get(name)
    if facade is not None:
        group = _group(facade, granted | _granted(principal, [name]))
        if group is not None:
            return _answer({"group": group})
    # A denied tool, a navigation tool and a missing one get the same answer.
    return _refusal(f"{unknown_tool_message(name, granted)} Use {FIND_TOOL} to find the tools you may use.")
