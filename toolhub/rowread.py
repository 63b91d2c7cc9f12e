"""Rows of the hot path's fixed reads, with SQL written once and made into instances as the ORM makes them.

The ORM compiles a query every time one is evaluated: for the few reads every call or loop step makes
(a worker's claim, the step's run and calls), compiling cost several times running the statement.
These reads keep their SQL (built once per process) and turn rows into model instances the way the
ORM does (each field's database converters applied, then ``from_db``), so nothing downstream can tell.
"""

import functools
from collections.abc import Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Field, Model

__all__ = ["assign_row", "columns_sql", "converted", "instance_of", "instances_of", "lock_clause"]

#: Per field that has any: its index among the fields, its column expression and its converters, in order.
_Converters = tuple[tuple[int, Any, tuple[Any, ...]], ...]


def columns_sql(model: type[Model], alias: str) -> str:
    """The model's concrete columns as ``alias."column", ...``, in the order :func:`instance_of` reads them."""
    quote = connection.ops.quote_name
    return ", ".join(f"{alias}.{quote(field.column)}" for field in model._meta.concrete_fields)


def instance_of(model: type[Model], values: Sequence[Any]) -> Any:
    """The instance of one row's values (in ``concrete_fields`` order); None for a missing outer-joined row."""
    if values[_pk_index(model)] is None:
        return None
    row = _convert(_converters(model, _names(model)), values)
    return model.from_db(DEFAULT_DB_ALIAS, _attnames(model), row)


def assign_row(instance: Model, values: Sequence[Any]) -> None:
    """Set every field of ``instance`` from one row of its table (``concrete_fields`` order), as read from it."""
    model = type(instance)
    for attname, value in zip(_attnames(model), _convert(_converters(model, _names(model)), values), strict=True):
        setattr(instance, attname, value)
    instance._state.adding = False
    instance._state.db = DEFAULT_DB_ALIAS


def instances_of(models: Sequence[type[Model]], values: Sequence[Any]) -> list[Any]:
    """The instances of a joined row whose columns are each model's :func:`columns_sql`, in ``models``' order."""
    instances, start = [], 0
    for model in models:
        width = len(model._meta.concrete_fields)
        instances.append(instance_of(model, values[start : start + width]))
        start += width
    return instances


def lock_clause(alias: str) -> str:
    """`` FOR UPDATE OF alias`` where the database can lock the row it reads ("" on SQLite: one writer at a time)."""
    if not connection.features.has_select_for_update:
        return ""
    return f" FOR UPDATE OF {alias}" if connection.features.has_select_for_update_of else " FOR UPDATE"


def converted(model: type[Model], names: tuple[str, ...], values: Sequence[Any]) -> list[Any]:
    """Values read for the fields ``names`` of ``model``, converted as the ORM converts them."""
    return _convert(_converters(model, names), values)


def _convert(converters: _Converters, values: Sequence[Any]) -> list[Any]:
    row = list(values)
    for index, column, functions in converters:
        value = row[index]
        for function in functions:
            value = function(value, column, connection)
        row[index] = value
    return row


@functools.cache
def _converters(model: type[Model], names: tuple[str, ...]) -> _Converters:
    """The database converters of the fields ``names``, looked up once per process.

    They depend on the database's vendor and the field only: the same for every connection (thread).
    """
    found = []
    for index, name in enumerate(names):
        field: Field = model._meta.get_field(name)  # type: ignore[assignment]
        column = field.get_col(model._meta.db_table)
        functions = (*connection.ops.get_db_converters(column), *field.get_db_converters(connection))
        if functions:
            found.append((index, column, functions))
    return tuple(found)


@functools.cache
def _names(model: type[Model]) -> tuple[str, ...]:
    return tuple(field.name for field in model._meta.concrete_fields)


@functools.cache
def _pk_index(model: type[Model]) -> int:
    return [field.primary_key for field in model._meta.concrete_fields].index(True)


@functools.cache
def _attnames(model: type[Model]) -> list[str]:
    return [field.attname for field in model._meta.concrete_fields]
