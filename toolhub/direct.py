"""Direct governed calls from outside the agent loop: the REST API (``POST /api/v1/calls/``) and MCP clients.

The caller is authenticated; this module turns them into the pipeline's principal and context (the
tenant and user come from the boundary, never from the client), applies the client's
``Idempotency-Key``, and sends the call through ``tool_call_request`` like any other.
"""

import hashlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import FieldError, ObjectDoesNotExist
from django.db import IntegrityError, transaction

from toolhub.arguments import MAX_NESTING
from toolhub.audit_hash import canonical_json
from toolhub.authorization import CallPrincipal
from toolhub.conf import toolhub_settings
from toolhub.dispatch import EAGER_WORKER
from toolhub.exceptions import ToolhubError
from toolhub.json_intake import JSONRefused, json_loads_checked, json_value_problem
from toolhub.models import CallIdempotencyKey, CallKind, CallStatus, Tenant, TenantMembership, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request, visible_tool_names
from toolhub.tenancy import tenant_scope, tenant_scope_now
from toolhub.tools.context import RESERVED_CONTEXT_KEYS, ToolContext

__all__ = [
    "WAITING_STATUSES",
    "DirectCall",
    "DirectCallError",
    "CallerContextError",
    "IdempotencyConflictError",
    "NoLongerMemberError",
    "NO_LONGER_A_MEMBER",
    "answering_principal",
    "caller_principal",
    "client_context",
    "direct_call_request",
    "call_wait",
    "call_wait_async",
    "call_status_of",
    "call_approval_id",
    "call_hidden_from",
    "ran_here",
    "TENANT_HEADER",
    "not_a_member",
    "tenant_named",
]

#: A call in one of these statuses may still change on its own or by a decision; ``?wait=`` follows it.
WAITING_STATUSES = frozenset(
    {CallStatus.PENDING_APPROVAL, CallStatus.QUEUED, CallStatus.RUNNING, CallStatus.AWAITING_RESULT}
)

_MAX_KEY_LENGTH = 255
_MAX_SAGA_ID_LENGTH = 100


class DirectCallError(ToolhubError):
    """A direct call was refused before it reached the pipeline (nothing recorded, nothing run)."""


class CallerContextError(DirectCallError):
    """The request's context, tenant, saga id or idempotency key cannot be used as given."""


class IdempotencyConflictError(DirectCallError):
    """The idempotency key was used before with another request."""

    def __init__(self, message: str, *, call_id: uuid.UUID | None) -> None:
        super().__init__(message)
        self.call_id = call_id


class NoLongerMemberError(DirectCallError):
    """The caller left the call's tenant while the call was followed: its outcome is no longer theirs to read."""


#: What such a caller is told, on every channel: no tenant, no call id, no status or outcome.
NO_LONGER_A_MEMBER = "You are no longer a member of the tenant this call was made in; its outcome is not shown."


@dataclass(frozen=True)
class DirectCall:
    """The call a direct request made, and whether it is an earlier request's (same idempotency key)."""

    call: ToolCall
    replayed: bool = False


#: The header MCP clients (and REST clients, as MCP's) name their tenant in.
TENANT_HEADER = "X-Toolhub-Tenant"


def tenant_named(*, body: object = None, query: str | None = None, header: str | None = None) -> str | None:
    """The tenant a request names, in its body (``"tenant"``), its query (``?tenant=``) or ``X-Toolhub-Tenant``.

    Every entrance reads all three (REST's writes, MCP): one that read only its own let a tenant named elsewhere
    go unread, and the call ran in the caller's only tenant, not the one named. A tenant named anywhere is asked for
    (``caller_principal`` refuses one the caller is no member of); two places naming different ones are refused,
    saying where, never what (repeated values arrive joined, ``acme, globex``, which names no tenant). A body's
    tenant that is no string (a run's ``context`` is any JSON object) is refused as such, never compared.
    """
    if body is not None and not isinstance(body, str):
        raise CallerContextError("The tenant must be a tenant's slug (a string).")
    named = [
        (where, value)
        for where, value in (("the body's tenant", body), ("?tenant=", query), (f"the {TENANT_HEADER} header", header))
        if value
    ]
    if len({value for _, value in named}) > 1:
        raise CallerContextError(f"{' and '.join(where for where, _ in named)} name different tenants; name one.")
    return named[0][1] if named else None


