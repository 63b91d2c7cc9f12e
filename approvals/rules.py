"""Operators' database approval rules, evaluated by the core's policy as a rule source."""

from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from approvals.models import ApprovalRule, Operator
from toolhub.authorization import CallPrincipal, tool_group_names
from toolhub.governance import governance_cached
from toolhub.policy import ApprovalVerdict, minimum_approvals
from toolhub.references import parameter_names
from toolhub.tools.definition import Risk, Tool
from toolhub.tools.results import to_json_value

__all__ = ["database_rule_verdict", "rule_matches"]


def database_rule_verdict(
    tool: Tool, risk: str, arguments: Mapping[str, Any], principal: CallPrincipal
) -> ApprovalVerdict | None:
    """The first enabled rule (by priority) that matches the call, as a verdict.

    A tenant's rule (which that tenant's developers manage) may ask for more approvals than the
    platform's global rules, never fewer: the first matching global rule sets a floor.
    """
    rules = governance_cached(("approval_rules",), _enabled_rules)
    groups = tool_group_names([tool.name])[tool.name] if any(rule.tool_group_id for rule in rules) else set()
    # Rules compare JSON values as operators enter them: an enum member, a date or a Decimal as the JSON it is
    # sent and stored as (``"/"``, ``"2026-01-31"``, ``"10.5"``), never a Python object no JSON value equals.
    read = to_json_value(dict(arguments)) if any(rule.argument for rule in rules) else {}
    parameters = frozenset(parameter_names(tool))
    winner: ApprovalRule | None = None
    platform_floor = 0
    for rule in rules:
        if rule_matches(
            rule,
            tool_name=tool.name,
            groups=groups,
            risk=risk,
            arguments=read,
            tenant=principal.tenant,
            parameters=parameters,
        ):
            winner = winner or rule
            if rule.tenant_id is None:
                platform_floor = rule.required_approvals
                break
    if winner is None:
        return None
    minimum = minimum_approvals(risk)
    return ApprovalVerdict(
        reason=f"rule {winner.name!r} matched",
        source="rule",
        risk=risk,
        rule_id=winner.pk,
        timeout_seconds=winner.timeout_seconds,
        required_approvals=max(minimum, winner.required_approvals, platform_floor),
    )


def rules_ask_several_approvers() -> bool:
    """Whether some enabled rule asks for more than one approval (read through the governance cache, no query)."""
    return any(rule.required_approvals > 1 for rule in governance_cached(("approval_rules",), _enabled_rules))


def _enabled_rules() -> list[ApprovalRule]:
    return list(ApprovalRule.objects.filter(enabled=True).select_related("tool_group", "tenant"))


def rule_matches(
    rule: ApprovalRule,
    *,
    tool_name: str,
    groups: set[str],
    risk: str,
    arguments: Mapping[str, Any],
    tenant: str,
    parameters: frozenset[str],
) -> bool:
    """Whether every condition the rule sets holds for this call (``arguments`` as JSON values).

    A rule naming this tool and reading a parameter it does not have (renamed in code since the rule was saved)
    matches: it holds the call for a person rather than let pass what it was written to hold
    (``approvals.W001`` reports it).
    """
    if rule.tool_name and rule.tool_name != tool_name:
        return False
    if rule.tool_group_id and rule.tool_group.name not in groups:
        return False
    if rule.tenant_id and rule.tenant.slug != tenant:
        return False
    if rule.min_risk and Risk(risk).rank < Risk(rule.min_risk).rank:
        return False
    if rule.argument:
        if rule.argument not in arguments:
            return bool(rule.tool_name) and rule.argument not in parameters
        return _compare(arguments[rule.argument], rule.operator or Operator.EQ, rule.value)
    return True


def _compare(actual: Any, operator: str, expected: Any) -> bool:
    try:
        return _compared(actual, operator, expected)
    except TypeError:
        # A rule comparing incomparable values (``[...] in {...}``, ``"a" > 1``) cannot be decided: hold the
        # call rather than let it pass, and never fail it with a server error.
        return True


def _compared(actual: Any, operator: str, expected: Any) -> bool:
    if operator == Operator.IN:
        return isinstance(expected, list) and _normal(actual) in [_normal(item) for item in expected]
    if operator == Operator.CONTAINS:
        if isinstance(actual, list):
            return _normal(expected) in _normal(actual)
        return expected in actual if isinstance(actual, dict) else str(expected) in str(actual)
    left, right = _normal(actual), _normal(expected)
    if operator == Operator.EQ:
        return bool(left == right)
    if operator == Operator.NE:
        return bool(left != right)
    if operator == Operator.GT:
        return bool(left > right)
    if operator == Operator.GE:
        return bool(left >= right)
    if operator == Operator.LT:
        return bool(left < right)
    if operator == Operator.LE:
        return bool(left <= right)
    return False


def _normal(value: Any) -> Any:
    """A JSON value as what it means, not as it is spelt: what the model writes cannot choose a rule's answer.

    Numbers (int, float, Decimal or numeric text) as exact decimals, date-time text as the instant it names
    (``_instant``), lists and objects item by item. Only finite numbers: ``"NaN"``, ``"sNaN"`` and ``"Infinity"``
    stay as they came (a signaling NaN raises on any comparison), so an argument spelled so is held as
    incomparable, never a server error.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, list):
        return [_normal(item) for item in value]
    if isinstance(value, dict):
        return {key: _normal(item) for key, item in value.items()}
    try:
        if isinstance(value, int | float | Decimal):
            number = Decimal(str(value))
        elif isinstance(value, str):
            number = Decimal(value)
        else:
            return value
    except InvalidOperation:
        return _instant(value)
    return number if number.is_finite() else value


def _instant(text: str) -> Any:
    """ISO text of a date and a time as the instant it names; other text as it is.

    Arguments are read as JSON, where a ``datetime`` is text carrying the offset and fraction the call wrote:
    compared letter by letter, ``2026-01-01T05:00:00+14:00`` (an instant of 2025) sorts after
    ``2026-01-01T00:00:00Z``. A time without an offset is not ordered against one with it (``TypeError``: the
    call is held). A date alone stays text: ISO dates sort in order.
    """
    try:
        date.fromisoformat(text)
    except ValueError:
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            return text
    return text
