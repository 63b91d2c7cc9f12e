"""Review of 2026-12-05 (aw): the REST API's scoping, decisions, cursors, schema, throttles and bad input.

Findings:

1. A saga id holding ``/`` (``"orders/42"``) was accepted by ``POST /api/v1/sagas/`` (201) and by a direct call's
   ``saga_id`` (REST, MCP, adapters), but the saga's own URLs (``/api/v1/sagas/{saga_id}/`` and ``.../rollback/``)
   take one path segment: its owner could never read it or roll it back on demand (404, even percent-encoded, as
   the server decodes ``%2F`` before routing). Now ``toolhub.sagas.selectors.saga_id_problem`` refuses such an id at
   both doors (400, nothing recorded), so every saga a client opens is addressable.

Checked and found holding (no test here): runs' ``?tenant=globex`` and sagas' ``?tenant=globex`` list nothing; the
export's ``?tenant=globex`` and a missing tenant answer alike (400); a run's ``context`` naming ``tenant: globex``
and a direct call's ``tenant`` naming globex or a missing tenant answer alike; a huge ``agent_id`` is "unknown agent"
(400), huge integer ids in paths 404; a crafted list cursor 404; a NUL in a run's input 400 before anything is
stored; an idempotency key reused with other arguments 409 naming only the caller's own call; a direct call's
``arguments`` as JSON text, a list, or form fields are refused or decoded as the JSON body is; a context value that
is an object or too long is a 400 naming the key; a saga id that is blank or only spaces is a 400; DRF's
``FloatField`` refuses NaN and infinities (an agent's ``temperature``); throttles are keyed by user id; an
approval's edit goes through the tool's intake and policy (``approvals.editing.edited_version``), never below the
request's approvals.
"""

import pytest
from django.contrib.auth.models import User

from tests.security_review.conftest import client_for
from toolhub.sagas.models import Saga

pytestmark = pytest.mark.django_db


def test_a_saga_id_with_a_slash_is_refused_where_its_urls_could_not_reach_it(alice: User) -> None:
    """Found: ``POST /api/v1/sagas/ {"saga_id": "orders/42"}`` answered 201, then ``GET /api/v1/sagas/orders/42/``
    (and ``%2F``) 404: a saga its owner can never read nor roll back. Expect: 400, no saga opened; an id without
    ``/`` is opened and read back by its URL."""
    client = client_for(alice)
    answer = client.post("/api/v1/sagas/", {"saga_id": "orders/42"}, format="json")
    assert answer.status_code == 400, answer.content
    assert "/" in str(answer.json())
    assert not Saga.objects.filter(key="orders/42").exists()

    opened = client.post("/api/v1/sagas/", {"saga_id": "orders-42"}, format="json")
    assert opened.status_code == 201, opened.content
    assert client.get("/api/v1/sagas/orders-42/").json()["key"] == "orders-42"


def test_a_direct_calls_saga_id_with_a_slash_is_refused_before_anything_is_recorded(alice: User) -> None:
    """Found: ``POST /api/v1/calls/ {"saga_id": "trip/7", ...}`` opened saga ``trip/7`` (202, the call ran), whose
    URLs answer 404. Expect: 400 with the reason, no saga and no call recorded."""
    client = client_for(alice)
    body = {"tool": "calculate", "arguments": {"a": 1, "op": "+", "b": 2}, "saga_id": "trip/7"}
    answer = client.post("/api/v1/calls/", body, format="json")
    assert answer.status_code == 400, answer.content
    assert "/" in answer.json()["detail"]
    assert not Saga.objects.filter(key="trip/7").exists()
    assert client.get("/api/v1/calls/").json()["results"] == []
