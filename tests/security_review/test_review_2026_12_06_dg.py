"""Review 2026-12-06 (dg): the lead's follow-up of review cz (the statement bound and the audit checkpoint).

Findings (fail on 2b0e2b1-era main, pass with the fix):

1. ``audit_checkpoint`` waits for the checkpoint being signed (``pg_advisory_xact_lock``: beat's while an operator
   runs one) and checks every chain since the last checkpoint, all under the 60 s statement bound review cw added:
   a wait or check past it failed with the raw "canceling statement due to statement timeout", no checkpoint signed.
   ``toolhub.db_timeouts.transaction_statements_unbounded`` lifts the bound for the checkpoint's transaction only.

Checked and holding:
- The lifted bound ends with the checkpoint's transaction (``SET LOCAL``): the connection's next statement is bound
  again (asserted in the test).
"""

import psycopg
import pytest
from django.db import connection
from django.test import override_settings

from tests.security_review.pg_races import dsn, in_thread, released_after_lock_wait
from toolhub.checkpoints import _NUMBERING_LOCK, audit_checkpoint_create
from toolhub.models import AuditCheckpoint

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@override_settings(DATABASE_STATEMENT_TIMEOUT=1)
def test_a_checkpoint_waiting_for_another_past_the_statement_bound_is_still_signed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: a checkpoint waits for the one being signed (beat's, an operator's) under the statement bound: past it
    the second failed with the raw statement-timeout error, nothing signed. Expect: it waits, then signs; the
    connection is bound again after it."""
    monkeypatch.setenv("TOOLHUB_AUDIT_KEY", "audit-test-key")
    other = psycopg.connect(**dsn())  # the checkpoint being signed meanwhile, its transaction open
    other.execute("SELECT pg_advisory_xact_lock(%s)", [_NUMBERING_LOCK])
    connection.close()  # the next statement opens a connection bounded as toolhub's are
    try:
        releaser, released = in_thread(lambda: released_after_lock_wait(1.5, [other]), name="releaser")
        document = audit_checkpoint_create(full=True, actor="operator")
        releaser.join()
    finally:
        other.close()

    assert released == [None]  # the checkpoint waited past the bound, then went on
    assert AuditCheckpoint.objects.filter(seq=document["seq"]).exists()
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "1s"
    connection.close()  # its bound was set for the test: the flush after it runs unbounded
