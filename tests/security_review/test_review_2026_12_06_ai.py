"""Review 2026-12-06 (ai): what review ac's migrations back and forward leave behind for the rest of a test session.

CI runs the whole suite in one pytest session, in file order (no pytest-xdist, no random ordering), so
``test_review_2026_12_06_ac.py`` migrating toolhub back to 0001 and zero and forward again runs between other
tests, and a production rollback does the same under running processes.

Findings (fail on 46bdd05, pass after the fix):

1. Going back before ``toolhub 0008`` dropped the ``toolhub_governance_stamp`` sequence, so forward again the
   governance stamps restarted at 1: a process that cached its governance lookups under stamp N before the
   rollback (a worker, the web) took a later, different change stamped N again for the one it had cached, and
   answered from the old grants; ``toolhub.governance`` promises a stamp is never handed out twice. The reverse
   now drops the triggers and their functions but keeps the sequence, so stamps go on growing.

Checked and holds (PostgreSQL, one session: ac, then tests/governance, tests/audit,
tests/tenancy/test_upgrade_from_release.py, tests/posture, tests/integration/test_governed_flow.py,
tests/integration/test_worker_connections.py, test_review_2026_12_05_bo.py; and the same set without ac):
- every test of the set passes after ac as without it (386 of 386), ac first or in the suite's own order;
- after ac every watched table has its ``toolhub_governance_bump`` trigger again and the audit tables their
  append-only, no-truncate and head triggers: the same 27 as on a fresh database (the migrations and
  ``_install_governance_triggers`` put them back);
- content types keep their ids (migrating toolhub back does not delete them) and ``create_contenttypes``
  clears the ContentType cache on every post_migrate, so no cached id goes stale;
- the integration session's application role keeps its rights on re-created tables through the default
  privileges ``toolhub_db_roles`` sets; on re-created audit tables those defaults are full data rights, which
  is why the README has the owner run ``toolhub_db_roles`` after every ``migrate`` (the audit triggers still
  refuse UPDATE and DELETE meanwhile); no test after ac in the suite's order uses that role.
"""

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command

from toolhub.governance import governance_cached, governance_stamp


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_governance_stamps_keep_growing_across_a_migration_back_before_0008_and_forward() -> None:
    """Found: reversing ``toolhub 0008`` dropped the stamp sequence, so after migrating forward again stamps
    restarted at 1 and a process that cached under stamp N took a later change stamped N for its cache.
    Expect: the first governance change after the round trip is stamped above every stamp handed out before, and
    what this process cached before it is not served after it."""
    Group.objects.create(name="before")  # a governance change: the stamp row exists and holds the latest stamp
    before = governance_stamp(assume_current=False)
    assert before is not None
    assert governance_cached("review-ai", lambda: "as before") == "as before"  # this process caches under it
    try:
        call_command("migrate", "toolhub", "0007", verbosity=0)
    finally:
        call_command("migrate", verbosity=0)  # every app's leaf again: later tests need today's schema

    Group.objects.create(name="after")
    after = governance_stamp(assume_current=False)
    assert after is not None and after > before, (before, after)
    assert governance_cached("review-ai", lambda: "as after") == "as after"
