"""Reads of the sagas: for the admin, the API and the conversation of a run."""

import uuid

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import F, IntegerField, Q, QuerySet, Value

from toolhub.audit_hash import canonical_json
from toolhub.models import AuditEvent, ToolCall, is_undoing, undoing
from toolhub.sagas.models import Compensation, CompensationStatus, Rollback, Saga, SagaStatus
from toolhub.selectors import displayed_arguments
from toolhub.tenancy import has_tenant_wide_role, visible_rows

#: Operators of sagas see every saga of their tenants, like staff (the permission toolhub.sagas.admin checks).
OPERATE_PERMISSION = "sagas.operate_saga"

__all__ = [
    "compensation_askers",
    "saga_id_problem",
    "sagas_visible_to",
    "compensations_visible_to",
    "saga_for_run",
    "sagas_needing_attention",
    "saga_compensations",
    "saga_audit_events",
    "rollback_note",
    "call_summary",
    "direct_saga_owner",
    "saga_id_unavailable",
]

#: The one answer to a saga id the caller may not use: it never tells whose it is, or that it exists.
SAGA_ID_UNAVAILABLE = "This saga id is not available; choose another (a new UUID, for instance)."


def saga_id_problem(key: str) -> str | None:
    """Why a client may not name a saga ``key`` (``None``: it may), checked wherever a client names a new one.

    A saga is read and rolled back at ``/api/v1/sagas/{saga_id}/``, one path segment that the server decodes
    before routing (``%2F`` too): an id holding ``/`` would open a saga its owner can never reach. Nor may it be
    ``.`` or ``..``: HTTP clients remove such dot segments from a path before sending it (RFC 3986 5.2.4).
    """
    if "/" in key:
        return "A saga id cannot contain '/': the saga's URLs (/api/v1/sagas/{saga_id}/) could not name it."
    if key in (".", ".."):
        return "A saga id cannot be '.' or '..': clients drop such a segment from the saga's URLs."
    return None


def sagas_visible_to(user: AbstractBaseUser) -> QuerySet[Saga]:
    """Staff (operators, auditors) see the sagas of their tenants; anyone else the sagas of their own steps."""
    if has_tenant_wide_role(user, OPERATE_PERMISSION):
        return visible_rows(Saga.objects.all(), user, tenant_wide=True)
    own = visible_rows(Saga.objects.all(), user, tenant_wide=False, owner_field="compensations__step_call__user")
    opened = visible_rows(Saga.objects.all(), user, tenant_wide=False, owner_field="created_by")
    # One subquery of a UNION, not two ORed: PostgreSQL cannot join ORed subqueries, so it walked every saga by the
    # list's order and filtered each (alice's one saga among 3,000 others read 3,001); the UNION is joined to the
    # sagas by id, reading the requester's own (review m).
    return Saga.objects.filter(pk__in=own.order_by().values("pk").union(opened.order_by().values("pk")))


def direct_saga_owner(key: str, *, tenant: str) -> int | None:
    """The owner of ``tenant``'s direct saga ``key``: who opened it over the API, else who made its first step."""
    opened_by = Saga.objects.filter(key=key, tenant=tenant).values_list("created_by_id", flat=True).first()
    return _owner(opened_by, _first_call(key, tenant) if opened_by is None else None)


def _owner(opened_by: int | None, first_call: tuple[int | None] | None) -> int | None:
    return opened_by if opened_by is not None else (first_call[0] if first_call is not None else None)


def _first_call(key: str, tenant: str) -> tuple[int | None] | None:
    """The user of ``tenant``'s first call carrying saga id ``key`` (as a 1-tuple), or ``None`` when none does."""
    calls = ToolCall.objects.filter(saga_id=key, tenant=tenant)
    return calls.order_by("created_at", "id").values_list("user_id").first()


