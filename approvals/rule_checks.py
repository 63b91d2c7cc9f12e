"""Whether an operator's approval rule can match at all: the tool, group, argument and value it names.

A rule that can never match is no rule: the calls it was written to hold run unapproved, and nothing says
so. ``ApprovalRule.clean`` (which the admin's form runs) refuses one when it is entered; ``manage.py check
--database default`` (``approvals.W001``) and the rules' list report one saved before the code changed.
"""

import difflib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from approvals.models import ApprovalRule, Operator
from toolhub.feedback import unbuildable_tool_message
from toolhub.references import (
    ORDERABLE,
    group_members,
    json_type,
    json_types,
    parameter_names,
    parameter_schema,
    tool_name_problem,
    value_problem,
)
from toolhub.tools.definition import Tool
from toolhub.tools.export import listed_schema
from toolhub.tools.registry import registry

__all__ = ["rule_problems"]

_ORDERING = frozenset({Operator.GT, Operator.GE, Operator.LT, Operator.LE})
_CONTAINERS = frozenset({"string", "array", "object"})


def rule_problems(rule: ApprovalRule) -> dict[str, str]:
    """Why ``rule`` can never match a call, by the field to fix (empty: it can)."""
    if rule.tool_name:
        problem = tool_name_problem(rule.tool_name)
        if problem:
            return {"tool_name": problem}
        tool = registry.get(rule.tool_name)
        assert tool is not None
        if rule.tool_group_id and tool.name not in _names(_members(rule)):
            return {
                "tool_group": f"Tool {tool.name!r} is not in this tool group, and a call matches only when it is of "
                "both: name the tool or the group, or add the tool to the group."
            }
        if rule.argument and listed_schema(tool) is None:
            return {"argument": unbuildable_tool_message(tool.name)}
        return _condition_problems(rule, [tool], f"tool {tool.name!r}")
    if rule.tool_group_id:
        # The group is not named: a tenant's staff may see a global rule whose group they may not (admin_relations).
        return _condition_problems(rule, _members(rule), "the tools of this tool group")
    return _condition_problems(rule, registry.all(), "any registered tool")


def _members(rule: ApprovalRule) -> list[Tool]:
    return group_members(rule.tool_group.name, rule.tool_group.extra_tools)


def _names(tools: Sequence[Tool]) -> set[str]:
    return {tool.name for tool in tools}


def _condition_problems(rule: ApprovalRule, tools: Sequence[Tool], covered: str) -> dict[str, str]:
    """The argument must be a parameter of a covered tool, and the value one the operator can find in it."""
    if not rule.argument:
        if rule.operator or rule.value is not None:
            return {
                "argument": "An operator or a value needs the argument it reads; without one the rule ignores "
                "them and holds every call it covers. Name the argument, or clear the operator and the value."
            }
        return {}
    schemas = [schema for tool in tools if (schema := parameter_schema(tool, rule.argument)) is not None]
    if not schemas:
        names = sorted({name for tool in tools for name in parameter_names(tool)})
        close = difflib.get_close_matches(rule.argument, names, n=3, cutoff=0.5)
        hint = (
            f" Did you mean: {', '.join(close)}?"
            if close
            else (f" It takes: {', '.join(names[:20])}." if names else "")
        )
        return {"argument": f"No parameter {rule.argument!r} in {covered}: the rule would never match.{hint}"}
    problems = [_value_problem(rule.argument, rule.operator or Operator.EQ, rule.value, schema) for schema in schemas]
    if all(problems):
        return {"value": str(problems[0])}
    return {}


def _value_problem(argument: str, operator: str, value: Any, schema: dict[str, Any]) -> str | None:
    """Why ``argument operator value`` never holds for a value of ``schema`` (``None``: it may)."""
    kinds = json_types(schema)
    shown = json.dumps(value)
    instant = _instant_problem(argument, operator, value, schema)
    if instant:
        return instant
    if operator in (Operator.EQ, Operator.NE):
        problem = value_problem(schema, value)
        return f"{argument!r} is never {shown}: {problem}." if problem else None
    if operator == Operator.IN:
        if not isinstance(value, list):
            return f"'in' compares {argument!r} with a JSON list of values, e.g. [{shown}]."
        bad = next((problem for item in value if (problem := value_problem(schema, item))), None)
        return f"{argument!r} is never one of {shown}: {bad}." if bad else None
    if operator == Operator.CONTAINS:
        if kinds is None or kinds & _CONTAINERS:
            return None
        return f"'contains' reads text, a list or an object; {argument!r} is {_kinds(kinds)}."
    if operator in _ORDERING:
        orderable = {_class(kind) for kind in kinds & ORDERABLE} if kinds is not None else {"number", "string"}
        if not orderable:
            return f"{operator!r} orders numbers or text; {argument!r} is {_kinds(kinds)}."
        if _class(json_type(value)) not in orderable:
            kinds_shown = " or ".join(sorted(orderable))
            return f"{operator!r} compares {argument!r} ({kinds_shown}) with one of its kind, not {shown}."
    return None


def _instant_problem(argument: str, operator: str, value: Any, schema: dict[str, Any]) -> str | None:
    """A date-time parameter is compared as the instant it names (``approvals.rules``): the rule's value must name one.

    A date alone, or a time without its offset, is no instant: ordered against the call's, the comparison cannot be
    made and every call is held (a rule that holds everything is as wrong as one that holds nothing).
    """
    if operator not in _ORDERING or not isinstance(value, str) or "date-time" not in _formats(schema):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        return (
            f"{argument!r} is a date and time, compared as the instant it names: give one with its offset, "
            f'e.g. "{value[:10] if len(value) >= 10 else "2026-06-01"}T00:00:00Z", not {json.dumps(value)}.'
        )
    return None


def _formats(schema: Mapping[str, Any]) -> set[str]:
    """The ``format``s a value of ``schema`` may have, through ``anyOf``/``oneOf`` (``Optional`` parameters)."""
    found = {schema["format"]} if isinstance(schema.get("format"), str) else set()
    for union in ("anyOf", "oneOf"):
        for option in schema.get(union) or []:
            if isinstance(option, Mapping):
                found |= _formats(option)
    return found


def _class(kind: str) -> str:
    return "number" if kind in ("integer", "number") else kind


def _kinds(kinds: frozenset[str] | None) -> str:
    return " or ".join(sorted({_class(kind) for kind in kinds or ()})) or "of no known type"
