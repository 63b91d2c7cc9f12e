"""The meta tools: ``tool_search`` and ``reset_equipped_tools``, governed calls like any other.

They only read: what they found or chose is applied to the run's visible tools by the agent loop
when their call has settled (``toolhub.disclosure.visibility.state_after_calls``).
"""

import unicodedata
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from toolhub.exceptions import ToolError
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Risk, Tool
from toolhub.tools.specs import Param

__all__ = [
    "TOOL_SEARCH",
    "RESET_EQUIPPED_TOOLS",
    "META_TOOLS",
    "META_TOOL_NAMES",
    "MAX_SEARCH_RESULTS",
    "MAX_CATEGORY_LENGTH",
    "SearchCategory",
]

TOOL_SEARCH = "tool_search"
RESET_EQUIPPED_TOOLS = "reset_equipped_tools"
META_TOOL_NAMES = frozenset({TOOL_SEARCH, RESET_EQUIPPED_TOOLS})

#: Most names one search returns; the model is told the bound when it asks for more.
MAX_SEARCH_RESULTS = 20
MAX_QUERY_LENGTH = 500
MAX_CATEGORY_LENGTH = 100
MAX_GROUPS = 50


def _printable_category(category: str | None) -> str | None:
    """A category is a name: a control character (a NUL) or a lone surrogate is refused, naming the field.

    No category holds one, and a search provider's database may not take it (PostgreSQL text holds no NUL).
    """
    if category is not None and any(unicodedata.category(ch) in ("Cc", "Cs") for ch in category):
        raise ValueError("a category is a name, without control characters")
    return category


#: The ``category`` of a search (``tool_search``, MCP's ``toolhub_find_tools``): an optional, short, printable name.
SearchCategory = Annotated[str | None, Field(max_length=MAX_CATEGORY_LENGTH), AfterValidator(_printable_category)]


def _tool_search(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    from toolhub.disclosure.principals import principal_of_context
    from toolhub.disclosure.search import principal_index

    query = " ".join(str(arguments["query"]).split())
    if not query:
        raise ToolError("tool_search needs a query: describe the capability you need, e.g. 'refund an order'.")
    category = arguments.get("category") or None
    index = principal_index(principal_of_context(ctx), context=dict(ctx))
    # Distinct names the index was built over, at most ``max_results`` (``principal_index``).
    found = index.search(query, k=int(arguments.get("max_results") or 5), category=category)
    if not found:
        return {"tools": [], "note": "No tool matched. Rephrase the query with other words for the capability."}
    return {"tools": found, "note": "Their definitions are available from your next turn; call them then."}


def _reset_equipped_tools(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    from toolhub.disclosure.visibility import equippable_groups

    wanted = list(dict.fromkeys(str(name) for name in arguments["groups"]))
    available = equippable_groups(ctx)
    unknown = [name for name in wanted if name not in available]
    if unknown:
        # A group the principal may not equip is answered exactly like one that does not exist.
        shown = ", ".join(repr(name[:100]) for name in unknown[:5])
        choices = ", ".join(sorted(available)[:MAX_GROUPS]) or "none"
        raise ToolError(f"Unknown tool group(s) {shown}. Groups you may equip: {choices}.")
    return {"active_groups": wanted, "note": "The tools of these groups are available from your next turn."}


_SEARCH_PARAMETERS = {
    "query": Annotated[
        str, Param("What you need to do, in a few words."), Field(min_length=1, max_length=MAX_QUERY_LENGTH)
    ],
    "max_results": (
        Annotated[
            int, Param(f"How many tools to return, 1 to {MAX_SEARCH_RESULTS}."), Field(ge=1, le=MAX_SEARCH_RESULTS)
        ],
        5,
    ),
    "category": (Annotated[SearchCategory, Param("Only tools of this category.")], None),
}

_GROUP_PARAMETERS = {
    "groups": Annotated[
        list[Annotated[str, Field(min_length=1, max_length=100)]],
        Param("The tool groups to equip; every other group is put away. An empty list keeps only ungrouped tools."),
        Field(max_length=MAX_GROUPS),
    ],
}

#: Built once; the core registers them at startup (``toolhub.apps``).
META_TOOLS = (
    Tool.create(
        TOOL_SEARCH,
        "Find tools for a task you cannot do with the tools you see. Returns tool names only; "
        "their full definitions are added on your next turn, replacing the previous search's.",
        _SEARCH_PARAMETERS,
        _tool_search,
        risk=Risk.LOW,
        idempotent=True,
    ),
    Tool.create(
        RESET_EQUIPPED_TOOLS,
        "Equip exactly these tool groups (the others are put away); their tools are available from your next turn.",
        _GROUP_PARAMETERS,
        _reset_equipped_tools,
        risk=Risk.LOW,
        idempotent=True,
    ),
)