def saga_id_unavailable(key: str, *, tenant: str, user_id: int | None) -> bool:
    """Whether a direct call of ``user_id`` in ``tenant`` may not carry saga id ``key``.

    A caller starts a saga with an unused id, or adds steps to a direct saga they own; never to a run's
    saga (a run rolls back through its own endpoint) or a colleague's: a step would make them one of its
    owners, and a failed one rolls the saga back. Saga ids are the tenant's own: what other tenants call
    their sagas is neither read nor told. Two reads for a saga id in use (its saga, its first call), and the
    run check for an id that is a UUID.
    """
    saga = Saga.objects.filter(key=key, tenant=tenant).values_list("run_id", "created_by_id").first()
    if saga is not None and saga[0] is not None:
        return True
    if _names_a_run(key, tenant):
        return True
    first = _first_call(key, tenant)
    if saga is None and first is None:
        return False
    return user_id is None or _owner(saga[1] if saga is not None else None, first) != user_id


def _names_a_run(key: str, tenant: str) -> bool:
    """Whether ``key`` is the id of a run of ``tenant`` (its saga's key): made calls, or an app keeps it."""
    from toolhub.signals import saga_key_reserved

    try:
        run_id = uuid.UUID(key)
    except ValueError:
        return False
    if ToolCall.objects.filter(run_id=run_id, tenant=tenant).exists():
        return True
    return any(reserved for _, reserved in saga_key_reserved.send(sender=Saga, key=key, tenant=tenant))


def compensations_visible_to(user: AbstractBaseUser) -> QuerySet[Compensation]:
    """The compensations of the sagas ``user`` may see."""
    return Compensation.objects.filter(saga__in=sagas_visible_to(user))


def saga_for_run(run_id: uuid.UUID, *, visible_to: AbstractBaseUser | None = None) -> Saga | None:
    """The saga of an agent run, if one of its steps was compensable (and, given a user, they may see it)."""
    sagas = sagas_visible_to(visible_to) if visible_to is not None else Saga.objects.all()
    return sagas.filter(run_id=run_id).first()


def sagas_needing_attention(*, visible_to: AbstractBaseUser | None = None) -> QuerySet[Saga]:
    """Sagas with a compensation that failed, whose outcome is unknown, or that waits for an operator."""
    sagas = sagas_visible_to(visible_to) if visible_to is not None else Saga.objects.all()
    return sagas.filter(status=SagaStatus.NEEDS_ATTENTION).order_by("-updated_at")


def saga_compensations(saga: Saga) -> QuerySet[Compensation]:
    """A saga's compensations in the order they are run: newest step first."""
    return saga.compensations.select_related("step_call", "call").order_by("-sequence")


def saga_audit_events(saga: Saga) -> QuerySet[AuditEvent]:
    """The audit events of a saga's steps, of the calls made undoing them, and of the saga itself.

    The calls made undoing a step: its compensation's own, and those made on its behalf (``is_undoing``: an agentic
    compensation's inner calls name the step they ``compensate``), what its model chose and ran included. Every one,
    uncut: their ids are read first (two indexed statements; a saga's undoing calls are bounded by its steps, each
    compensation's ``max_calls`` and ``SAGA_MAX_ATTEMPTS``), and a caller shows a page of the events and says when it
    is cut (an auditor never reads a cut trail as whole). Not one statement of nested subqueries: under statistics
    older than the rows (a fresh saga's calls), PostgreSQL ran the calls' part once per event read, for minutes.
    The undoing calls are read on ``toolcall_compensates`` (by their steps), not among the tenant's calls since the
    saga began: a saga opened long ago read every call its tenant made since, on each page (review e).
    """
    compensations = list(saga.compensations.values_list("step_call_id", "call_id"))
    steps = [str(step) for step, _ in compensations]
    call_ids = [*(step for step, _ in compensations), *(call for _, call in compensations if call)]
    if steps:
        call_ids += (
            # ``toolcall_compensates``: the calls naming these steps, of the saga's tenant. Unordered, with no time
            # bound: under statistics older than the rows, either drew the planner to the tenant's calls by time.
            ToolCall.objects.filter(context__compensates__in=steps, tenant=saga.tenant)
            .filter(undoing())
            .order_by()
            .values_list("id", flat=True)
        )
    events = Q(call_id__in=call_ids)
    if saga.run_id is not None:
        events |= Q(run_id=saga.run_id, event_type__startswith="saga.")
    return AuditEvent.objects.filter(events).order_by("created_at", "id")


