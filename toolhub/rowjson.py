"""A row's values as one JSON parameter, which PostgreSQL reads back with ``json_populate_record``.

The hot path's writes (a call's INSERT, every guarded status move) would otherwise send one typed
parameter per column: preparing ~40 values through the fields and the driver cost more than the row's
INSERT itself. One text parameter, built with ``json.dumps``, carries them all; the database converts
each value to its column's type as it would a parameter. Only PostgreSQL is served, and only models
whose fields all have a faithful JSON form (:func:`json_columns` says None otherwise, and the caller
sends parameters as before).
"""

import functools
import json
from collections.abc import Callable, Iterable
from datetime import date, datetime
from typing import Any

from django.db import models
from django.utils import timezone

__all__ = ["json_columns", "row_json", "row_source_sql"]

#: Field types whose value JSON carries as PostgreSQL reads the column (text, numbers, booleans, JSON).
_AS_IS = (
    models.CharField,
    models.TextField,
    models.IntegerField,  # the small, big and positive ones too
    models.BooleanField,
)

Converter = Callable[[Any], Any] | None


def _datetime(field: models.DateTimeField) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        if isinstance(value, datetime) and timezone.is_aware(value):
            return value.isoformat()
        return field.get_prep_value(value).isoformat()  # naive: warned about and made aware as the ORM does

    return convert


def _date(value: date) -> str:
    return value.isoformat()


def _converter(field: models.Field) -> Converter | bool:
    """How ``field``'s value becomes JSON: a function, None (as is), or False (no faithful JSON form)."""
    if isinstance(field, models.ForeignKey):
        return _converter(field.target_field)
    if isinstance(field, models.JSONField):
        return None if field.encoder is None else False
    if isinstance(field, models.DateTimeField):
        return _datetime(field)
    if isinstance(field, models.DateField):
        return _date
    if isinstance(field, models.UUIDField):
        return str
    if isinstance(field, _AS_IS) or isinstance(field, models.AutoField):
        return None
    return False


@functools.lru_cache(maxsize=256)
def json_columns(model: type[models.Model], names: tuple[str, ...]) -> tuple[tuple[str, str, Converter], ...] | None:
    """Per field name: (attribute, column, converter); None when a field has no faithful JSON form."""
    opts = model._meta
    columns = []
    for name in names:
        field = opts.get_field(name)
        convert = _converter(field)
        if convert is False:
            return None
        columns.append((field.attname, field.column, convert))  # type: ignore[arg-type]
    return tuple(columns)


def row_json(columns: Iterable[tuple[str, str, Converter]], values: Iterable[Any]) -> str:
    """The values (in ``columns``' order) as one JSON object keyed by column.

    A JSON column's value goes as it is, so a value JSON cannot hold fails here as it would in the ORM.
    """
    row: dict[str, Any] = {}
    for (_, column, convert), value in zip(columns, values, strict=True):
        row[column] = value if value is None or convert is None else convert(value)
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def row_source_sql(model: type[models.Model], columns: Iterable[str]) -> str:
    """``SELECT c1, c2 FROM json_populate_record(NULL::table, %s::json)``: the row's columns from its JSON."""
    listed = ", ".join(f'"{column}"' for column in columns)
    return f'SELECT {listed} FROM json_populate_record(NULL::"{model._meta.db_table}", %s::json)'
