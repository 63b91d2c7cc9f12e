"""The hot path's short way to prepare a value gives exactly what the field's own ``get_db_prep_save`` gives."""

import datetime as dt
import decimal
import json
import uuid
import warnings
from typing import Any

import pytest
from django.db import connection, models
from django.utils import timezone

from agents_app.models import AgentRun
from approvals.models import ApprovalDecision, ApprovalRequest
from toolhub.audit_hash import canonical_json
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.pipeline import _storable_context
from toolhub.rowwrite import db_preparer
from toolhub.sagas.models import Compensation
from toolhub.tools.context import ToolContext

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


#: Every model whose rows the hand-built writes touch (the call row, audit events, guarded status moves, decisions).
WRITTEN = (ToolCall, AuditEvent, AgentRun, ApprovalRequest, Compensation, ApprovalDecision)


@pytest.mark.django_db
@pytest.mark.parametrize("field", [f for model in WRITTEN for f in model._meta.concrete_fields], ids=str)
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


@pytest.mark.parametrize(
    "values",
    [
        {"tenant": "acme", "user": "bob", "user_id": 3, "run_id": "r1", "flag": True, "none": None},
        {"tenant": "acme", "custom": {"b": (1, 2), "a": 1.5}, "when": dt.date(2026, 12, 1)},
        {7: "a key that is not text"},
    ],
    ids=["plain", "custom", "odd key"],
)
def test_a_call_s_context_is_stored_as_its_json_round_trip(values: dict[Any, Any]) -> None:
    # plain values take a short way to the column; anything else goes through JSON text
    context = ToolContext.layered(values)
    stored = _storable_context(context)
    expected = json.loads(canonical_json(context.as_dict()))
    assert stored == expected and list(stored) == list(expected)
