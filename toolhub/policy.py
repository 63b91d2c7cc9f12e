"""Whether a call needs an operator's approval, and why.

Precedence, first match wins:

1. the tool's code rule: ``needs_approval=True``, or a callable that returns a reason (or ``None``);
2. operators' database rules (``approvals.ApprovalRule``), by priority, registered as a rule source;
3. the effective risk (code, or the operator's override): ``high`` and ``critical`` need approval,
   unless the code rule is ``needs_approval=False``.

Operators can therefore always tighten policy at run time (rules, risk overrides): a call the code rule holds is
held with the timeout of the operators' rule that matches it, and its approvers where it asks for more; and a
developer's ``never`` only switches off the risk default, never an operator's rule.
"""

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolhub.arguments import ArgumentsRefused, validate_arguments
from toolhub.authorization import CallPrincipal, principal_of_call, tool_definitions
from toolhub.catalogue import effective_risk
from toolhub.governance import governance_scope_stamp
from toolhub.models import ToolCall, ToolDefinition
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Risk, Tool
from toolhub.tools.registry import registry
from toolhub.tools.secrets import SecretScrubber

logger = logging.getLogger(__name__)

__all__ = [
    "ApprovalVerdict",
    "RULE_FAILED_REASON",
    "approval_verdict",
    "decision_stamp",
    "minimum_approvals",
    "policy_moved_verdict",
    "recorded_call_verdict",
    "register_approval_rule_source",
    "RuleSource",
]


@dataclass(frozen=True)
class ApprovalVerdict:
    """Why a call needs approval, and the terms of that approval."""

    reason: str
    source: str
    risk: str
    rule_id: int | None = None
    timeout_seconds: float | None = None
    required_approvals: int = 1


#: The reason of a call held because its approval rules failed on its arguments (what failed is in the log).
RULE_FAILED_REASON = "the tool's approval rule failed on these arguments"

#: ``source(tool, risk, arguments, principal) -> ApprovalVerdict | None``
RuleSource = Callable[[Tool, str, Mapping[str, Any], CallPrincipal], ApprovalVerdict | None]
_rule_sources: list[RuleSource] = []


def register_approval_rule_source(source: RuleSource) -> None:
    """Add a source of run-time approval rules (the approvals app registers its database rules)."""
    if source not in _rule_sources:
        _rule_sources.append(source)


def minimum_approvals(risk: str) -> int:
    """The distinct approvers a call held at ``risk`` needs at least, whatever the rules ask: two for ``critical``."""
    return 2 if risk == Risk.CRITICAL else 1


def approval_verdict(
    *,
    tool: Tool,
    definition: ToolDefinition | None,
    arguments: Mapping[str, Any],
    ctx: ToolContext,
    principal: CallPrincipal,
    subject: str = "a requested call",
) -> ApprovalVerdict | None:
    """Apply the documented precedence; ``None`` means the call may run without approval.

    A code rule or a rule source that raises holds the call for a person (``RULE_FAILED_REASON``), its failure
    logged without the withheld values; ``subject`` names the call in that log line.
    """
    risk = effective_risk(tool, definition)
    minimum = minimum_approvals(risk)
    rule = tool.needs_approval
    code_reason = "the tool always needs approval" if rule is True else None
    if callable(rule):
        # What is withheld from the stored arguments (``Tool.withheld``: a misspelt ``PIN`` too) is never
        # shown by what the rule produces either: its reason, its failure.
        scrubber = SecretScrubber.for_arguments(tool, arguments)
        try:
            outcome = rule(arguments, ctx)
        except Exception:  # noqa: BLE001 - a developer's rule failing holds the call for a person, nothing runs
            _log_rule_failure(scrubber, tool, subject)
            code_reason = RULE_FAILED_REASON
        else:
            if outcome:
                reason = outcome if isinstance(outcome, str) else "the tool's approval rule matched"
                # A rule explains itself with what made it match ("first payment to <iban>"): the reason is
                # stored, audited, mailed and sent to webhooks.
                code_reason = scrubber.text(reason)
    try:
        verdict = _sources_verdict(tool, risk, arguments, principal)
    except Exception:  # noqa: BLE001 - a rule source failing holds the call for a person, as a code rule's does
        _log_rule_failure(SecretScrubber.for_arguments(tool, arguments), tool, subject)
        return ApprovalVerdict(
            code_reason or RULE_FAILED_REASON, "code" if code_reason else "rule", risk, required_approvals=minimum
        )
    if code_reason is not None:
        return _code_verdict(code_reason, verdict, risk, minimum)
    if verdict is not None:
        return verdict
    if rule is not False and Risk(risk).needs_approval:
        return ApprovalVerdict(f"risk is {risk}", "risk", risk, required_approvals=minimum)
    return None


def _sources_verdict(
    tool: Tool, risk: str, arguments: Mapping[str, Any], principal: CallPrincipal
) -> ApprovalVerdict | None:
    """The first verdict of the run-time rule sources (operators' rules), ``None`` when none matches."""
    for source in _rule_sources:
        verdict = source(tool, risk, arguments, principal)
        if verdict is not None:
            return verdict
    return None


