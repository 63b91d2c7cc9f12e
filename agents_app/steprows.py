"""The loop step's reads of its run and its turn's calls, with SQL built once per process instead of by the ORM.

A step locks the run and reads it with its agent, the agent's provider and the run's user, whether
the run has a saga and the governance stamp: one statement; then the calls of its turn, each with
whether it left an artifact.
Rows become model instances as the ORM would make them (``toolhub.rowread``), with the related ones
already attached, so the step reads nothing more of them.
"""

import functools
import uuid

from django.db import connection
from django.db.models import Model

from agents_app.models import Agent, AgentRun, ModelProvider
from toolhub.governance import GOVERNANCE_STAMP_SQL
from toolhub.models import CallKind, ToolCall, ToolCallArtifact
from toolhub.prepared import prepared_cursor
from toolhub.rowread import columns_sql, instance_of, instances_of, lock_clause
from toolhub.sagas.models import Saga

__all__ = ["locked_run", "turn_calls"]


def locked_run(run_id: uuid.UUID) -> AgentRun | None:
    """The run locked until the transaction ends, with ``agent``, ``agent.provider``, ``user`` and ``has_saga``.

    Also ``governance_stamp``, read in the same statement: the step's disclosure decides under it instead
    of reading it again (``toolhub.governance.governance_scope(stamp=)``). Read at the statement's start, it may
    predate a wait for the run's lock by that wait, as a separate read may predate a change right after it:
    it decides what the model is shown, and every call is still decided and re-checked under its own stamp.

    A child run's parent is locked first (FOR NO KEY UPDATE, in the same statement: the parent's lock is taken by
    the statement's filter, the run's once its row passed it). Locks on a run tree are taken parent before child: a
    cancellation holds the parent and waits for each child (``cancelling._locked_tree``), and a child's end, which
    settles its parent's call and puts on its parent's board (``subagent_run_ended``), would otherwise hold the
    child and wait for the parent: a deadlock that PostgreSQL breaks by failing one of them.
    """
    sql = _locked_run_sql()
    key = AgentRun._meta.pk.get_db_prep_value(run_id, connection)
    with prepared_cursor(connection) as cursor:
        cursor.execute(sql, [str(run_id), key])
        row = cursor.fetchone()
    if row is None:
        return None
    has_saga, stamp, *values = row
    run, agent, provider, user = instances_of(_run_models(), values)
    agent._state.fields_cache["provider"] = provider
    run._state.fields_cache["agent"] = agent
    run._state.fields_cache["user"] = user
    run.has_saga = bool(has_saga)
    run.governance_stamp = stamp
    return run


@functools.cache
def _run_models() -> tuple[type[Model], ...]:
    """The models the locked read joins, in its column order."""
    from django.contrib.auth import get_user_model

    return (AgentRun, Agent, ModelProvider, get_user_model())


@functools.cache
def _locked_run_sql() -> str:
    user_model = _run_models()[-1]
    q = connection.ops.quote_name

    def column(model: type[Model], name: str) -> str:
        return q(model._meta.get_field(name).column)

    columns = ", ".join(columns_sql(model, alias) for model, alias in zip(_run_models(), "rapu", strict=True))
    pk = {model: q(model._meta.pk.column) for model in _run_models()}
    return (
        f"SELECT EXISTS (SELECT 1 FROM {q(Saga._meta.db_table)} s WHERE s.{column(Saga, 'key')} = %s), "
        f"{GOVERNANCE_STAMP_SQL}, {columns} FROM {q(AgentRun._meta.db_table)} r "
        f"JOIN {q(Agent._meta.db_table)} a ON a.{pk[Agent]} = r.{column(AgentRun, 'agent')} "
        f"JOIN {q(ModelProvider._meta.db_table)} p ON p.{pk[ModelProvider]} = a.{column(Agent, 'provider')} "
        f"LEFT JOIN {q(user_model._meta.db_table)} u ON u.{pk[user_model]} = r.{column(AgentRun, 'user')} "
        f"WHERE r.{pk[AgentRun]} = %s{_parent_locked_first('r')}{lock_clause('r')}"
    )


def _parent_locked_first(alias: str) -> str:
    """The filter that locks the run's parent before the run (``locked_run``); "" where rows are not locked."""
    if not connection.features.has_select_for_no_key_update:
        return ""
    q = connection.ops.quote_name
    table, pk, parent = (
        q(AgentRun._meta.db_table),
        q(AgentRun._meta.pk.column),
        q(AgentRun._meta.get_field("parent_run").column),
    )
    # Not pulled up into a join (a sub-select with a locking clause never is): evaluated as the row is filtered.
    return (
        f" AND ({alias}.{parent} IS NULL OR EXISTS "
        f"(SELECT 1 FROM {table} pr WHERE pr.{pk} = {alias}.{parent} FOR NO KEY UPDATE))"
    )


def turn_calls(run: AgentRun) -> list[ToolCall]:
    """The calls of the run's current turn in the model's order, each with ``has_artifacts``."""
    key = ToolCall._meta.get_field("run_id").get_db_prep_value(run.id, connection)
    with prepared_cursor(connection) as cursor:
        cursor.execute(_turn_calls_sql(), [key, CallKind.CALL, run.turn])
        rows = cursor.fetchall()
    calls = []
    for *values, has_artifacts in rows:
        call = instance_of(ToolCall, values)
        call.has_artifacts = bool(has_artifacts)
        calls.append(call)
    return calls


@functools.cache
def _turn_calls_sql() -> str:
    q = connection.ops.quote_name
    artifacts, calls = q(ToolCallArtifact._meta.db_table), q(ToolCall._meta.db_table)
    artifact_call = q(ToolCallArtifact._meta.get_field("call").column)
    return (
        f"SELECT {columns_sql(ToolCall, 'c')}, "
        f"EXISTS (SELECT 1 FROM {artifacts} t WHERE t.{artifact_call} = c.{q('id')}) "
        f"FROM {calls} c WHERE c.{q('run_id')} = %s AND c.{q('kind')} = %s AND c.{q('turn')} = %s "
        f"ORDER BY c.{q('position')}"
    )
