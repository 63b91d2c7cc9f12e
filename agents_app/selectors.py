"""Reads of agents, model providers and runs, cut down to the caller's tenants."""

import functools
import json
import uuid
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import BooleanField, Exists, ExpressionWrapper, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.db.models.lookups import IsNull
from django.utils import timezone

from agents_app.models import Agent, AgentRun, ModelProvider, RunStatus
from approvals.models import ApprovalRequest, ApprovalStatus
from toolhub.models import SETTLED_STATUSES, CallKind, CallStatus, ToolCall
from toolhub.prepared import prepared_cursor
from toolhub.rowread import converted
from toolhub.sagas.models import Rollback
from toolhub.sagas.selectors import OPERATE_PERMISSION
from toolhub.tenancy import has_tenant_wide_role, tenant_scope, visible_rows


def runs_visible_to(user: AbstractBaseUser) -> QuerySet[AgentRun]:
    """Staff (operators, auditors) see every run of their tenants; anyone else their own runs."""
    return visible_rows(AgentRun.objects.all(), user, tenant_wide=has_tenant_wide_role(user))


def runs_to_wake(*, idle_since: datetime, limit: int = 500) -> list[uuid.UUID]:
    """Runs nobody advanced since ``idle_since`` that ``run_advance`` would step now, longest idle first.

    Running or waiting, with no model step within its lease (a lapsed one is a lost step, taken again until
    ``RUN_MAX_LOST_STEPS`` in a row were lost: ``loop._step_lost``), every call of the current turn settled (the
    wake-up after the last one was lost: a worker killed between settling it and advancing the run, a message the
    broker dropped) and, when a call of that turn failed, no rollback under way that ``saga_rollback_on_failure``
    hands back (the failed call's own, or another of the run's saga while that call has none). The rest are left
    to what wakes them: a queued call is sent again by ``toolhub.sweeper.calls_redispatch_stale``, a held one by
    its decision, a lease by its step, a rollback by its compensations; each settle wakes the run, and a lost one
    of those is swept here.
    Only such runs, oldest first: a backlog of runs that cannot go on never fills the batch, and every run
    that can is reached within a bounded number of sweeps.
    """
    # Read through ``toolcall_open_of_turn`` (its condition is this one): with many idle runs, PostgreSQL plans this
    # NOT EXISTS as a hash anti join over every open call, and that index holds those only.
    open_calls = ToolCall.objects.filter(run_id=OuterRef("id"), turn=OuterRef("turn"), kind=CallKind.CALL).exclude(
        status__in=list(SETTLED_STATUSES)
    )
    # ``loop._begin_step`` waits, while its agent compensates on error and a call of the turn failed, for what
    # ``saga_rollback`` hands back: the rollback of that failed call, or, when there is none, any rollback of the
    # run's saga under way (one asked on demand; the failed call's own is asked once that one finished). Each check
    # is a scalar subquery (``_found``), run per candidate run through an index (``toolcall_run_turn``, the
    # rollbacks' ``failed_call`` index, ``rollback_unfinished``): an EXISTS under this NOT and OR may be planned as a
    # hashed subplan, which reads every row that could ever match (every rollback of a failed call joined to every
    # call: a seq scan of the calls every 60 s), however few runs are idle.
    failed = ToolCall.objects.filter(
        run_id=OuterRef("id"), turn=OuterRef("turn"), kind=CallKind.CALL, status=CallStatus.FAILED
    )
    own_open = (
        Rollback.objects.filter(
            failed_call__kind=CallKind.CALL, failed_call__run_id=OuterRef("id"), failed_call__turn=OuterRef("turn")
        )
        .annotate(open=ExpressionWrapper(Q(finished_at__isnull=True), output_field=BooleanField()))
        .order_by("-open")
        .values("open")[:1]
    )
    saga_open = Rollback.objects.filter(finished_at__isnull=True, saga__run_id=OuterRef("id"))
    rolling_back = (
        Q(agent__compensate_on_error=True)
        & Q(_found(failed))
        # the failed call's own rollback (TRUE while one is under way), else whether one of the saga is
        & Q(Coalesce(Subquery(own_open, output_field=BooleanField()), _found(saga_open)))
    )
    leased = Q(step_lease_until__gt=timezone.now())
    return list(
        AgentRun.objects.filter(status__in=[RunStatus.RUNNING, RunStatus.WAITING], updated_at__lt=idle_since)
        .exclude(leased)
        .exclude(Exists(open_calls))
        .exclude(rolling_back)
        .order_by("updated_at", "id")
        .values_list("id", flat=True)[:limit]
    )