def not_a_member(tenant: str) -> str:
    """What a caller naming ``tenant`` is told when it is not theirs: one text for another's and a missing one."""
    return f"You are not a member of tenant {tenant[:100]!r}; give the slug of one of yours."


def caller_principal(user: AbstractBaseUser, *, tenant: str | None = None) -> CallPrincipal:
    """The principal of an authenticated caller: their only tenant, or ``tenant`` when they belong to it."""
    if tenant:
        if not tenant_scope(user).allows(tenant) or not Tenant.objects.filter(slug=tenant).exists():
            raise CallerContextError(not_a_member(tenant))
        chosen = tenant
    else:
        tenants = sorted(TenantMembership.objects.filter(user_id=user.pk).values_list("tenant__slug", flat=True))
        if len(tenants) > 1:
            raise CallerContextError(f"You belong to several tenants; say which with 'tenant' ({', '.join(tenants)}).")
        chosen = tenants[0] if tenants else ""
    return CallPrincipal(user_id=user.pk, username=user.get_username(), tenant=chosen)


def answering_principal(user: AbstractBaseUser, call: ToolCall) -> CallPrincipal:
    """The principal ``call``'s answer is given to: its caller, in the call's tenant, if they still belong to it.

    Asked after the call was made and, if so, followed (REST ``?wait=``, MCP's ``tools/call``), with the request's
    scope: whoever waited read it again afterwards (``tenant_scope_now``): ``direct_call_request`` when the call ran
    in this process, the follow after its wait. So a caller removed meanwhile (or deactivated: an inactive account
    belongs to no tenant and owns nothing it may read) is refused the answer (``NoLongerMemberError``), as reading
    the call back would (a 404), with one text that tells the caller why and nothing of the tenant or the call.
    An answer given without a wait reads no rights twice.
    """
    if not getattr(user, "is_active", True) or (call.tenant and not tenant_scope(user).allows(call.tenant)):
        raise NoLongerMemberError(NO_LONGER_A_MEMBER)
    return CallPrincipal(user_id=user.pk, username=user.get_username(), tenant=call.tenant)


def client_context(values: Mapping[str, Any] | None, *, strict: bool) -> dict[str, Any]:
    """The context keys a client may set (``TOOLHUB["CLIENT_CONTEXT_KEYS"]``); reserved keys are refused.

    ``strict`` (the REST API) refuses keys outside the allow list too; MCP's ``_meta`` carries the
    protocol's own keys (progress tokens, trace headers), so there they are dropped instead.
    """
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise CallerContextError("The context must be an object of string keys.")
    reserved = sorted(str(key) for key in values if key in RESERVED_CONTEXT_KEYS)
    if reserved:
        raise CallerContextError(
            f"Context keys {', '.join(reserved)} are set by toolhub from your authentication, never by a client."
        )
    allowed = set(toolhub_settings().CLIENT_CONTEXT_KEYS)
    unknown = sorted(str(key)[:50] for key in values if key not in allowed)
    if unknown and strict:
        raise CallerContextError(
            f"Context keys {', '.join(unknown)} are not accepted; allowed: {', '.join(sorted(allowed)) or 'none'}."
        )
    kept = {key: value for key, value in values.items() if key in allowed}
    for key, value in kept.items():
        if not isinstance(value, str | int | float | bool) or (isinstance(value, str) and len(value) > 500):
            raise CallerContextError(f"Context key {key} takes a string (up to 500 characters), a number or a boolean.")
        # The call and its audit event store the value: refused here whatever carried it (a form field, MCP _meta).
        refused = json_value_problem(value, max_depth=0, path=str(key))
        if refused is not None:
            raise CallerContextError(
                f"{refused.about('The context')}. Remove it or write it out as text; nothing was done."
            )
    return kept


