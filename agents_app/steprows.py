"""The loop step's read of its run, with the SQL built once per process instead of by the ORM on every step.

A step locks the run and reads it with its agent, the agent's provider and the run's user, and whether
the run has a saga: one statement. Rows become model instances as the ORM would make them (each
field's database converters applied, ``from_db``), with the related ones already attached, so the step
reads nothing more of them.
"""

import functools
import uuid
from typing import Any

from django.db import connection
from django.db.models import Model

from agents_app.models import Agent, AgentRun, ModelProvider
from toolhub.sagas.models import Saga

__all__ = ["locked_run"]


def locked_run(run_id: uuid.UUID) -> AgentRun | None:
    """The run locked until the transaction ends, with ``agent``, ``agent.provider``, ``user`` and ``has_saga``."""
    sql, shapes = _locked_run_sql(connection.vendor, connection.features.has_select_for_update_of)
    key = AgentRun._meta.pk.get_db_prep_value(run_id, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [str(run_id), key])
        row = cursor.fetchone()
    if row is None:
        return None
    has_saga, *values = row
    start = 0
    instances = []
    for model, fields in shapes:
        instances.append(_instance(model, fields, values[start : start + len(fields)]))
        start += len(fields)
    run, agent, provider, user = instances
    agent._state.fields_cache["provider"] = provider
    run._state.fields_cache["agent"] = agent
    run._state.fields_cache["user"] = user
    run.has_saga = bool(has_saga)
    return run


def _instance(model: type[Model], fields: list[Any], values: list[Any]) -> Any:
    """The instance of one model's values, in ``concrete_fields`` order (``None`` for a missing outer-joined row)."""
    if values[[field.primary_key for field in fields].index(True)] is None:  # a run whose user was deleted
        return None
    converted = []
    for field, value in zip(fields, values, strict=True):
        column = field.get_col(model._meta.db_table)
        for converter in (*connection.ops.get_db_converters(column), *field.get_db_converters(connection)):
            value = converter(value, column, connection)
        converted.append(value)
    return model.from_db(connection.alias, [field.attname for field in fields], converted)


@functools.cache
def _locked_run_sql(vendor: str, lock_of: bool) -> tuple[str, list[tuple[type[Model], list[Any]]]]:
    """The statement and, in its column order, each model with its fields (in ``concrete_fields`` order)."""
    from django.contrib.auth import get_user_model

    user_model = get_user_model()
    q = connection.ops.quote_name

    def column(model: type[Model], name: str) -> str:
        return q(model._meta.get_field(name).column)

    shapes, columns = [], []
    for model, alias in ((AgentRun, "r"), (Agent, "a"), (ModelProvider, "p"), (user_model, "u")):
        fields = list(model._meta.concrete_fields)
        shapes.append((model, fields))
        columns.extend(f"{alias}.{q(field.column)}" for field in fields)
    pk = {model: q(model._meta.pk.column) for model in (Agent, ModelProvider, user_model, AgentRun)}
    sql = (
        f"SELECT EXISTS (SELECT 1 FROM {q(Saga._meta.db_table)} s WHERE s.{column(Saga, 'key')} = %s), "
        f"{', '.join(columns)} FROM {q(AgentRun._meta.db_table)} r "
        f"JOIN {q(Agent._meta.db_table)} a ON a.{pk[Agent]} = r.{column(AgentRun, 'agent')} "
        f"JOIN {q(ModelProvider._meta.db_table)} p ON p.{pk[ModelProvider]} = a.{column(Agent, 'provider')} "
        f"LEFT JOIN {q(user_model._meta.db_table)} u ON u.{pk[user_model]} = r.{column(AgentRun, 'user')} "
        f"WHERE r.{pk[AgentRun]} = %s"
    )
    if vendor != "sqlite":  # SQLite has no row locks: one writer at a time
        sql += " FOR UPDATE OF r" if lock_of else " FOR UPDATE"
    return sql, shapes
