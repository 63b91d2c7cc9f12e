"""Legal status moves, declared once per status field, and the guarded UPDATE every transition goes through.

A transition is a conditional ``UPDATE ... WHERE pk = ... AND status IN (...)``: of two racing writers
exactly one wins. Asking for a move the table does not declare is a programming error, refused before any
SQL runs, so a new code path cannot invent a transition nobody reviewed.
"""

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import models, transaction

from toolhub.exceptions import InvalidTransitionError
from toolhub.prepared import prepared_cursor
from toolhub.rowwrite import db_preparer

__all__ = ["TransitionTable", "guarded_update_sql", "guarded_update", "guarded_save"]


class TransitionTable:
    """The moves one status field may make: ``{from_status: {to_status, ...}}``."""

    def __init__(self, name: str, moves: Mapping[str, Iterable[str]]) -> None:
        self.name = name
        self.moves = {str(source): frozenset(str(target) for target in targets) for source, targets in moves.items()}

    def allows(self, source: str, target: str) -> bool:
        return str(target) in self.moves.get(str(source), frozenset())

    def check(self, allowed_from: Iterable[str], to: str) -> list[str]:
        """The sources as a list; raise when any source -> ``to`` is not a declared move."""
        sources = [str(source) for source in allowed_from]
        illegal = [source for source in sources if not self.allows(source, to)]
        if illegal or not sources:
            raise InvalidTransitionError(
                f"{self.name}: moving from {', '.join(illegal) or 'nothing'} to {to} is not a declared transition; "
                f"declare it in the {self.name} transition table if it is meant to happen."
            )
        return sources


def guarded_update_sql(
    model: type[models.Model],
    pk: Any,
    *,
    table: TransitionTable,
    to: str,
    allowed_from: Iterable[str],
    values: Mapping[str, Any],
    field: str = "status",
    condition: tuple[str, list[Any]] | None = None,
) -> tuple[str, list[Any]]:
    """The SQL and parameters of the conditional UPDATE moving row ``pk`` to ``to`` (with ``values``).

    The SQL text is built once per shape (model, columns set, number of sources) and kept: a hot path
    must not pay the ORM's query building on every call. Parameters are prepared as each field's
    ``get_db_prep_save`` prepares them for the ORM's UPDATE (``toolhub.rowwrite``). ``condition``: one more
    SQL condition (and its parameters) the row's move also needs, e.g. that the governance stamp is still
    the one checked.
    """
    sources = table.check(allowed_from, to)
    names = (field, *(name for name in values if name != field))
    connection = transaction.get_connection()
    opts = model._meta
    params: list[Any] = [db_preparer(opts.get_field(field))(to, connection)]
    params.extend(_prepared(opts.get_field(name), values[name], connection) for name in names[1:])
    params.append(opts.pk.get_db_prep_value(pk, connection))
    params.extend(sources)
    sql = _update_sql(model, names, field, len(sources))
    if condition is not None:
        sql, params = f"{sql} AND {condition[0]}", [*params, *condition[1]]
    return sql, params


def _prepared(field: Any, value: Any, connection: Any) -> Any:
    """A value as the ORM's UPDATE would send it (a related instance becomes its key); no expressions."""
    if hasattr(value, "resolve_expression"):
        raise TypeError(f"guarded updates take plain values, not expressions ({field.name})")
    if hasattr(value, "prepare_database_save"):
        value = value.prepare_database_save(field)
    return db_preparer(field)(value, connection)


@functools.lru_cache(maxsize=512)
def _update_sql(model: type[models.Model], names: tuple[str, ...], field: str, sources: int) -> str:
    """``UPDATE t SET a = %s, ... WHERE pk = %s AND field IN (%s, ...)`` for one shape, built once."""
    opts = model._meta
    table = f'"{opts.db_table}"'
    assignments = ", ".join(f'"{opts.get_field(name).column}" = %s' for name in names)
    status_column = opts.get_field(field).column
    placeholders = ", ".join(["%s"] * sources)
    return (
        f'UPDATE {table} SET {assignments} WHERE {table}."{opts.pk.column}" = %s '
        f'AND {table}."{status_column}" IN ({placeholders})'
    )


def guarded_update(
    model: type[models.Model],
    pk: Any,
    *,
    table: TransitionTable,
    to: str,
    allowed_from: Iterable[str],
    values: Mapping[str, Any],
    field: str = "status",
) -> bool:
    """Apply the conditional UPDATE; return whether the row moved."""
    sql, params = guarded_update_sql(
        model, pk, table=table, to=to, allowed_from=allowed_from, values=values, field=field
    )
    with prepared_cursor(transaction.get_connection()) as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount > 0


def guarded_save(
    instance: models.Model,
    *,
    table: TransitionTable,
    to: str,
    allowed_from: Iterable[str],
    update_fields: Iterable[str] | None = None,
    field: str = "status",
) -> bool:
    """Save ``instance`` with its ``field`` set to ``to``, if its row is still in one of ``allowed_from``.

    For rows whose status moves together with other fields (an approval's decision time, a run's messages):
    the conditional UPDATE writes ``update_fields`` (every field when None; ``auto_now`` ones refreshed) with
    the status. A source equal to ``to`` is no move (the row keeps its status, the other fields are saved);
    every other source must be a declared move. Returns whether the row was written; ``instance`` keeps
    its old status when it was not.
    """
    sources = [str(source) for source in allowed_from]
    moves = [source for source in sources if source != str(to)]
    if moves:
        table.check(moves, to)
    opts = instance._meta
    if update_fields is None:
        fields = [f for f in opts.concrete_fields if not f.primary_key and f.name != field]
    else:
        fields = [opts.get_field(name) for name in update_fields if name != field]
    previous = getattr(instance, field)
    setattr(instance, field, to)
    values = {f.name: f.pre_save(instance, False) for f in fields}
    connection = transaction.get_connection()
    names = (field, *values)
    params: list[Any] = [db_preparer(opts.get_field(field))(to, connection)]
    params.extend(_prepared(opts.get_field(name), value, connection) for name, value in values.items())
    params.append(opts.pk.get_db_prep_value(instance.pk, connection))
    params.extend(sources)
    with prepared_cursor(connection) as cursor:
        cursor.execute(_update_sql(type(instance), names, field, len(sources)), params)
        written = cursor.rowcount > 0
    if not written:
        setattr(instance, field, previous)
    return written
