"""A request's arguments as they would run: parsed, validated, and passed through the ``before`` interceptors.

This runs the user's hooks (the argument-error handler, the interceptors), so the pipeline prepares each
request's arguments once, however many times a governance change makes it decide the call again. A
request refused here carries a ``CallRefused``, which the pipeline records like its own refusals.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolhub.arguments import (
    ArgumentsRefused,
    parse_arguments,
    storable_arguments,
    validate_arguments,
)
from toolhub.audit import EventSpec, arguments_diff
from toolhub.authorization import CallPrincipal, tenant_argument_denial
from toolhub.conf import toolhub_settings
from toolhub.interceptors import (
    INTERCEPTOR_FAILED_MESSAGE,
    InterceptedCall,
    InterceptorFailed,
    configured_interceptors,
    interceptors_before,
)
from toolhub.models import CallStatus
from toolhub.storable import storable_text
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Tool
from toolhub.tools.secrets import SecretScrubber

if TYPE_CHECKING:
    from toolhub.pipeline import CallRequest

__all__ = ["CallRefused", "PreparedArguments", "prepared_arguments", "prepared_version"]


class CallRefused(Exception):
    """Why a request may not run: the status and message recorded, who refused it, and its audit data."""

    def __init__(
        self, status: CallStatus, message: str, *, actor: str = "policy", detail: str = "", **data: Any
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.actor = actor
        self.detail = detail
        self.data = data


@dataclass(frozen=True)
class PreparedArguments:
    """A request's arguments as they would run (validated, as stored, the interceptors' rewrites), or its refusal."""

    validated: dict[str, Any]
    stored: dict[str, Any]
    rewrites: list[EventSpec]
    refusal: CallRefused | None = None


def prepared_arguments(tool: Tool, request: "CallRequest", context: ToolContext) -> PreparedArguments:
    """Parse, validate and intercept: done once per request, as it runs the user's hooks.

    Governance does not change its outcome, so a call decided again after a governance change reuses it:
    the argument-error handler and the interceptors see each request once.
    """
    return prepared_version(tool, request.arguments, request.principal, context)


def prepared_version(tool: Tool, arguments: Any, principal: CallPrincipal, context: ToolContext) -> PreparedArguments:
    """``arguments`` (text or a mapping) through the intake every version of a call's arguments goes through.

    The model's request takes it once; an operator's edit takes it too (as the call's principal and
    context), so an edit can run nothing the model could not have asked for: nor name another tenant.
    """
    try:
        try:
            parsed = parse_arguments(arguments, tool)
            validated = validate_arguments(tool, parsed)
            stored = storable_arguments(tool, validated)
        except ArgumentsRefused as refused:
            # Its message quotes no sensitive value: they are replaced where it is made, before it is bounded.
            raise CallRefused(CallStatus.INVALID, str(refused)) from None
        validated, stored, rewrites = _intercepted_arguments(principal, tool, validated, stored, context)
        # Tenants come from the boundary: a version naming another tenant is refused whoever wrote it (the model,
        # an interceptor's rewrite, an operator's edit), before policy judges it.
        denial = tenant_argument_denial(validated, principal)
        if denial:
            raise CallRefused(CallStatus.DENIED, denial)
        return PreparedArguments(validated, stored, rewrites)
    except CallRefused as refusal:
        return PreparedArguments({}, {}, [], refusal)


def _intercepted_arguments(
    principal: CallPrincipal, tool: Tool, validated: dict[str, Any], stored: dict[str, Any], context: ToolContext
) -> tuple[dict[str, Any], dict[str, Any], list[EventSpec]]:
    """Run the ``before`` interceptors: refuse, or return the validated and stored arguments and the rewrites' events.

    Runs after the grants and schema validation, before the tenant-argument check and approval, so policy
    decides on what would run.
    """
    if not configured_interceptors():
        return validated, stored, []

    def revalidate(arguments: dict[str, Any]) -> dict[str, Any]:
        return storable_arguments(tool, validate_arguments(tool, arguments))

    seen = InterceptedCall(
        tool_name=tool.name,
        arguments=stored,
        tenant=principal.tenant,
        user_id=principal.user_id,
        agent_name=principal.agent_name,
        context=context.as_dict(),
    )
    try:
        outcome = interceptors_before(call=seen, revalidate=revalidate)
    except InterceptorFailed as failed:
        raise CallRefused(
            CallStatus.DENIED,
            INTERCEPTOR_FAILED_MESSAGE,
            actor=f"interceptor:{failed.name}",
            detail=_without_any_versions_values(failed.detail, tool, [stored, *failed.versions]),
            interceptor=failed.name,
            failed=True,
        ) from None
    if outcome.refusal:
        # An interceptor may quote what it refused (the built-in ArgumentPolicy does): never a sensitive value.
        refusal = _without_any_versions_values(outcome.refusal, tool, [stored, *outcome.versions])
        message = storable_text(refusal)[: toolhub_settings().MAX_STRING_LENGTH]
        name = outcome.refused_by
        raise CallRefused(CallStatus.DENIED, message, actor=f"interceptor:{name}", interceptor=name)
    events = [
        EventSpec(
            "call.arguments_rewritten",
            f"interceptor:{name}",
            {"interceptor": name, "diff": arguments_diff(before, after, tool.withheld({*before, *after}))},
        )
        for name, before, after in outcome.rewrites
    ]
    if not events:
        return validated, stored, events
    return validate_arguments(tool, outcome.arguments), outcome.arguments, events


def _without_any_versions_values(text: str, tool: Tool, versions: list[dict[str, Any]]) -> str:
    """``text`` without the withheld values of any version of the arguments the interceptors saw.

    An interceptor may rewrite a sensitive value (a card number typed with spaces, normalised), and a later one
    quote the rewritten value in its refusal or its traceback: the values as sent are not enough.
    """
    scrubbers = [SecretScrubber.for_arguments(tool, version) for version in versions]
    return SecretScrubber.merged(scrubbers).text(text)  # longest form first, whichever version it comes from
