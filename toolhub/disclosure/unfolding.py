"""Unfolding tools (Embabel's ``UnfoldingTool``): one facade the model sees, its inner tools once it calls it.

::

    DATABASE = UnfoldingTool.of(
        "database_operations", "Work with the database. Call to see the operations.",
        [query_table.tool, insert_record.tool], child_usage_notes="Query before you insert.",
    )

Calling a facade (an audited call like any other) replaces it with its inner tools, a guide tool of
the same name (calling it again lists the inner tools) and a ``<name>_context`` tool that carries the
facade's description and usage notes. ``exclusive=True`` hides every other tool until the run ends.
Facades nest: an inner tool may itself be an ``UnfoldingTool``. Module-level facades in an app's
``tools.py`` are registered by autodiscovery, with every inner tool.

What a facade reveals is always filtered by the caller's grants (and, in a run, by the tool groups'
activation rules): a denied inner tool is neither shown nor listed, and a facade (or its context tool)
with nothing usable inside counts as denied too (``usable_tools``): it would only advertise tools that
do not exist for the caller.
"""

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolhub.exceptions import ToolDefinitionError, ToolError
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import TOOL_ATTRIBUTE, Risk, Tool
from toolhub.tools.instance import tools_from_instance

__all__ = [
    "UnfoldingTool",
    "unfolding_tools",
    "facade_of",
    "usable_tools",
    "tool_seen_by",
    "tool_seen_by_any",
    "usable_in_call",
    "CONTEXT_SUFFIX",
    "ALL_CATEGORY",
]

#: ``<facade>_context``: the tool that carries a facade's description and notes once it is unfolded.
CONTEXT_SUFFIX = "_context"
#: The category that holds every inner tool of a by-category facade.
ALL_CATEGORY = "all"
#: Attribute ``@unfolding_tools`` sets on a class.
_CLASS_ATTRIBUTE = "__toolhub_unfolding__"

Child = "Tool | UnfoldingTool"
Selector = Callable[[Mapping[str, Any]], Iterable[Any]]


