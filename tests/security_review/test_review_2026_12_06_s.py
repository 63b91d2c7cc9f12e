"""Review of 2026-12-06 (s): reviews j (wait slots, bounded login attempts, docs page) and p (who asked a rollback).

Findings (fail on ba19785, pass after the fix):
- ``toolhub.api.wait_slots`` counted a user's ``?wait=`` long-polls in one cache key whose life began with the first
  wait and was never renewed: it expired under waits still holding it, new waits were counted afresh from 0, and the
  old ones' releases then counted the fresh key below zero, each cycle adding ``CALL_WAITS_PER_USER`` to what one
  user holds (a user always waiting held 4 workers after 90 s, 6 after 180 s, ...). Each slot is now its own key.

Checked and holds:
- a wait's slot is given back when the wait raises (the ``finally``), and a slot left by a killed process frees
  itself after ``CALL_WAIT_MAX_SECONDS`` + 60 s; ``add`` is atomic in LocMem and Redis (``SET NX``).
- the in-process adapters' waits (LangGraph, OpenAI Agents, Pydantic AI) run in the developer's own process and hold
  no web worker; MCP's follow is ``call_wait_async`` (sleeps in the event loop, a thread only per read): neither
  should share the API's cap.
- ``BoundedAttemptsHandler`` only adds a trim after ``AxesDatabaseHandler.user_login_failed``: the lockout, the
  lockout signal (the audit event), reset on success (``user_logged_in`` is not overridden) and the project's
  ``AXES_LOCKOUT_PARAMETERS`` (username, address) are axes' own; the trim finds the row by the key axes wrote it
  under (``get_client_username``, ``axes_ip_address``, ``axes_user_agent``) and is one UPDATE of the row, so
  concurrent failures (serialized per pair by ``login_guard``, row-locked on PostgreSQL otherwise) each read the
  latest text; between axes' commit and the trim the row holds at most one attempt's text more than the bound.
- ``/api/docs/`` answers GET and HEAD only (review j's test).
"""

from collections.abc import Iterator
from contextlib import ExitStack
from types import SimpleNamespace

import pytest
from django.core.cache import cache
from django.core.cache.backends import base as cache_base
from django.core.cache.backends import locmem

from toolhub.api.wait_slots import wait_slot
from toolhub.conf import toolhub_settings


@pytest.fixture
def cache_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """The local-memory cache's clock, moved by hand (its expiry reads ``time.time``)."""
    now = [1_000_000.0]
    clock = SimpleNamespace(time=lambda: now[0])
    monkeypatch.setattr(locmem, "time", clock)
    monkeypatch.setattr(cache_base, "time", clock)
    cache.clear()
    yield now
    cache.clear()


def test_a_user_who_keeps_waiting_never_holds_more_than_the_cap(cache_clock: list[float]) -> None:
    """Found: the user's one wait count lived ``CALL_WAIT_MAX_SECONDS`` + 60 s from the first wait, renewed by none:
    waits taken just before it expired still held their slots when it did, and the next waits were counted from 0,
    so one user held twice the cap (then, their releases counting the new key below zero, three times, ...).
    Expect: however waits follow each other, one user holds at most ``CALL_WAITS_PER_USER`` at once."""
    settings = toolhub_settings()
    cap, longest = settings.CALL_WAITS_PER_USER, settings.CALL_WAIT_MAX_SECONDS
    with wait_slot(7001) as free:  # a first wait, long over before the next ones
        assert free
    cache_clock[0] += longest + 55
    with ExitStack() as holding:
        assert all(holding.enter_context(wait_slot(7001)) for _ in range(cap))
        cache_clock[0] += 10  # both still well within the longest wait
        more = [holding.enter_context(wait_slot(7001)) for _ in range(cap)]
        assert more == [False] * cap
    assert all(holding.enter_context(wait_slot(7001)) for _ in range(cap)), "the slots were given back"


def test_a_wait_that_raises_gives_its_slot_back(cache_clock: list[float]) -> None:
    """Found: nothing (holds). Expect: a wait ending in an error frees its slot; a slot never given back (a killed
    process) frees itself once the longest wait and a minute have passed."""
    cap = toolhub_settings().CALL_WAITS_PER_USER
    for _ in range(cap + 1):
        with pytest.raises(RuntimeError), wait_slot(7002) as free:
            assert free
            raise RuntimeError("the wait failed")
    leaked = [wait_slot(7003) for _ in range(cap)]
    assert all(slot.__enter__() for slot in leaked)
    with wait_slot(7003) as free:
        assert not free
    cache_clock[0] += toolhub_settings().CALL_WAIT_MAX_SECONDS + 61
    with wait_slot(7003) as free:
        assert free
