"""Review 2026-12-06 (ev): the review of the last hour's credential and session work (d36ede5, f7cb5a3, 955125e,
e2ea90e/47e27ea), read hostile.

Each finding's test fails on the code as found (main at d9460e9) and states what was found ("Found: ...") and what
is expected ("Expect: ...").

Findings:

1. A token's use was written at every request of a key presented over REST and MCP in turn. ``token_use_stamp``
   wrote when the stored stamp was older than five minutes *or named the other channel*; a user holds one token, so
   their agent (MCP) and their scripts (REST) sharing it wrote the one row at each request, and a flood with a valid
   key alternating channels was a flood of upserts on one row (README: "at most one write per token per five
   minutes"). Now a stamp within the window writes nothing whatever its channel (the channel shown is the window's
   first use). ``test_a_token_used_over_rest_and_mcp_in_turn_writes_once_per_window``.
2. A stamp that could not be written answered 500 to an accepted key. Only ``IntegrityError`` (token gone) was
   caught, so any other database error of this bookkeeping write (a read-only database during a failover or
   maintenance, the lock or statement bounds ``toolhub.db_timeouts`` sets, on a use row another request holds)
   escaped the authentication of a request that only reads. Now it is logged (no key, the channel and the error's
   class) and the request goes on; the savepoint keeps the request's own work.
   ``test_a_stamp_that_cannot_be_written_leaves_the_request_answered``.
3. A stamp during a token's deletion undid the deletion. Django deletes a token's use row and then the token, two
   statements; a stamp committed between them (the key still valid: the deletion was not committed) left a use row
   naming the deleted token, and the deferred foreign key failed the deletion at its commit: a password reset or a
   deactivation (``token_revocation``), a token's page, a user's deletion answered 500 and were rolled back, the
   token and the old password kept. The holder of a stolen key, writing at each request (finding 1), could keep
   hitting that window while the administrator reset the password. Now every token deletion locks the token row
   first (``toolhub.api.token_use._token_deleting``, a ``pre_delete`` receiver: it runs before the collector deletes
   the use rows, on every path), so a racing stamp's foreign key check waits for the deletion, finds the token gone
   and the request is refused. ``test_a_stamp_during_a_password_reset_does_not_undo_the_reset``.

Checked and holding (probes on the code as found; no test kept unless named):

- The stamp is no oracle: a refused key (unknown, expired, inactive user) is stamped with nothing and answered as
  before; the key is found by its digest, and the use row holds the digest only. Nothing but the Tokens page
  (``CrossTenantOnly``) shows it: no REST endpoint serializes tokens or their use, ``ApiTokenUse`` has no admin page,
  ``GovernanceAudited._append_cascade`` loads no row of a model no governance page shows (so a user's deletion puts
  no "last used" in the trail), and the user deletion page that lists "Api token use" rows is the user admin's
  (``CrossTenantChangesOnly``: tenant-scoped staff cannot delete users).
- Deleting tokens with the cascade: DRF 3.18's ``TokenProxy.delete`` and ``TokenProxyQuerySet.delete`` go through
  the concrete ``Token`` (the Tokens page's delete and its tests), ``drf_create_token -r`` deletes through ``Token``,
  a user's deletion collects ``Token`` (a proxy has no local relation), ``tokens_revoke`` now deletes through
  ``Token``; no other ``_base_manager``/proxy delete of tokens is left (``governance_trail``'s only reads). A tenant's
  deletion deletes memberships, not users or tokens.
- Sessions (f7cb5a3): only the console's login issues a session and it signs in staff only; nothing in toolhub writes
  an anonymous session (no ``CSRF_USE_SESSIONS``, messages in cookies first), so ``sessions_end`` reads the live staff
  sessions, not a table an anonymous flood could grow. The REST API takes a session only from a user the console
  would let in (``toolhub.api.sessions``): a non-staff member has no session to end, their tokens are revoked on
  deactivation. No toolhub path deactivates, unstaffs or re-passwords users with ``QuerySet.update``, and the user
  admin has no bulk action but Django's delete (a deleted user's session finds no user). A removed membership ends
  the member's rights at their next request (``tenant_scope`` reads memberships per request); their session is kept,
  as their staff flag is.
- ``cookie_path_of`` (955125e): the prefix quoted with ``reverse``'s safe set less ``;``, as links are written.
- ``credential_env`` (e2ea90e): every string ``*_ENV`` setting (``AUDIT_KEY_ENV``, ``AUDIT_RETIRED_KEYS_ENV``,
  ``DB_APP_PASSWORD_ENV``, ``WEBHOOK_SECRET_ENV``) is read from the settings model, so a new one is refused too.
"""

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.mcp.conftest import token
from tests.security_review.pg_races import in_thread
from toolhub.api.keys import key_digest
from toolhub.api.token_use import TokenChannel
from toolhub.api.tokens import TokenRefused, token_owner
from toolhub.models import ApiTokenUse