def direct_call_request(
    *,
    user: AbstractBaseUser,
    tool_name: str,
    arguments: str | Mapping[str, Any] | None,
    context: Mapping[str, Any] | None = None,
    tenant: str | None = None,
    saga_id: str = "",
    idempotency_key: str = "",
    kind: CallKind = CallKind.API,
    client: Mapping[str, Any] | None = None,
    strict_context: bool = True,
    call_id: uuid.UUID | None = None,
) -> DirectCall:
    """Request a governed call for ``user``, once per idempotency key; return the call (an earlier one on replay).

    The key is bound to a fingerprint of the request: the same key with the same request returns the
    first call, with another request raises :class:`IdempotencyConflictError`. The key's row is
    inserted before the call in the same transaction, so of two concurrent submits one inserts and
    the other waits on the unique index, then answers with the first's call.

    A call this process ran at commit (eager tasks) was waited for here, for as long as its tool took: the caller's
    rights are read again afterwards (``tenant_scope_now``), as a follow does after its wait, so its answer
    (``answering_principal``) is given to the rights of now.
    """
    made = _direct_call(
        user=user,
        tool_name=tool_name,
        arguments=arguments,
        context=context,
        tenant=tenant,
        saga_id=saga_id,
        idempotency_key=idempotency_key,
        kind=kind,
        client=client,
        strict_context=strict_context,
        call_id=call_id,
    )
    if ran_here(made):
        tenant_scope_now(user)
    return made


def ran_here(made: DirectCall) -> bool:
    """Whether ``made``'s call was run by this request, at its commit: it is no longer waiting (no replay)."""
    return not made.replayed and made.call.worker == EAGER_WORKER and made.call.status not in WAITING_STATUSES


def _direct_call(
    *,
    user: AbstractBaseUser,
    tool_name: str,
    arguments: str | Mapping[str, Any] | None,
    context: Mapping[str, Any] | None,
    tenant: str | None,
    saga_id: str,
    idempotency_key: str,
    kind: CallKind,
    client: Mapping[str, Any] | None,
    strict_context: bool,
    call_id: uuid.UUID | None,
) -> DirectCall:
    principal = caller_principal(user, tenant=tenant)
    values = client_context(context, strict=strict_context)
    saga_id = _checked_saga_id(saga_id, principal, user)
    key = _checked_key(idempotency_key)
    boundary = {"tenant": principal.tenant, "user": principal.username, "user_id": principal.user_id}
    request = CallRequest(
        tool_name=tool_name if isinstance(tool_name, str) else str(tool_name),
        arguments=arguments,
        principal=principal,
        context=ToolContext.layered(values, boundary=boundary),
        saga_id=saga_id,
        kind=kind,
        client=client,
        call_id=call_id,
    )
    if not key:
        return DirectCall(tool_call_request(request=request))
    fingerprint = _fingerprint(request, values)
    earlier = _earlier(principal, user, key, fingerprint)
    if earlier is not None:
        return earlier
    try:
        with transaction.atomic():
            claim = CallIdempotencyKey.objects.create(
                tenant=principal.tenant, user=user, key=key, fingerprint=fingerprint
            )
            call = tool_call_request(request=request)
            CallIdempotencyKey.objects.filter(pk=claim.pk).update(call=call)
    except IntegrityError:
        # Another request with this key committed first (we waited for it on the unique index).
        earlier = _earlier(principal, user, key, fingerprint)
        if earlier is None:
            raise
        return earlier
    return DirectCall(call)


def _earlier(principal: CallPrincipal, user: AbstractBaseUser, key: str, fingerprint: str) -> DirectCall | None:
    claim = (
        CallIdempotencyKey.objects.select_related("call").filter(tenant=principal.tenant, user=user, key=key).first()
    )
    if claim is None:
        return None
    if claim.fingerprint != fingerprint:
        raise IdempotencyConflictError(
            "This Idempotency-Key was used with another request (tool, arguments, context or saga id); "
            "use a new key for a new request.",
            call_id=claim.call_id,
        )
    assert claim.call is not None  # set in the transaction that created the claim
    return DirectCall(claim.call, replayed=True)


def _checked_key(key: str) -> str:
    if not isinstance(key, str):
        raise CallerContextError("The idempotency key must be a string.")
    key = key.strip()
    if len(key) > _MAX_KEY_LENGTH:
        raise CallerContextError(f"The idempotency key is longer than {_MAX_KEY_LENGTH} characters.")
    return key


