"""Review 2026-12-06 (fw): what this session's changes cost on the governed hot paths, A/B against 3fc511b.

A measurement, not a security review (issue 10). ``python -m benchmarks.ab 3fc511b HEAD`` (the in-process governed
call), ``benchmarks.approval_profile`` and the query-count tests (``tests/unit/test_query_count.py``,
``tests/approvepath``, ``tests/posture/*query_counts*``) on both sides, and paired probes of the request paths.

Findings:
- The credential re-read (review fo, ``toolhub.credentials``) cost every API or MCP call that ran in its request
  (eager tasks, the embedded default) one statement more: ``tenant_scope_now`` read the user's row, then the key's
  row apart. ``POST /api/v1/calls/`` by token went from 11 statements to 12, 4-7% slower in paired runs on the
  loaded machine (median per-pair ratios 1.074, 1.049, 1.036 over 300 pairs each); the re-read itself took 1.20-1.21x
  an unmarked user's (its query compiled and sent). A credential's check now answers with its row while it is good
  (``CredentialRow``: the key's, the session's), asked as an ``EXISTS`` in the statement that reads the user's row,
  its SQL written once per process: back to 11, the re-read 1.01-1.03x an unmarked user's, the refusals the same.

Checked and holding (see the report for the figures): the in-process governed and atomic calls (the same
statements but the new ``approved_under`` column, ratios within the noise of each side); approve -> completed 9
statements (the shortfall's fast path reads nothing); ``multipleOf``'s exact division (microseconds, only for a
schema that has it); ``saga_ignores`` (a membership test more); ``SessionCredentialMiddleware`` (a lazy object, no
statement: a console list reads 12 statements on both sides); the user's ``pre_save`` (a login's save reads
nothing, as before); ``Tool.input_model``'s pattern walk (once per tool and process).
"""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from toolhub.api.keys import api_key_issue, key_digest
from toolhub.api.token_use import TokenChannel
from toolhub.api.tokens import token_owner
from toolhub.credentials import SessionCredentialMiddleware
from toolhub.session_store import SessionStore
from toolhub.tenancy import tenant_scope_now

#: POST /api/v1/calls/ by token, a call of ``record_effect`` run in the request, answered succeeded, on PostgreSQL:
#: the key with its user, the tenants, the call's insert, the tool's, the outcome, the rights re-read (the user's row
#: with the key's, permissions 2, tenants), the call read back and its artifacts. 12 with the key's row read apart.
POST_CALL_STATEMENTS_POSTGRESQL = 11


def _reread_statements(user: Any) -> int:
    with CaptureQueriesContext(connection) as queries:
        tenant_scope_now(user)
    return len(queries.captured_queries)


@pytest.mark.django_db
def test_the_rights_reread_asks_the_key_in_the_users_statement(alice: User) -> None:
    """Found: ``tenant_scope_now`` of a user authenticated by a key read the key's row in a statement of its own,
    one more for every API or MCP call run in its request.

    Expect: as many statements as for a user no credential marks (the key asked inside the user's read).
    """
    key = api_key_issue(alice)
    by_key, _ = token_owner(key, channel=TokenChannel.REST)
    assert _reread_statements(by_key) == _reread_statements(User.objects.get(pk=alice.pk))
    assert by_key.is_active


@pytest.mark.django_db
def test_the_rights_reread_still_refuses_a_key_deleted_or_grown_old(alice: User, settings: Any) -> None:
    """Holding. Found: a key deleted, or older than the deployment allows, after its request authenticated reads as
    an inactive account at the re-read (review fo).

    Expect: the same with the key asked inside the user's read: an old key or a deleted one is no one; a good one is.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "API_TOKEN_MAX_AGE_SECONDS": 3600}
    key = api_key_issue(alice)
    user, _ = token_owner(key, channel=TokenChannel.REST)
    assert tenant_scope_now(user).allows("acme") and user.is_active

    Token.objects.filter(key=key_digest(key)).update(created=timezone.now() - timedelta(hours=2))
    assert not tenant_scope_now(user).allows("acme") and not user.is_active

    Token.objects.filter(user=alice).delete()  # one key a user
    key = api_key_issue(alice)
    user, _ = token_owner(key, channel=TokenChannel.REST)
    Token.objects.filter(key=key_digest(key)).delete()
    assert not tenant_scope_now(user).allows("acme") and not user.is_active


@pytest.mark.django_db
def test_the_rights_reread_asks_the_session_in_the_users_statement(operator: User) -> None:
    """Found: a console user's re-read read its session's row apart (``session.exists``).

    Expect: as many statements as for an unmarked user, and a session ended meanwhile still reads as no one.
    """
    client = Client()
    client.force_login(operator)
    session_key = client.session.session_key
    seen: dict[str, Any] = {}

    def view(request: Any) -> Any:
        assert request.user.pk == operator.pk  # the session and its user read, as the view's first use does
        seen["statements"] = _reread_statements(request.user)
        seen["active"] = request.user.is_active
        SessionStore().delete(session_key)
        tenant_scope_now(request.user)
        seen["active_after_end"] = request.user.is_active
        return None

    request = RequestFactory().get("/admin/")
    request.session = SessionStore(session_key=session_key)
    AuthenticationMiddleware(lambda r: SessionCredentialMiddleware(view)(r))(request)  # type: ignore[arg-type]
    assert seen == {
        "statements": _reread_statements(User.objects.get(pk=operator.pk)),
        "active": True,
        "active_after_end": False,
    }


@pytest.mark.django_db(transaction=True)
def test_a_call_run_in_its_request_costs_no_statement_for_the_credential(alice: User) -> None:
    """Found: ``POST /api/v1/calls/`` by token, its call run in the request (eager), issued 12 statements, 11 before
    review fo: the key's row was read again on its own after the call ran.

    Expect: 11 on PostgreSQL (the key asked in the rights' re-read), the call succeeded and answered.
    """
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_key_issue(alice)}")

    def post() -> Any:
        return client.post("/api/v1/calls/", {"tool": "record_effect", "arguments": {"note": "fw"}}, format="json")

    post()  # warm: the governance cache, the catalogue
    with CaptureQueriesContext(connection) as queries:
        answer = post()
    assert answer.status_code == 200 and answer.json()["status"] == "succeeded", answer.content[:300]
    if connection.vendor == "postgresql":
        assert len(queries.captured_queries) == POST_CALL_STATEMENTS_POSTGRESQL, [
            query["sql"][:120] for query in queries.captured_queries
        ]
