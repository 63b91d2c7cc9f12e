"""The hot path's short way to prepare a value gives exactly what the field's own ``get_db_prep_save`` gives."""

import datetime as dt
import decimal
import uuid
import warnings
from typing import Any

import pytest
from django.db import connection, models
from django.utils import timezone

from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.rowwrite import db_preparer

AWARE = dt.datetime(2026, 12, 1, 9, 30, 15, 123456, tzinfo=dt.UTC)

#: Values of each kind the writes pass, the usual ones and the odd ones that must take the field's own way.
SAMPLES: dict[type, list[Any]] = {
    models.CharField: [None, "", "text", "ünïcödé 雨", CallStatus.RUNNING, 12],
    models.TextField: [None, "", "long\ntext", CallStatus.QUEUED],
    models.DateTimeField: [
        None,
        AWARE,
        timezone.now(),
        AWARE.astimezone(dt.timezone(dt.timedelta(hours=5))),
        "2026-12-01T09:30:15Z",
    ],
    models.UUIDField: [None, uuid.uuid4(), str(uuid.uuid4())],
    models.PositiveIntegerField: [None, 0, 7, True, "3"],
    models.PositiveSmallIntegerField: [None, 0, 7],
    models.JSONField: [None, {}, {"a": [1, 2.5, None, "x"]}, [], "text", 3, 2.5, True, decimal.Decimal("1.5")],
}


def _prepared(prepare: Any, value: Any) -> Any:
    """What preparing ``value`` gives, comparably: psycopg's wrappers (Jsonb, Int4, ...) by type and content."""
    try:
        with warnings.catch_warnings(record=True):
            prepared = prepare(value, connection)
    except (TypeError, ValueError) as exc:  # e.g. JSON that cannot be encoded: the same refusal either way
        return ("refused", type(exc))
    return (type(prepared), getattr(prepared, "obj", prepared))


@pytest.mark.django_db
@pytest.mark.parametrize("field", ToolCall._meta.concrete_fields + AuditEvent._meta.concrete_fields, ids=str)
def test_every_column_is_prepared_as_the_field_prepares_it(field: models.Field) -> None:
    connection.ensure_connection()
    values = next((samples for kind, samples in SAMPLES.items() if type(field) is kind), [None])
    for value in values:
        expected = _prepared(field.get_db_prep_save, value)
        assert _prepared(db_preparer(field), value) == expected, (field, value)


@pytest.mark.django_db
def test_a_naive_datetime_still_warns_as_the_orm_warns() -> None:
    field = ToolCall._meta.get_field("started_at")
    with pytest.warns(RuntimeWarning, match="naive datetime"):
        db_preparer(field)(dt.datetime(2026, 12, 1, 9, 30), connection)
