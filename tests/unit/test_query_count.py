"""The governed path stays cheap: a bounded number of SQL queries per call, whatever the table sizes."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection

from tests.helpers import principal_for
from tests.testapp.models import SideEffect
from toolhub.models import CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

pytestmark = pytest.mark.django_db

#: Measured on PostgreSQL: 3 statements for one low-risk call, requested and executed in process: the call
#: row, written already claimed, with its audit events and the chain head's advance, and the governance
#: stamp checked in the same statement (definitions, groups, grants and rules come from the cache); the
#: tool's own INSERT; the outcome with its audit event. Each commits by itself. 10 before the one-statement
#: appends (a stamp read, two statements per append, a transaction each); 34 before the governance cache.
MAX_QUERIES_PER_CALL = 3
#: Elsewhere (SQLite, the embedded default) a write is its statements in a transaction: 9.
MAX_QUERIES_PER_CALL_ELSEWHERE = 9


def _governed_call(user: User, note: str, capture: Any) -> ToolCall:
    with capture(execute=True):
        call = tool_call_request(
            request=CallRequest(
                tool_name="record_effect",
                arguments={"note": note},
                principal=principal_for(user, tenant="acme"),
                context=ToolContext(),
            )
        )
    return call


def test_one_governed_call_issues_a_bounded_number_of_queries(
    alice: User, settings: Any, django_capture_on_commit_callbacks: Any, django_assert_max_num_queries: Any
) -> None:
    # given one audit chain whose head exists already, and history in the tables
    settings.TOOLHUB = {**settings.TOOLHUB, "AUDIT_CHAINS": 1}
    for index in range(5):
        _governed_call(alice, f"warm-up {index}", django_capture_on_commit_callbacks)

    # when one more low-risk call is requested and executed
    bound = MAX_QUERIES_PER_CALL if connection.vendor == "postgresql" else MAX_QUERIES_PER_CALL_ELSEWHERE
    with django_assert_max_num_queries(bound):
        call = _governed_call(alice, "measured", django_capture_on_commit_callbacks)

    # then it did its work
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED
    assert SideEffect.objects.filter(call_id=str(call.id)).count() == 1