def _found(rows: QuerySet[Any]) -> IsNull:
    """Whether ``rows`` holds a row, as a scalar subquery (``(SELECT id ... LIMIT 1) IS NOT NULL``), never NULL.

    Unlike an EXISTS, a scalar subquery is never turned into a hashed subplan: it runs per outer row, through the
    index its filter names.
    """
    return IsNull(Subquery(rows.order_by().values("pk")[:1]), False)


def run_children(run: AgentRun) -> QuerySet[AgentRun]:
    """The subagent runs ``run`` started (``agents_app.subagents``), oldest first; always of the run's tenant."""
    return AgentRun.objects.filter(parent_run=run, tenant=run.tenant).select_related("agent").order_by("created_at")


def run_may_operate(run: AgentRun, user: AbstractBaseUser) -> bool:
    """Whether ``user`` may act on ``run`` (retry it, roll it back): its own user, or an operator of its tenant.

    Seeing a run is not enough: auditors and developers read every run of their tenants and change nothing.
    """
    if run.user_id is not None and run.user_id == user.pk:
        return True
    return user.has_perm(OPERATE_PERMISSION) and tenant_scope(user).allows(run.tenant)


def run_pending_approval_ids(run: AgentRun) -> list[int]:
    """Ids of the approval requests the run waits on."""
    return list(
        ApprovalRequest.objects.filter(call__run_id=run.id, status=ApprovalStatus.PENDING)
        .order_by("id")
        .values_list("id", flat=True)
    )


def agents_visible_to(user: AbstractBaseUser) -> QuerySet[Agent]:
    """The agents ``user`` may list, read and run: those of their tenants, and the global ones."""
    scope = tenant_scope(user)
    agents = Agent.objects.select_related("tenant", "provider")
    if scope.everything:
        return agents
    return agents.filter(Q(tenant__isnull=True) | scope.q("tenant__slug"))


def agents_of_tenant(tenant: str) -> QuerySet[Agent]:
    """The agents a run of ``tenant`` (a slug; empty for none) may use: the tenant's own and the global ones."""
    agents = Agent.objects.select_related("tenant", "provider")
    if not tenant:
        return agents.filter(tenant__isnull=True)
    return agents.filter(Q(tenant__isnull=True) | Q(tenant__slug=tenant))


def agent_for_run(*, tenant: str, agent_id: int | None = None, name: str | None = None) -> Agent | None:
    """The agent a run of ``tenant`` asks for, by id or by name (never a guess between the two).

    A name is looked up among the tenant's agents first, then among the global ones.
    """
    agents = agents_of_tenant(tenant)
    if agent_id is not None:
        return agents.filter(pk=agent_id).first()
    if name is None:
        return None
    return agents.filter(name=name).order_by(F("tenant_id").asc(nulls_last=True)).first()


#: The agent fields ``agent_tools`` reads.
_AGENT_TOOL_FIELDS = ("tools", "tool_search", "group_switching")


def _run_agent_tools(run_id: uuid.UUID, name: str) -> list[Any] | None:
    """The run's agent's tool fields, if it is the agent ``name``.

    Every worker's re-check of a run's call reads this: its SQL is written once (``toolhub.rowread``)
    instead of compiled by the ORM each time.
    """
    key = AgentRun._meta.pk.get_db_prep_value(run_id, connection)
    with prepared_cursor(connection) as cursor:
        cursor.execute(_run_agent_tools_sql(), [key, name])
        row = cursor.fetchone()
    return None if row is None else converted(Agent, _AGENT_TOOL_FIELDS, row)


@functools.cache
def _run_agent_tools_sql() -> str:
    return _run_agent_tools_select(", ".join(_agent_tool_columns()), run="%s", name="%s")


def _agent_tool_columns() -> list[str]:
    q = connection.ops.quote_name
    return [f"a.{q(Agent._meta.get_field(name).column)}" for name in _AGENT_TOOL_FIELDS]


