"""Review 2026-12-06 (fx): the stamp a worker's re-check decides under, after review fp's note.

Findings:

1. A worker's re-check before a claimed call runs (permissions, and since review fj the approvals it was released
   on) decided under whatever governance cache the process held by then (``governance_scope(checked_by_write=True)``
   took ``_current``), not under the stamp its claim had just checked. In a threaded process (the embedded default
   runs calls in the request's thread) another thread that read the stamp before a change can put that older cache
   back between the claim and the re-check: the call then ran on governance from before the change, and with
   ``ToolCall.approved_under`` equal to that older stamp the approvals were not even read (a deactivated approver's
   approval released it). The re-check now decides under what the claim checked (``ToolCall.claim_stamp``; since
   review fz, the governance it held: ``ToolCall.claim_hold``).

Checked and holding: a claim whose check found the stamp moved claims again under the stamp read then, and the
re-check decides under that one (review fp's tests); a claim that checked nothing (the last attempt, a batch)
reads the stamp for its re-check.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection

from tests.approvals.conftest import Hold, hold  # noqa: F401 - the fixture, registered by being imported here
from tests.approvals.released import released_not_run
from toolhub import claims, execution, governance
from toolhub.models import CallStatus, ToolCall

pytestmark = pytest.mark.django_db


def test_an_older_cache_put_back_after_the_claim_is_not_what_the_recheck_decides_under(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: the approver deactivated (raw SQL) after the release; the claim checked the new stamp, then another
    thread put back the cache of the release's stamp (the approver loaded as able to decide): the re-check took it,
    read no approval (``approved_under`` was that stamp) and the call ran on the deactivated approver's word.

    Expect: the re-check decides under the stamp the claim checked: the call goes back to the desk, nothing ran.
    """
    request = hold()
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    released_under = ToolCall.objects.get(pk=request.call_id).approved_under
    stale = governance._current  # the release's governance, its approver loaded, as a thread may still hold it
    assert stale.stamp == released_under is not None
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {User._meta.db_table} SET is_active = %s WHERE id = %s", [False, operator.pk])
    claim = claims.tool_calls_claim

    def claim_then_an_older_cache_put_back(**kwargs: Any) -> list[ToolCall]:
        claimed = claim(**kwargs)
        governance._current = stale  # what another thread's ``_snapshot`` does with a stamp it read before
        return claimed

    monkeypatch.setattr(execution, "tool_calls_claim", claim_then_an_older_cache_put_back)
    with django_capture_on_commit_callbacks(execute=True):
        for callback in callbacks:
            callback()

    call = ToolCall.objects.get(pk=request.call_id)
    assert (call.status, call.attempts) == (CallStatus.PENDING_APPROVAL, 0), call.status
