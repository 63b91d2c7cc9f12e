"""What governance configuration names must exist: tools, their parameters, the values those take.

One check for every door that saves a grant, a tool group or an approval rule (the models' ``clean()``,
which the admin's forms run) and for ``manage.py check --database default``, which reports the rows saved
before the code changed. A name that matches nothing is never a harmless "no match": a deny with a typo
denies nothing, and an approval rule with one holds nothing.

Suggestions name registered tools: everyone who may enter these rows reads the catalogue (every role holds
``toolhub.view_tooldefinition``), which lists them all.
"""

import difflib
from collections.abc import Callable, Iterable, Mapping
from itertools import islice
from typing import Any, TypeVar

import jsonschema
from django.core.checks import CheckMessage, Warning
from django.db import DatabaseError, transaction
from referencing.exceptions import Unresolvable

from toolhub.tools.definition import Tool
from toolhub.tools.export import listed_schema
from toolhub.tools.linear_patterns import linear_validator
from toolhub.tools.registry import registry
from toolhub.tools.validation_budget import MAX_VALIDATION_STEPS, ValidationBudgetSpent

__all__ = [
    "ORDERABLE",
    "group_members",
    "json_type",
    "json_types",
    "parameter_names",
    "parameter_schema",
    "reference_warnings",
    "saved_rows",
    "tool_name_problem",
    "tool_names_problem",
    "value_problem",
]

T = TypeVar("T")

#: The JSON types ``<``, ``<=``, ``>``, ``>=`` compare (numbers with numbers, text with text).
ORDERABLE = frozenset({"integer", "number", "string"})

#: The most warnings one check of saved rows names one by one (``migrate`` prints each); any more are counted in one.
MAX_REFERENCE_WARNINGS = 25


def tool_name_problem(name: str) -> str | None:
    """Why ``name`` names no registered tool (``None``: it does), with the closest names."""
    if name in registry:
        return None
    close = difflib.get_close_matches(name, registry.names(), n=3, cutoff=0.5)
    shown = name if len(name) <= 80 else name[:77] + "..."
    hint = f"Did you mean: {', '.join(close)}?" if close else "The tool catalogue lists the registered tools."
    return f"No registered tool is named {shown!r}. {hint}"


def tool_names_problem(names: object) -> str | None:
    """Why ``names`` is not a JSON list of registered tools' names (``None``: it is)."""
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return 'Give a JSON list of tool names, e.g. ["create_order", "get_order"].'
    return next((problem for name in names if (problem := tool_name_problem(name))), None)


def group_members(group_name: str, extra_tools: object) -> list[Tool]:
    """The registered tools of a group: declared in code (``@tool(group=...)``) or added by operators."""
    extra = set(extra_tools) if isinstance(extra_tools, list) else set()
    return [tool for tool in registry.all() if tool.group == group_name or tool.name in extra]


def parameter_schema(tool: Tool, parameter: str) -> dict[str, Any] | None:
    """The JSON Schema of one of ``tool``'s parameters, its references resolvable (``None``: no such parameter).

    ``None`` too when the tool's schema cannot be built (``listed_schema``): its parameters are unknown.
    """
    schema = listed_schema(tool)
    if schema is None:
        return None
    spec = (schema.get("properties") or {}).get(parameter)
    if not isinstance(spec, Mapping):
        return None
    shared = {key: schema[key] for key in ("$defs", "definitions") if key in schema}
    return {**shared, **spec}


def parameter_names(tool: Tool) -> list[str]:
    """``tool``'s top-level parameters (none known when its schema cannot be built: ``listed_schema``)."""
    return list((listed_schema(tool) or {}).get("properties") or ())


def json_types(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> frozenset[str] | None:
    """The JSON types a value of ``schema`` may have (``None``: any), through ``$ref``, unions and enums."""
    root = root or schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, Mapping) else {}
        return json_types(target, root)
    for union in ("anyOf", "oneOf"):
        if isinstance(schema.get(union), list):
            kinds: set[str] = set()
            for option in schema[union]:
                found = json_types(option, root) if isinstance(option, Mapping) else None
                if found is None:
                    return None
                kinds |= found
            return frozenset(kinds)
    if "enum" in schema or "const" in schema:
        values = schema.get("enum") if "enum" in schema else [schema["const"]]
        return frozenset(json_type(value) for value in values or [])
    kind = schema.get("type")
    if isinstance(kind, str):
        return frozenset({kind, "integer"} if kind == "number" else {kind})
    if isinstance(kind, list):
        return frozenset(kind) | ({"integer"} if "number" in kind else set())
    return None


def json_type(value: Any) -> str:
    """The JSON Schema type of a JSON value (an integral number is an ``integer``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def value_problem(schema: Mapping[str, Any], value: Any) -> str | None:
    """Why ``value`` is no value of ``schema`` (``None``: it is one), as jsonschema says, formats (dates) too."""
    try:
        validator = linear_validator(schema, format_checker=jsonschema.FormatChecker())  # patterns in linear time
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except (jsonschema.exceptions.SchemaError, Unresolvable):
        return None  # a schema jsonschema cannot read: the tool's own validation decides, nothing to refuse here
    except ValidationBudgetSpent:
        return f"checking the value against the parameter's schema took more than {MAX_VALIDATION_STEPS:,} steps"
    return None if error is None else error.message


def saved_rows(load: Callable[[], Iterable[T]]) -> list[T]:
    """Rows read for a check: none before ``migrate`` made their tables (``migrate`` runs the checks first)."""
    try:
        with transaction.atomic():  # a savepoint: a missing table breaks nothing after it
            return list(load())
    except DatabaseError:
        return []


def reference_warnings(
    rows: Iterable[tuple[Any, Mapping[str, str]]], *, check_id: str, hint: str
) -> list[CheckMessage]:
    """``manage.py check`` warnings for saved rows naming what the code no longer has, one per row and field.

    The first ``MAX_REFERENCE_WARNINGS`` are named, any more counted in one warning: a setting or a tool that
    refuses what every tenant's rows name would otherwise print thousands at each ``migrate``.
    """
    found = ((row, field, problem) for row, problems in rows for field, problem in problems.items())
    named: list[CheckMessage] = [
        Warning(f"{field}: {problem}", hint=hint, obj=f"{type(row).__name__} {str(row)!r}", id=check_id)
        for row, field, problem in islice(found, MAX_REFERENCE_WARNINGS)
    ]
    unlisted = sum(1 for _ in found)
    if unlisted:
        named.append(
            Warning(
                f"... and {unlisted} more saved row(s) or field(s) with such a problem, not listed here.",
                hint=f"{hint} Fix those listed above, then run `manage.py check --database default` again for the "
                "next ones.",
                id=check_id,
            )
        )
    return named