@dataclass(frozen=True, eq=False)
class UnfoldingTool:
    """A facade over inner tools; build one with ``of``, ``by_category``, ``selectable`` or ``from_instance``."""

    name: str
    description: str
    children: tuple[Any, ...]
    child_usage_notes: str = ""
    exclusive: bool = False
    categories: Mapping[str, tuple[Any, ...]] | None = None
    category_parameter: str = "category"
    parameters: Mapping[str, Any] | None = None
    selector: Selector | None = None
    facade: Tool = field(init=False, repr=False)
    context_tool: Tool = field(init=False, repr=False)
    #: The facade narrowed to some categories (``tool_seen_by``), built once per set of categories.
    _narrowed: dict[frozenset[str], Tool] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        for child in self.children:
            if not isinstance(child, Tool | UnfoldingTool):
                raise ToolDefinitionError(
                    f"Unfolding tool {self.name!r}: {child!r} is neither a Tool nor an UnfoldingTool "
                    "(pass function.tool for an @tool function)."
                )
        if not self.children:
            raise ToolDefinitionError(f"Unfolding tool {self.name!r} has no inner tools.")
        names = [child.name for child in self.children]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ToolDefinitionError(f"Unfolding tool {self.name!r}: inner tools named twice: {duplicates}.")
        facade = Tool.create(
            self.name,
            self.description,
            self._facade_parameters(),
            self._unfold,
            risk=Risk.LOW,
            idempotent=True,
        )
        context = Tool.create(
            f"{self.name}{CONTEXT_SUFFIX}",
            f"What the tools of {self.name} are for, and how to use them: {self.description}"[:1000],
            None,
            self._context,
            risk=Risk.LOW,
            idempotent=True,
        )
        object.__setattr__(self, "facade", facade)
        object.__setattr__(self, "context_tool", context)

    # --- factories --------------------------------------------------------------------------------

    @classmethod
    def of(
        cls,
        name: str,
        description: str,
        tools: Sequence[Any],
        *,
        child_usage_notes: str = "",
        exclusive: bool = False,
    ) -> "UnfoldingTool":
        """A facade that reveals all of ``tools`` when called."""
        return cls(name, description, tuple(_as_child(t) for t in tools), child_usage_notes, exclusive)

    @classmethod
    def by_category(
        cls,
        name: str,
        description: str,
        tools_by_category: Mapping[str, Sequence[Any]],
        *,
        child_usage_notes: str = "",
        exclusive: bool = False,
        category_parameter: str = "category",
    ) -> "UnfoldingTool":
        """A facade with an enum ``category`` parameter; calling it reveals that category's tools only."""
        categories = {str(k): tuple(_as_child(t) for t in v) for k, v in tools_by_category.items()}
        if not categories:
            raise ToolDefinitionError(f"Unfolding tool {name!r}: by_category() needs at least one category.")
        children: dict[str, Any] = {}
        for members in categories.values():
            for child in members:
                children.setdefault(child.name, child)
        return cls(
            name,
            description,
            tuple(children.values()),
            child_usage_notes,
            exclusive,
            categories=categories,
            category_parameter=category_parameter,
        )

    @classmethod
    def selectable(
        cls,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        selector: Selector,
        *,
        tools: Sequence[Any],
        child_usage_notes: str = "",
        exclusive: bool = False,
    ) -> "UnfoldingTool":
        """A facade whose ``selector(arguments)`` picks which inner tools a call reveals.

        ``parameters`` is the facade's input (a JSON Schema of an object, or a mapping of names to
        types, as for ``Tool.create``). The selector may build tools from the arguments (or return
        names); declare in ``tools`` every tool it can return, so that every worker knows it and
        grants govern it: a returned tool is matched to those by name (the declared one is what
        runs), and a name the facade does not declare is never revealed.
        """
        if not callable(selector):
            raise ToolDefinitionError(f"Unfolding tool {name!r}: the selector must be callable.")
        return cls(
            name,
            description,
            tuple(_as_child(t) for t in tools),
            child_usage_notes,
            exclusive,
            parameters=parameters,
            selector=selector,
        )

    @classmethod
    def from_instance(cls, obj: Any) -> "UnfoldingTool":
        """The facade of an object whose class is decorated with ``@unfolding_tools``.

        Its ``@tool`` methods are the inner tools; when any has ``category=``, the facade is by
        category (a tool without one is in every category and in ``all``); nested classes decorated
        with ``@unfolding_tools`` become nested facades (made with no arguments).
        """
        options = getattr(type(obj), _CLASS_ATTRIBUTE, None)
        if options is None:
            raise ToolDefinitionError(
                f"{type(obj).__qualname__} is not decorated with @unfolding_tools(name=..., description=...)."
            )
        methods = tools_from_instance(obj, required=False)
        nested = [
            cls.from_instance(value())
            for value in vars(type(obj)).values()
            if isinstance(value, type) and getattr(value, _CLASS_ATTRIBUTE, None) is not None
        ]
        common = {"child_usage_notes": options["child_usage_notes"], "exclusive": options["exclusive"]}
        if any(t.category for t in methods):
            shared = [t for t in methods if not t.category] + nested
            grouped: dict[str, list[Any]] = {}
            for t in methods:
                if t.category:
                    grouped.setdefault(t.category, []).append(t)
            categories = {k: [*v, *shared] for k, v in grouped.items()}
            categories[ALL_CATEGORY] = [*methods, *nested]
            return cls.by_category(options["name"], options["description"], categories, **common)
        return cls.of(options["name"], options["description"], [*methods, *nested], **common)

    # --- what the model sees and calls ------------------------------------------------------------

    def __toolhub_tools__(self) -> list[Tool]:
        """Every tool to register: the facade, its context tool and, recursively, the inner tools."""
        tools = [self.facade, self.context_tool]
        for child in self.children:
            tools.extend(child.__toolhub_tools__() if isinstance(child, UnfoldingTool) else [child])
        return tools

    def child_names(self) -> list[str]:
        return [child.name for child in self.children]

    def leaf_names(self) -> set[str]:
        """The tools inside that do the work (no facade and no context tool), however deep."""
        names: set[str] = set()
        for child in self.children:
            names |= child.leaf_names() if isinstance(child, UnfoldingTool) else {child.name}
        return names

    def descendant_names(self) -> set[str]:
        """Every tool reachable by unfolding, nested facades' context tools included."""
        names: set[str] = set()
        for child in self.children:
            names.add(child.name)
            if isinstance(child, UnfoldingTool):
                names.add(child.context_tool.name)
                names |= child.descendant_names()
        return names

    def select(self, arguments: Mapping[str, Any]) -> list[str]:
        """The names of the inner tools a call with ``arguments`` reveals (before grants)."""
        known = {child.name for child in self.children}
        if self.categories is not None:
            chosen = self.categories.get(str(arguments.get(self.category_parameter, "")), ())
            return [child.name for child in chosen]
        if self.selector is not None:
            picked = []
            for item in self.selector(dict(arguments)) or ():
                name = getattr(item, "name", item)
                if isinstance(name, str) and name in known and name not in picked:
                    picked.append(name)
            return picked
        return self.child_names()

    def _facade_parameters(self, categories: Iterable[str] | None = None) -> Mapping[str, Any] | None:
        if self.categories is not None:
            return {
                "type": "object",
                "properties": {
                    self.category_parameter: {
                        "type": "string",
                        "enum": sorted(self.categories if categories is None else categories),
                        "description": "Which tools to unfold.",
                    }
                },
                "required": [self.category_parameter],
                "additionalProperties": False,
            }
        return self.parameters

    def reaches(self, passing: set[str]) -> bool:
        """Whether unfolding reaches a tool among ``passing``: a child in it, or a nested facade in it that does.

        A leaf inside a nested facade that is not in ``passing`` (denied, or of a group not eligible) is out of
        reach: that facade's call is refused, so it never lists its tools.
        """
        return any(_reaches(child, passing) for child in self.children)

    def open_categories(self, passing: set[str]) -> list[str]:
        """The categories reaching a tool among ``passing`` (directly, or through a nested facade in it)."""
        assert self.categories is not None
        return [
            category
            for category, members in self.categories.items()
            if any(_reaches(member, passing) for member in members)
        ]

    def narrowed(self, registered: Tool, categories: Iterable[str]) -> Tool:
        """The registered facade offering only ``categories``: same name, handler and version, a narrower enum.

        The version stays the registered one's: it is the same tool (an approval bound to it still holds),
        shown to one caller.
        """
        key = frozenset(categories)
        if key not in self._narrowed:
            inputs = Tool.create(self.name, self.description, self._facade_parameters(key), self._unfold).inputs
            view = registered._copy(inputs=inputs)
            view.__dict__["version"] = registered.version
            self._narrowed[key] = view
        return self._narrowed[key]

    def _unfold(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        names = usable_in_call(self.select(arguments), ctx)
        if not names:
            raise ToolError(f"{self.name} has no tools you may use for these arguments.")
        listing = [{"name": name, "description": _short(name)} for name in names]
        return {
            "unfolded": self.name,
            "tools": listing,
            "note": f"These tools are available from your next turn; call {self.name}{CONTEXT_SUFFIX} for guidance.",
        }

    def _context(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        from toolhub.disclosure.principals import principal_of_context
        from toolhub.tools.export import buildable
        from toolhub.tools.registry import registry

        principal, context = principal_of_context(ctx), dict(ctx)
        seen_tools = []
        for name in usable_tools(self.child_names(), principal, context=context):
            tool = registry.get(name)
            seen = tool_seen_by(tool, principal, context=context) if tool is not None else None
            if seen is not None:
                seen_tools.append(seen)
        # One whose schema cannot be built is left out (``buildable``), not the facade's guidance refused.
        details = buildable(
            seen_tools,
            lambda seen: {"name": seen.name, "description": seen.description, "parameters": seen.json_schema},
        )
        return {"facade": self.name, "description": self.description, "notes": self.child_usage_notes, "tools": details}


def unfolding_tools(
    *, name: str, description: str, child_usage_notes: str = "", exclusive: bool = False
) -> Callable[[type], type]:
    """Class decorator: ``UnfoldingTool.from_instance(obj)`` makes the class's ``@tool`` methods one facade."""

    def decorate(cls: type) -> type:
        if not inspect.isclass(cls):
            raise ToolDefinitionError("@unfolding_tools decorates a class.")
        options = {"name": name, "description": description, "child_usage_notes": child_usage_notes}
        setattr(cls, _CLASS_ATTRIBUTE, {**options, "exclusive": exclusive})
        return cls

    return decorate


def facade_of(tool: Tool | None) -> tuple["UnfoldingTool | None", str]:
    """The facade a registered tool belongs to and its role there: ``"facade"``, ``"context"`` or ``""``."""
    handler = getattr(tool, "handler", None)
    owner = getattr(handler, "__self__", None)
    if not isinstance(owner, UnfoldingTool):
        return None, ""
    function = getattr(handler, "__func__", None)
    if function is UnfoldingTool._unfold:
        return owner, "facade"
    if function is UnfoldingTool._context:
        return owner, "context"
    return None, ""


def _reaches(child: Any, passing: set[str]) -> bool:
    if isinstance(child, UnfoldingTool):
        return child.name in passing and child.reaches(passing)
    return child.name in passing


def _as_child(item: Any) -> Any:
    if isinstance(item, Tool | UnfoldingTool):
        return item
    built = getattr(item, TOOL_ATTRIBUTE, None)
    if isinstance(built, Tool):
        return built
    raise ToolDefinitionError(f"{item!r} is not a tool: decorate it with @tool or build a Tool or UnfoldingTool.")


def usable_tools(names: Sequence[str], principal: Any, *, context: Mapping[str, Any] | None = None) -> list[str]:
    """``names`` that ``principal`` may use: granted, and for a guide, reaching a usable tool.

    A guide is a facade, its context tool, or a playbook's or state machine's own tool.

    The one rule for every place tools are listed (a run's tools, what its state stores, a facade's unfold and
    context results, suggestions, the provider exports, the tools a creator may name on an agent): a guide
    reaching no tool the principal may use is answered as denied (a facade's leaves count only through nested
    facades it may use: a denied nested facade is never unfolded, so what it holds is out of reach), and a
    context tool goes with its facade (one of a denied facade is denied); a name no longer registered is never
    usable (a run's stored state may name a tool removed since).
    With a run's ``context`` the tool groups' activation rules apply too (``groups.group_eligibility``): a tool
    in groups needs one eligible for the run, facades and context tools included (a context tool needs its
    facade's too), so a group bound to another tenant hides them all.
    """
    from toolhub.authorization import authorize_tools
    from toolhub.tools.registry import registry

    guides: dict[str, UnfoldingTool | frozenset[str]] = {}  # a facade, or a playbook's or state machine's members
    owners: dict[str, str] = {}
    below: set[str] = set()
    known: set[str] = set()
    for name in names:
        tool = registry.get(name)
        if tool is None:
            continue  # not registered (any more): nobody may use it, whatever a stored state or a grant names
        known.add(name)
        facade = facade_of(tool)[0]
        members = _gated_members(tool)
        if facade is not None:
            guides[name], owners[name] = facade, facade.name
            below |= facade.descendant_names()
        elif members:
            guides[name] = members
            below |= members
    names = [name for name in names if name in known]
    asked = list(dict.fromkeys([*names, *owners.values(), *sorted(below)]))
    verdicts = authorize_tools(asked, principal)
    passing = {name for name in asked if verdicts.get(name) is None}
    if context is not None:
        passing = _eligible(passing, owners, principal, context)
    # A context tool goes with its facade: one of a denied facade is left out with it.
    return [
        name
        for name in names
        if name in passing
        and (name not in guides or (_guide_reaches(guides[name], passing) and owners.get(name, name) in passing))
    ]


def _guide_reaches(guide: "UnfoldingTool | frozenset[str]", passing: set[str]) -> bool:
    return guide.reaches(passing) if isinstance(guide, UnfoldingTool) else not guide.isdisjoint(passing)


def _gated_members(tool: Tool) -> frozenset[str]:
    """A playbook's or state machine's members when ``tool`` is its own (guide) tool, else nothing."""
    from toolhub.agentic.base import GatedTools, owner_of

    owner = owner_of(tool)
    return frozenset(owner.member_names()) if isinstance(owner, GatedTools) and owner.name == tool.name else frozenset()


def _eligible(names: set[str], owners: Mapping[str, str], principal: Any, context: Mapping[str, Any]) -> set[str]:
    """``names`` whose groups hold one eligible for the run, or that are in none; a context tool, its facade too.

    ``owners``: the facade of each facade or context tool among ``names``.
    """
    from toolhub.disclosure.groups import group_eligibility

    memberships, eligible = group_eligibility([*names, *owners.values()], principal=principal, context=context)

    def fits(name: str) -> bool:
        groups = memberships.get(name, set())
        return not groups or bool(groups & eligible.keys())

    return {name for name in names if fits(name) and fits(owners.get(name, name))}


def tool_seen_by(tool: Tool, principal: Any, *, context: Mapping[str, Any] | None = None) -> Tool | None:
    """``tool`` as ``principal`` is shown it and calls it; ``None`` for a guide reaching nothing it may use.

    A by-category facade offers only the categories holding a tool the principal may use, in its
    schema and so in its validation: a category of denied tools reads exactly like one that does not
    exist. Any other tool is returned as it is (the grants on the tool itself are the caller's check).
    ``context``: a run's, as for ``usable_tools``.
    """
    return tool_seen_by_any(tool, [principal], context=context)


def tool_seen_by_any(tool: Tool, principals: Sequence[Any], *, context: Mapping[str, Any] | None = None) -> Tool | None:
    """``tool`` as someone acting as any one of ``principals`` (one per tenant of theirs) is shown it.

    Each principal is checked on its own (``tool_seen_by``): a facade is kept when one of them may use it, and a
    by-category facade offers each category one of them may open.
    """
    owner, role = facade_of(tool)
    if owner is None and not _gated_members(tool):
        return tool
    using = [principal for principal in principals if usable_tools([tool.name], principal, context=context)]
    if not using:
        return None
    if owner is None or role != "facade" or owner.categories is None:
        return tool
    inside = sorted(owner.descendant_names())
    opened: set[str] = set()
    for principal in using:
        opened.update(owner.open_categories(set(usable_tools(inside, principal, context=context))))
    return tool if len(opened) == len(owner.categories) else owner.narrowed(tool, opened)


def usable_in_call(names: Iterable[str], ctx: ToolContext) -> list[str]:
    """``names`` the principal of the call with ``ctx`` may see in its run (``usable_tools`` with the call's context).

    What a navigation tool's answer may name: a facade's unfold, an agentic tool's guide, refusal or inner model.
    Never one whose schema cannot be built (``export.listable_names``): no listing gives the model its definition.
    """
    from toolhub.disclosure.principals import principal_of_context
    from toolhub.tools.export import listable_names

    usable = usable_tools(list(dict.fromkeys(names)), principal_of_context(ctx), context=dict(ctx))
    return listable_names(usable)


def _short(name: str) -> str:
    from toolhub.tools.registry import registry

    tool = registry.get(name)
    return (tool.description.split("\n", 1)[0] if tool else "")[:200]
