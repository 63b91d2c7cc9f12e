"""Review 2026-12-06 (aa): reviews w (MCP serves POST only, unexpected failures answered -32603) and s (``?wait=``
slots one cache key each, ``Rollback.asked_by`` and its migration), as they landed on main (2d5d657).

Findings (fail on 2d5d657, pass after the fix):

- ``sagas.0005_rollback_asked_by``'s data step ran one UPDATE per distinct ``user:<name>`` asker, each reading every
  rollback (``requested_by`` has no index), after a ``SELECT DISTINCT`` that the model's ordering turned into one row
  per rollback: rows times people, while the new column's lock held the table (50,000 rollbacks of 1,000 people: 1,002
  queries, 6.6 s on SQLite). Now one UPDATE, each row finding its account by the unique name.

Checked and found holding (probes run with the SDK 2.3 client against the live server, no test kept):

- The SDK client, in ``legacy`` (handshake 2025-11-25), ``auto`` and pinned ``2026-07-28`` modes alike: initialize or
  discover, ``tools/list``, ``tools/call`` with ``notifications/progress``, an approval-held call answered at once,
  ``toolhub_call_status`` and ``toolhub_cancel_call`` follow-ups. It never sends ``GET`` or ``DELETE`` to a stateless
  server (its standalone stream and its session termination both need a session id, and none is issued), so the 405
  costs it nothing: no warning logged, no reconnection loop. Resumption (``Last-Event-ID``) needs event ids, which a
  server without an event store never sends, so the client never asks for it either.
- Deliberate errors pass ``_sanitized_errors`` with their codes and texts: unknown or hidden tool (-32602), reserved
  ``_meta`` keys (-32602), ``Authentication required`` (-32001), the rate refusal (-32600); bad arguments of a tool and
  of the four stable tools come back as ``isError`` results naming the field (their ``ValidationError`` is caught
  where it is raised); the SDK's own params validation stays -32602 without pydantic text.
- An unexpected failure in ``tools/call`` (raised inside its task group, so an exception group) and in ``tools/list``
  answers -32603 under both eras and is logged once, by ``toolhub.mcp_server`` with its traceback (the SDK does not log
  it again: it sees an ``MCPError``); the log line names only the method, no arguments. Other ``ToolhubError``s a
  handler could meet (a search backend's missing extra) are deployment faults: -32603 is right for the client.
- README's MCP section says ``GET``/``DELETE`` answer 405 ``Allow: POST`` and no session id is issued; it promises no
  SSE stream or resumption.
- ``wait_slot``: 30 concurrent waits of one user took exactly ``CALL_WAITS_PER_USER`` (2) slots on LocMem and on Redis
  (``DJANGO_CACHE_URL=redis://127.0.0.1:6379/12``), and every slot was free after. A release deletes only a slot still
  holding its own token; the get-then-delete gap could remove another wait's slot only if the slot expired in between,
  which needs the releasing thread stalled for over a minute past the longest wait (the follow itself is cut to
  ``CALL_WAIT_MAX_SECONDS``). Keys ``toolhub:call-wait:<user pk>:<slot>`` share no prefix with another cache key.
- The migration: reversible (the data step reverses to nothing, then the column goes); ``system``, ``saga-sweeper``,
  ``user:`` and names with no account now stay unset; ``Rollback.asked_by`` SET_NULL on deleting the user leaves the
  name in ``requested_by`` and the saga's audit events (the trail never read the key), and a deleted account decides
  nothing, so nobody is wrongly barred or let through.
"""

from types import SimpleNamespace

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext

from toolhub.sagas.models import Rollback, Saga

_MIGRATION = ("sagas", "0005_rollback_asked_by")


@pytest.mark.django_db
def test_the_upgrade_reads_every_asker_in_one_statement() -> None:
    """Found: the data step of ``0005_rollback_asked_by`` made one UPDATE per distinct asker, each scanning the whole
    unindexed table (plus a ``SELECT DISTINCT`` read one row per rollback): its cost grew as rows times people while
    the table stayed locked. Expect: a number of queries that does not grow with the number of askers, the same
    result: each ``user:<name>`` its account, the rest (no account, ``user:``, automatic actors, a row already set)
    as they were."""
    module = MigrationExecutor(connection).loader.get_migration(*_MIGRATION)
    data_step = module.operations[-1].code
    apps = MigrationExecutor(connection).loader.project_state(_MIGRATION).apps
    saga = Saga.objects.create(key="aa-upgrade", tenant="acme")
    people = User.objects.bulk_create([User(username=f"aa-asker-{n}") for n in range(30)])
    set_before = User.objects.create(username="aa-already")
    rows = [Rollback(saga=saga, trigger="on_demand", requested_by=f"user:{person.username}") for person in people * 2]
    rows += [
        Rollback(saga=saga, trigger="step_failed", requested_by=text)
        for text in ("system", "saga-sweeper", "user:", "user:aa-nobody")
    ]
    rows.append(Rollback(saga=saga, trigger="on_demand", requested_by="user:aa-asker-0", asked_by=set_before))
    Rollback.objects.bulk_create(rows)

    with CaptureQueriesContext(connection) as queries:
        data_step(apps, SimpleNamespace(connection=connection))

    assert len(queries) <= 2, f"{len(queries)} queries for 30 askers"
    kept = list(Rollback.objects.filter(saga=saga).values_list("requested_by", "asked_by"))
    by_name = {person.username: person.pk for person in people}
    expected = [(f"user:{name}", pk) for name, pk in by_name.items()] * 2
    expected += [("system", None), ("saga-sweeper", None), ("user:", None), ("user:aa-nobody", None)]
    expected.append(("user:aa-asker-0", set_before.pk))
    assert sorted(kept, key=str) == sorted(expected, key=str)
