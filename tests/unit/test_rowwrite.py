"""The hot path's short ways to build and write a row give exactly what Django's own ways give."""

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
from toolhub.rowwrite import _insert_fields, db_preparer, insert_params, new_instance
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


@pytest.mark.django_db
@pytest.mark.parametrize("model", WRITTEN, ids=lambda model: model.__name__)
def test_an_insert_s_values_are_the_orm_s_with_auto_now_fields_set(model: type[models.Model]) -> None:
    connection.ensure_connection()
    instance = model()
    fields = [field for field, _ in _insert_fields(model)]
    auto = [f for f in fields if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)]
    before = timezone.now()
    params = insert_params(instance, connection)
    # pre_save stamped the auto fields on the instance, as an ORM save does, and the values are theirs
    assert all(getattr(instance, f.attname) >= before for f in auto)
    expected = [_prepared(f.get_db_prep_save, getattr(instance, f.attname)) for f in fields]
    assert [_prepared(lambda value, _: value, param) for param in params] == expected


def test_a_new_instance_is_the_one_keywords_build() -> None:
    values = {"id": uuid.uuid4(), "tool_name": "t", "status": CallStatus.RUNNING, "user_id": 7, "turn": 2}
    built, expected = new_instance(ToolCall, **values), ToolCall(**values)
    for field in ToolCall._meta.concrete_fields:
        assert getattr(built, field.attname) == getattr(expected, field.attname), field.name
    assert built._state.adding and built.arguments == {} and built.arguments is not new_instance(ToolCall).arguments
    assert new_instance(ToolCall).id != new_instance(ToolCall).id  # a callable default is called each time


def test_a_new_instance_refuses_a_field_the_model_does_not_have() -> None:
    with pytest.raises(TypeError, match="'nope'"):
        new_instance(ToolCall, tool_name="t", nope=1)
