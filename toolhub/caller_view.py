"""How callers without a tenant-wide role read back their own calls (as they were answered) and agents.

The pipeline answers a denied call of a tool the caller may not see exactly like a call of a tool that
does not exist (the REST API's 404, MCP's invalid-params error, the agent loop's unknown-tool message);
the row and its audit events keep the true refusal for operators and auditors (``has_tenant_wide_role``).
Read back by the caller (the call list, filter and detail, a run's calls, MCP's status tool), such a row
reads as it was answered: status ``invalid``, the unknown-tool message as its error, its refusal event a
``call.invalid`` with that message. Whether the caller may see the tool is asked now, with today's
grants, as the answer to the same request would be.

The platform's chains (and every event written before chains were kept per tenant) are shared by every
tenant, so the gaps between one tenant's sequence numbers there count the other tenants' events: an
event's place in such a chain (``chain``, ``seq``) is read only by those who cross tenants. A tenant's
staff read an event's place in its tenant's own chain, as the admin shows it (``own_chain_position``).
Callers without a tenant-wide role read neither its place nor its hashes (``prev_hash``, ``hash``):
they cannot verify a chain they may not read, and a masked event no longer matches its hash.
"""

import copy
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.db.models import Q

from toolhub.audit_hash import in_own_chain
from toolhub.authorization import CATALOGUE_PERMISSION, CallPrincipal, grants_preload
from toolhub.feedback import unknown_tool_message
from toolhub.governance import GovernanceHold, governance_scope
from toolhub.models import CallStatus, ToolCall
from toolhub.tenancy import has_tenant_wide_role, tenant_scope

__all__ = ["CallerView", "caller_view_of", "caller_view_for", "CHAIN_POSITION_FIELDS", "CHAIN_HASH_FIELDS"]

#: An audit event's place in its chain: read by those who cross tenants, and in its tenant's own chain by staff.
CHAIN_POSITION_FIELDS = ("chain", "seq")
#: Its links: read by staff (operators, auditors), who verify.
CHAIN_HASH_FIELDS = ("prev_hash", "hash")
#: Its id: one counter for every tenant's events, whose gaps count the platform's events; read by staff only
#: (who see it in the admin's addresses anyway), never by a member reading their own call.
EVENT_ID_FIELDS = ("id",)

#: Where a serializer's context (and its request) keeps the view of its request's user, made once per response.
_CONTEXT_KEY = "toolhub_caller_view"