def _run_agent_tools_select(columns: str, *, run: str, name: str) -> str:
    """``SELECT columns`` of the agent of run ``run`` if it is named ``name`` (SQL values or parameters)."""
    q = connection.ops.quote_name

    def column(model: type[Any], field: str) -> str:
        return q(model._meta.get_field(field).column)

    return (
        f"SELECT {columns} FROM {q(AgentRun._meta.db_table)} r "
        f"JOIN {q(Agent._meta.db_table)} a ON a.{column(Agent, 'id')} = r.{column(AgentRun, 'agent')} "
        f"WHERE r.{column(AgentRun, 'id')} = {run} AND a.{column(Agent, 'name')} = {name}"
    )


@functools.cache
def run_call_agent_tools_sql(table: str) -> str:
    """The tools of a run call's agent as one JSON value, over the call row of ``table`` (NULL: not that run's agent).

    ``AgentToolsSql.expression`` for the core: a worker's claim returns it with the claimed call.
    """
    q = connection.ops.quote_name
    run, name = (f"{table}.{q(ToolCall._meta.get_field(field).column)}" for field in ("run_id", "agent_name"))
    delegators = f"r.{q(AgentRun._meta.get_field('delegated_by').column)}"
    value = "json_build_array(" + ", ".join([*_agent_tool_columns(), delegators]) + ")"
    return f"({_run_agent_tools_select(value, run=run, name=name)})"


def run_call_agent_tools(value: Any) -> frozenset[str] | None:
    """``run_call_agent_tools_sql``'s value as the agent's tools; None when it found no agent."""
    from toolhub.disclosure.visibility import expand_agent_tools

    if value is None:
        return None
    tools, tool_search, group_switching, *_ = json.loads(value) if isinstance(value, str) else value
    return expand_agent_tools(tools or (), tool_search=bool(tool_search), group_switching=bool(group_switching))


def run_call_delegated_by(value: Any) -> tuple[str, ...] | None:
    """``run_call_agent_tools_sql``'s value as the run's ``delegated_by``; None when it found no agent."""
    if value is None:
        return None
    *_, delegators = json.loads(value) if isinstance(value, str) else value
    return tuple(delegators or ())


def run_delegated_by(run_id: uuid.UUID) -> tuple[str, ...]:
    """The agents of the runs that started run ``run_id``, root first (``CallPrincipal.delegated_by``)."""
    found = AgentRun.objects.filter(id=run_id).values_list("delegated_by", flat=True).first()
    return tuple(found or ())


def providers_usable_by(tenant_id: int | None) -> QuerySet[ModelProvider]:
    """The enabled providers an agent of the tenant with id ``tenant_id`` (``None``: a global agent) may name."""
    providers = ModelProvider.objects.filter(enabled=True)
    if tenant_id is None:
        return providers.filter(tenant__isnull=True)
    return providers.filter(Q(tenant__isnull=True) | Q(tenant_id=tenant_id))


def agent_tools(name: str, *, tenant: str = "", run_id: uuid.UUID | None = None) -> frozenset[str]:
    """The tools an agent has now (empty when it no longer exists).

    The core asks with the call's agent name, tenant and run: the run names its agent exactly;
    without a run the name is resolved as a run of that tenant would resolve it.
    """
    from toolhub.disclosure.visibility import expand_agent_tools

    if run_id is not None:
        row = _run_agent_tools(run_id, name)
        if row is not None:
            return expand_agent_tools(row[0] or (), tool_search=row[1], group_switching=row[2])
    agent = (
        agents_of_tenant(tenant)
        .filter(name=name)
        .order_by(F("tenant_id").asc(nulls_last=True))
        .values_list("tools", "tool_search", "group_switching")
        .first()
    )
    if agent is None:
        return frozenset()
    return expand_agent_tools(agent[0] or (), tool_search=agent[1], group_switching=agent[2])


def run_retriers(run_id: uuid.UUID) -> list[int]:
    """The ids of everyone who retried run ``run_id`` or a run above it besides their user (``retried_by``).

    A retry sets the model's next calls in motion, and a parent's next calls start its subagents, whose calls are
    asked for in the user's name by whoever retried: a child takes its parent's retriers when it starts
    (``agents_app.subagents``; a parent is retried only once it failed, so no child of it is going then). One query
    of the link table, not of the run (a held call's step has the run locked and read already).
    """
    retriers = AgentRun.retried_by.through.objects.filter(agentrun_id=run_id).order_by("pk")
    return list(retriers.values_list("user_id", flat=True))