USE_TABLE = ApiTokenUse._meta.db_table


def _use_writes(queries: CaptureQueriesContext) -> list[str]:
    """The statements that wrote the use table (the token's lookup joins it, and is no write)."""
    return [q["sql"] for q in queries.captured_queries if USE_TABLE in q["sql"] and not q["sql"].startswith("SELECT")]


@pytest.mark.django_db
def test_a_token_used_over_rest_and_mcp_in_turn_writes_once_per_window(alice: User) -> None:
    """Found: a stamp was written whenever the stored one named the other channel, so a key presented over REST and
    MCP in turn (a user holds one token: their agent's MCP client and their scripts share it) wrote the use row at
    every request, not once per five minutes as README and ``STAMP_RESOLUTION`` say; a flood with a valid key was a
    flood of upserts on one row.
    / Expect: ten requests alternating channels within the window write the row once.
    """
    key = token(alice)

    with CaptureQueriesContext(connection) as queries:
        for channel in [TokenChannel.REST, TokenChannel.MCP] * 5:
            token_owner(key, channel=channel)

    assert len(_use_writes(queries)) == 1, _use_writes(queries)
    assert ApiTokenUse.objects.get(token_id=key_digest(key)).channel == TokenChannel.REST


@contextmanager
def _read_only_database() -> Iterator[None]:
    """The database refuses writes (a standby being promoted, a maintenance window) while reads go on."""
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION default_transaction_read_only = on")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION default_transaction_read_only = off")


@pytest.mark.postgres  # a read-only transaction
@pytest.mark.django_db(transaction=True)
def test_a_stamp_that_cannot_be_written_leaves_the_request_answered(alice: User) -> None:
    """Found: the stamp's upsert ran in ``token_owner`` and only its ``IntegrityError`` (token gone) was caught: any
    other database error of a bookkeeping write (a read-only database, a lock or statement timeout on the use row)
    escaped the authentication, so an accepted key's read answered 500.
    / Expect: the request is answered as without the stamp (200), the use is simply not recorded.
    """
    key = token(alice)
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")

    with _read_only_database():
        answer = client.get("/api/v1/calls/")

    assert answer.status_code == 200, answer.status_code
    assert not ApiTokenUse.objects.exists()


def _after_statement(prefix: str, reached: threading.Event, release: threading.Event) -> Callable[..., Any]:
    """An execute wrapper pausing its connection's session just after a statement starting with ``prefix``."""

    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        if sql.startswith(prefix):
            reached.set()
            release.wait(10)
        return result

    return wrapper


@pytest.mark.postgres  # row locks and a deferred foreign key: SQLite has neither
@pytest.mark.django_db(transaction=True)
def test_a_stamp_during_a_password_reset_does_not_undo_the_reset(alice: User) -> None:
    """Found: deleting a token (its password reset, its account deactivated or deleted, its page) deletes its use row
    and then the token, two statements. A stamp committed between them (a request with the key, accepted since the
    reset was not committed yet) left a use row naming the deleted token: the deferred foreign key failed the
    deletion's commit, so the password reset (or deactivation) answered 500 and was rolled back, the token and the old
    password kept. The holder of a stolen key, requesting over REST and MCP in turn (each request a write, finding 1),
    could make the administrator's reset fail.
    / Expect: the reset commits, the token and every use row are gone, and the racing request is refused.
    """
    key = token(alice)
    reached, release = threading.Event(), threading.Event()

    def reset() -> None:
        user = User.objects.get(pk=alice.pk)
        user.set_password("a-new-password-654321")
        with connection.execute_wrapper(_after_statement(f'DELETE FROM "{USE_TABLE}"', reached, release)):
            user.save()

    def request() -> Any:
        try:
            return token_owner(key, channel=TokenChannel.REST)[0].pk
        except TokenRefused as refused:
            return refused

    resetting, reset_result = in_thread(reset, "reset")
    try:
        assert reached.wait(10), reset_result
        requesting, request_result = in_thread(request, "request")
        _until_done_or_waiting(requesting)
    finally:
        release.set()
        resetting.join(10)
    requesting.join(10)

    assert reset_result == [None], reset_result
    assert not Token.objects.filter(user=alice).exists()
    assert not ApiTokenUse.objects.exists()
    assert User.objects.get(pk=alice.pk).check_password("a-new-password-654321")
    assert len(request_result) == 1 and isinstance(request_result[0], TokenRefused), request_result


def _until_done_or_waiting(thread: threading.Thread) -> None:
    """Until ``thread`` ended or its session waits on a lock (the reset's, on the token row)."""
    import psycopg

    from tests.security_review.pg_races import dsn

    with psycopg.connect(**dsn(), autocommit=True) as watcher:
        for _ in range(500):
            thread.join(0.02)
            if not thread.is_alive():
                return
            waiting = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()[0]
            if waiting:
                return
    raise AssertionError("the request neither ended nor waited on a lock")