class CallerView:
    """One reader's view of call rows: the truth for a tenant-wide role, the answers given for anyone else."""

    def __init__(self, user: Any) -> None:
        self.user = user
        self.sees_truth = has_tenant_wide_role(user)
        hidden = () if self.sees_truth else (*CHAIN_HASH_FIELDS, *EVENT_ID_FIELDS)
        self.hidden_event_fields = hidden if tenant_scope(user).everything else (*CHAIN_POSITION_FIELDS, *hidden)
        self._own_positions: bool | None = None  # whether staff read places in own chains (asked once)
        self._visible: dict[str, list[str]] = {}
        self._nameable: dict[str, frozenset[str]] = {}
        self._governance = GovernanceHold()  # what its authorizations read under (one read per response)
        self._preloaded = False
        #: Each call's answer as first read from its row (its shown copy reads as invalid).
        self._answers: dict[Any, str | None] = {}

    def unknown_tool_answer(self, call: ToolCall) -> str | None:
        """The unknown-tool message ``call`` reads with for this reader, or ``None`` when it reads as stored."""
        if call.pk not in self._answers:
            self._answers[call.pk] = self._answer(call)
        return self._answers[call.pk]

    def _answer(self, call: ToolCall) -> str | None:
        if self.sees_truth or call.status != CallStatus.DENIED:
            return None
        visible = self._visible_in(call.tenant)
        if call.tool_name in visible:
            return None
        return unknown_tool_message(call.tool_name, visible)

    def call(self, call: ToolCall) -> ToolCall:
        """``call`` as this reader sees it: itself, or a copy that reads as the answer the caller got."""
        answer = self.unknown_tool_answer(call)
        if answer is None:
            return call
        shown = copy.copy(call)
        shown.status, shown.error, shown.error_detail = CallStatus.INVALID, answer, ""
        return shown

    def events(self, call: ToolCall, events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """A call's serialized audit events as this reader sees them."""
        shown = [dict(event) for event in events]
        answer = self.unknown_tool_answer(call)
        for event in shown:
            own_place = self._reads_own_place(event)
            for name in self.hidden_event_fields:
                if not (own_place and name in CHAIN_POSITION_FIELDS):
                    event[name] = None
            if answer is None:
                continue
            if event.get("status") == CallStatus.DENIED:
                event["status"] = CallStatus.INVALID
            if event.get("event_type") == f"call.{CallStatus.DENIED}":
                event.update(event_type=f"call.{CallStatus.INVALID}", data={"reason": answer})
        return shown

    def _reads_own_place(self, event: Mapping[str, Any]) -> bool:
        """Whether this reader (tenant staff) reads ``event``'s place: it is in its tenant's own chain."""
        if not self.sees_truth or not in_own_chain(event.get("chain") or 0, event.get("tenant") or ""):
            return False
        if self._own_positions is None:
            from toolhub.audit_console import own_positions_shown

            self._own_positions = own_positions_shown()
        return self._own_positions

    def status_is(self, status: str, tenants: Iterable[str]) -> Q:
        """The rows of ``tenants`` that read with ``status`` for this reader: a filter that agrees with the view."""
        if self.sees_truth or status not in (CallStatus.DENIED, CallStatus.INVALID):
            return Q(status=status)
        callable_here = Q(pk__in=[])
        for tenant in tenants:
            callable_here |= Q(tenant=tenant, tool_name__in=self._visible_in(tenant))
        if status == CallStatus.DENIED:
            return Q(status=CallStatus.DENIED) & callable_here
        return Q(status=CallStatus.INVALID) | (Q(status=CallStatus.DENIED) & ~callable_here)

    def tools_seen(self, names: Iterable[str], *, tenant: str | None) -> set[str]:
        """Of ``names`` (an agent's tools), those this reader may see.

        Every one for the catalogue's roles; else those they may name on an agent in ``tenant`` (for a global
        agent, ``None``: in any of their tenants): the tools they may call, and the guides holding one
        (``nameable_tool_names``, what creating the agent accepted from them).
        """
        from toolhub.pipeline import nameable_tool_names

        if self.user.has_perm(CATALOGUE_PERMISSION):
            return set(names)
        tenants = [tenant] if tenant is not None else self._tenants()
        for each in tenants:
            if each not in self._nameable:
                with self._authorizing():
                    self._nameable[each] = frozenset(nameable_tool_names(self._principal(each)))
        seen = set().union(*(self._nameable[each] for each in tenants))
        return {name for name in names if name in seen}

    def _visible_in(self, tenant: str) -> list[str]:
        from toolhub.pipeline import visible_tool_names

        if tenant not in self._visible:
            with self._authorizing():
                self._visible[tenant] = visible_tool_names(self._principal(tenant))
        return self._visible[tenant]

    def _tenants(self) -> list[str]:
        """The reader's tenants (``""`` alone for one in none: they may use what no tenant's grant gives)."""
        return sorted(tenant_scope(self.user).tenants) or [""]

    def _principal(self, tenant: str) -> CallPrincipal:
        return CallPrincipal(user_id=self.user.pk, username=self.user.get_username(), tenant=tenant)

    @contextmanager
    def _authorizing(self) -> Iterator[None]:
        """Authorize under one governance read for the whole response, the grants of every tenant read in one query.

        Each tenant is still authorized with its own grants (``grants_preload`` loads each one's share); what a
        response costs no longer grows with the number of tenants its reader belongs to.
        """
        with governance_scope(hold=self._governance):
            if not self._preloaded:
                grants_preload(self._principal(each) for each in self._tenants())
                self._preloaded = True
            yield


def caller_view_of(context: dict[str, Any]) -> CallerView | None:
    """The view of a serializer context's request user (made once per context), or ``None`` without a request."""
    if _CONTEXT_KEY not in context:
        request = context.get("request")
        context[_CONTEXT_KEY] = caller_view_for(request) if request is not None else None
    return context[_CONTEXT_KEY]  # type: ignore[no-any-return]


def caller_view_for(request: Any) -> CallerView | None:
    """The view of ``request``'s user, one per request: its filter and its serializers read under one governance.

    A second view (the status filter's, then the serializers') read the governance again: a change in between had a
    response list under ``?status=invalid`` a row it showed ``denied``. ``None`` for an anonymous request.
    """
    if not hasattr(request, _CONTEXT_KEY):
        user = getattr(request, "user", None)
        setattr(request, _CONTEXT_KEY, CallerView(user) if user is not None and user.is_authenticated else None)
    return getattr(request, _CONTEXT_KEY)  # type: ignore[no-any-return]