def _code_verdict(reason: str, matched: ApprovalVerdict | None, risk: str, minimum: int) -> ApprovalVerdict:
    """A call the code holds (its rule matched, failed, or is ``True``), on the terms of the operators' matching rule.

    The code's reason comes first, but the model chooses the arguments: one that makes the code rule match or
    fail (a new payee, a zero quantity it divides by) must not get fewer approvers or a longer wait than the
    operators' rule asks of a call the code lets through.
    """
    if matched is None:
        return ApprovalVerdict(reason, "code", risk, required_approvals=minimum)
    return ApprovalVerdict(
        reason,
        "code",
        risk,
        rule_id=matched.rule_id,
        timeout_seconds=matched.timeout_seconds,
        required_approvals=max(minimum, matched.required_approvals),
    )


def _log_rule_failure(scrubber: SecretScrubber, tool: Tool, subject: str) -> None:
    """Log the failure being handled without the call's withheld values, which it may quote (``int('4821-7730')``).

    No call's scrubber is active while policy decides (the web process, the worker re-judging an edit).
    """
    with scrubber.scope():
        logger.exception("The approval rules of %s failed on %s; it is held for an operator.", tool.name, subject)


def recorded_call_verdict(*, call: ToolCall, tool: Tool, arguments: Mapping[str, Any]) -> ApprovalVerdict | None:
    """The verdict on a version of a recorded call that policy was not asked about: an edit, a changed tool.

    Judged as the pipeline judges a request: as the call's user, tenant and agent, in its context, under
    the tool's definition now. ``arguments`` as stored; the rules read them validated, as the tool would
    (as stored when the changed tool no longer accepts them).
    """
    definition = tool_definitions().get(tool.name)
    risk = effective_risk(tool, definition)
    minimum = minimum_approvals(risk)
    try:
        validated = validate_arguments(tool, arguments)
    except ArgumentsRefused:
        # The tool's parameters changed under the call: its rules cannot read these arguments; a person decides.
        return ApprovalVerdict("the arguments no longer match the tool's parameters", "code", risk, None, None, minimum)
    principal = principal_of_call(
        user_id=call.user_id, tenant=call.tenant, agent_name=call.agent_name, run_id=call.run_id
    )
    ctx = ToolContext(call.context).with_values(call_id=str(call.id))
    subject = f"recorded call {call.id}"
    try:
        return approval_verdict(
            tool=tool, definition=definition, arguments=validated, ctx=ctx, principal=principal, subject=subject
        )
    except Exception:  # noqa: BLE001 - a rule source failing on a recorded call holds it for a person
        # Its traceback may quote the arguments (the web process, a worker: no call's scrubber is active).
        with SecretScrubber.for_arguments(tool, validated).scope():
            logger.exception("The approval rules of %s failed on %s; it is held for an operator.", tool.name, subject)
        return ApprovalVerdict(RULE_FAILED_REASON, "code", risk, None, None, minimum)


def decision_stamp(tool_name: str) -> int | None:
    """The stamp a decision on ``tool_name``'s call is made under: this scope's governance, and the code's group.

    Kept on the call (``ToolCall.approved_under``) when the policy queues it and when its approvals release it: a
    worker claiming it under the same stamp knows nothing that decides whether it is held, nor by whom, changed since.
    The governance stamp moves with every row that decides it (rules, risk overrides, approvers), but the group a
    tool's code declares (``@tool(group=)``, no part of its version) reaches the catalogue only when it syncs: a
    worker on code that moved the tool into a group would otherwise take a decision made without that group as made
    under its governance (review gm). A tool declaring no group keeps the stamp itself. ``None``: no stamp known.
    """
    stamp = governance_scope_stamp()
    tool = registry.get(tool_name)
    if stamp is None or tool is None or not tool.group:
        return stamp
    digest = hashlib.sha256(f"{stamp}\0{tool.group}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def policy_moved_verdict(call: ToolCall, tool: Tool) -> ApprovalVerdict | None:
    """The verdict on a queued call never held for approval, when governance moved since the policy queued it.

    Permissions are checked when a call executes: a rule added, or a risk override raised, while the call waited for
    a worker holds it as it would hold the call asked now (``recorded_call_verdict``, the request path's policy).
    Nothing is read while the stamp is the one the call was decided under (``decision_stamp``) and the tool is the
    version it was decided on; a call without a stamp (queued before it was recorded, a compensation's retry) is judged
    again, and so is one whose tool's code changed since (its code rule and risk are its version, and move no
    governance stamp: a deploy making the tool ``needs_approval=True`` or ``high`` holds it; review p). Asked under
    the worker's governance scope.
    """
    if call.approval_hash:
        return None  # held once: its approvals are judged instead (``toolhub.signals.approval_shortfall``)
    if (
        call.approved_under is not None
        and call.approved_under == decision_stamp(call.tool_name)
        and call.tool_version == tool.version
    ):
        return None
    return recorded_call_verdict(call=call, tool=tool, arguments=call.arguments)