def call_summary(call: ToolCall) -> str:
    """``tool({"arg": value})`` with sensitive values redacted, for notes and the admin."""
    return f"{call.tool_name}({canonical_json(displayed_arguments(call))})"


def rollback_note(rollback: Rollback) -> str:
    """What the model reads after a rollback: which step failed and what became of each completed step."""
    lines = []
    failed = rollback.failed_call
    if failed is not None:
        lines.append(
            f"Step {call_summary(failed)} failed ({failed.error or failed.status}). toolhub rolled back the steps "
            "completed before it, newest first:"
        )
    else:
        lines.append(f"The completed steps were rolled back at the request of {rollback.requested_by}, newest first:")
    for compensation in rollback.compensations.select_related("step_call").order_by("-sequence"):
        step = call_summary(compensation.step_call)
        status = compensation.status
        if status == CompensationStatus.SUCCEEDED:
            lines.append(f"- {step}: rolled back (by {compensation.tool_name}).")
        elif status == CompensationStatus.HELD:
            lines.append(f"- {step}: its own outcome is unknown; an operator decides whether to roll it back.")
        elif status == CompensationStatus.UNKNOWN:
            lines.append(f"- {step}: the rollback was interrupted, its outcome is unknown; an operator was alerted.")
        elif status == CompensationStatus.RESOLVED:
            lines.append(f"- {step}: resolved by an operator ({compensation.resolution_note or 'no note'}).")
        else:
            lines.append(
                f"- {step}: NOT rolled back: {compensation.tool_name} failed after {compensation.attempts} "
                f"attempt(s) ({compensation.last_error or status}); an operator was alerted."
            )
    return "\n".join(lines)


def compensation_askers(call: ToolCall) -> list[int]:
    """The people who asked for compensation ``call``: who rolled back, who retried it or chose to compensate its step.

    A compensation runs in the name of the user whose step it undoes, yet others asked for it (an operator rolling
    back a member's saga, another retrying it after a rejection or compensating a held step): four eyes bar them all
    from deciding it, so no retry lets one person both ask for and approve it. The rollback keeps who asked as a user
    (``Rollback.asked_by``), not as the name its ``requested_by`` text gives: a compensation's approval may be asked
    for long after (each waits for the newer ones), when that name is someone else's; each retrier is kept on the
    compensation (``Compensation.retried_by``). A step still running when a rollback is asked is compensated once it
    succeeds, filed under the newest rollback by then (``plan_compensation``'s ``late_for``): every rollback asked
    between the step's start and that planning asked for it too, so each one's person is barred as well. An
    automatic rollback (a failed step, an agent) and the sweeper's retries add nobody.
    """
    step_id = (call.context or {}).get("compensates")  # an agentic compensation's inner calls name it too
    if not is_undoing(call.kind, call.context) or not step_id:
        return []
    own = (
        Compensation.objects.filter(step_call_id=step_id, step_call__tenant=call.tenant)
        .order_by()
        .values_list("rollback__asked_by", "retried_by")
    )  # one row per retrier (one with none)
    while_it_ran = (
        Rollback.objects.filter(
            saga__compensations__step_call_id=step_id,
            saga__tenant=call.tenant,
            requested_at__gt=F("saga__compensations__step_call__created_at"),
            requested_at__lte=F("saga__compensations__created_at"),
            asked_by__isnull=False,
        )
        .order_by()
        .values_list("asked_by", Value(None, output_field=IntegerField()))
    )
    rows = own.union(while_it_ran, all=True)  # one query
    return list(dict.fromkeys(pk for row in rows for pk in row if pk is not None))