def _checked_saga_id(saga_id: str, principal: CallPrincipal, user: AbstractBaseUser) -> str:
    """A saga id is the caller's name for a group of their calls: unused, or naming a direct saga they own.

    An unused id is claimed here, before the call is written: its saga is opened for the caller on the unique
    index of the tenant's keys. Of two colleagues' first steps racing under one new id, one opens the saga and
    the other finds it someone else's and is refused, where both used to join it. Ids are per tenant: another
    tenant's saga of the same name is another saga, never consulted.
    """
    if not saga_id:
        return ""
    if not isinstance(saga_id, str) or len(saga_id) > _MAX_SAGA_ID_LENGTH or not saga_id.strip():
        raise CallerContextError(f"A saga id is a non-empty string of at most {_MAX_SAGA_ID_LENGTH} characters.")
    from toolhub.sagas.models import Saga
    from toolhub.sagas.selectors import SAGA_ID_UNAVAILABLE, saga_id_problem, saga_id_unavailable

    problem = saga_id_problem(saga_id)
    if problem:
        raise CallerContextError(problem)
    from toolhub.sagas.services import SagaKeyTakenError, saga_open

    def unavailable() -> bool:
        return saga_id_unavailable(saga_id, tenant=principal.tenant, user_id=principal.user_id)

    if unavailable():
        raise CallerContextError(SAGA_ID_UNAVAILABLE)
    if not Saga.objects.filter(key=saga_id, tenant=principal.tenant).exists():
        try:
            saga_open(key=saga_id, tenant=principal.tenant, user=user, actor=f"user:{user.get_username()}")
        except SagaKeyTakenError:
            # in use now: by the caller's own earlier steps (no saga row yet), or claimed by someone meanwhile
            if unavailable():
                raise CallerContextError(SAGA_ID_UNAVAILABLE) from None
    return saga_id


def _fingerprint(request: CallRequest, context: Mapping[str, Any]) -> str:
    arguments: Any = request.arguments
    if isinstance(arguments, str):
        try:
            # parsed as parse_arguments will (text it refuses is fingerprinted as sent, the call recorded invalid)
            arguments = json_loads_checked(arguments, max_depth=MAX_NESTING)
        except JSONRefused:
            pass
    material = {
        "tool": request.tool_name,
        "arguments": arguments,
        "context": dict(context),
        "saga_id": request.saga_id,
        "tenant": request.principal.tenant,
        "kind": str(request.kind),
    }
    try:
        text = canonical_json(material)
    except (TypeError, ValueError):
        text = repr(material)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def call_wait(*, call: ToolCall, seconds: float) -> ToolCall:
    """Follow ``call`` for up to ``seconds`` (cut to ``CALL_WAIT_MAX_SECONDS``) until it leaves the waiting states.

    Polls the row's status (one indexed read, backing off to 1 s) outside any transaction, so a
    decision or a worker's write made meanwhile is seen; returns the fresh row either way.
    """
    status = call.status
    for pause in _wait_pauses(seconds):
        if status not in WAITING_STATUSES:
            break
        time.sleep(pause)
        status = call_status_of(call.pk) or status
    return ToolCall.objects.get(pk=call.pk)


async def call_wait_async(
    *, call_id: uuid.UUID, status: str, seconds: float, read: Callable[[uuid.UUID], Awaitable[str | None]]
) -> None:
    """``call_wait`` for an event loop: it sleeps in the loop, and a thread is held only by each ``read``.

    A server whose requests share a few threads (MCP) would otherwise let one caller's waits hold them all.
    """
    for pause in _wait_pauses(seconds):
        if status not in WAITING_STATUSES:
            return
        await anyio.sleep(pause)
        status = await read(call_id) or status


def call_status_of(call_id: uuid.UUID) -> str | None:
    """A call's current status (one indexed read), or None if it is gone."""
    return ToolCall.objects.filter(pk=call_id).values_list("status", flat=True).first()


def _wait_pauses(seconds: float) -> Iterator[float]:
    """The pauses of a follow lasting up to ``seconds`` (cut to ``CALL_WAIT_MAX_SECONDS``): 50 ms doubling to 1 s."""
    limit = min(max(float(seconds), 0.0), toolhub_settings().CALL_WAIT_MAX_SECONDS)
    deadline = time.monotonic() + limit
    pause = 0.05
    while (left := deadline - time.monotonic()) > 0:
        yield min(pause, left)
        pause = min(pause * 2, 1.0)


def call_approval_id(call: ToolCall) -> int | None:
    """The id of the approval request of ``call``, if it has one.

    The approvals app's reverse one-to-one, looked up by name so the core imports no app.
    """
    try:
        request = type(call).objects.select_related("approval_request").get(pk=call.pk).approval_request
    except (AttributeError, ObjectDoesNotExist, FieldError):
        return None
    return getattr(request, "pk", None)


def call_hidden_from(call: ToolCall, principal: CallPrincipal) -> bool:
    """Whether a refused call's tool must be answered as unknown: the caller may not see it at all."""
    return call.tool_name not in visible_tool_names(principal)
