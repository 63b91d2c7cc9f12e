"""Review 2026-12-06 (ax): a review of reviews al, am, an and ar (merged fixes), adversarially.

Findings (each fails on the code as found, passes with the fix):

1. ``wait_slot_async`` (review an) gave its slot back on a cancel only once the slot had been taken: a wait
   cancelled while the cache was still being asked (the client went away, an anyio deadline) lost the key the
   thread went on to take, and the user's slot stayed taken for its whole life (``CALL_WAIT_MAX_SECONDS`` + 60 s).
   The take is now shielded too, so the cancel lands inside the block and ``finally`` gives the slot back.
2. With the shared cache unreachable, a wait slot's take raised: ``GET /api/v1/calls/{id}/?wait=`` (nothing else
   of a GET needs the cache) answered 500, and ``POST /api/v1/calls/?wait=`` / MCP's followed ``tools/call`` failed
   after the call was already queued (a client retrying runs the tool twice). A slot the cache cannot give is now
   a slot not free (answered at once, a warning logged); one it cannot take back expires with its life.

Checked and holds:

- ``toolhub.asgi_body`` (an): a body exactly at ``DATA_UPLOAD_MAX_MEMORY_SIZE`` passes (Django's own ``>``); a
  disconnect mid-body is replayed to Django (``RequestAborted``); a malformed, negative or repeated
  ``Content-Length`` cannot lift the bound (the bytes read are counted, whatever is declared); the replay hands
  the real ``receive`` on after the body, so Django still hears a disconnect during a streaming response; the
  413 carries ``Connection: close``; under ``/api/`` it is ``body_too_big()``'s shape. No route takes a file upload
  (no ``FileField``, no ``request.FILES``), and ``StorableAddressMiddleware`` already refuses a declared length over
  the same limit on every route under WSGI, so the ASGI bound refuses nothing WSGI accepts. ``/mcp`` routing uses
  the decoded ``path`` (``/mcp/../api`` is not ``/mcp``; Django gets it, bounded).
- ``wait_slot_async``'s give-back is shielded, and a cancel while waiting gives the slot back.
- Review am: ``compensation_askers``'s union (``order_by()`` cleared on both arms, a typed ``NULL``) and migration
  0014 pass on PostgreSQL as on SQLite; the second arm is bound to the compensation's own saga and tenant
  (``saga__compensations__step_call_id`` and ``saga__tenant`` in one ``filter()``: one join), so a rollback of
  another saga never matches.
- ``toolhub.withheld_names`` (ar): the label is only bound inside ``admin_view``; every write that would store a
  grant's or rule's name naming a withheld group (``LogEntry.object_repr``, governance events' ``object`` and
  values, a cascade from deleting a user or role) is refused, since such a grant or rule is read-only to the
  viewer, deletion included (per-object ``has_delete_permission`` in ``get_deleted_objects``). ``shown_pks`` is
  read once per request (no N+1 per ``__str__``).
- Outbound guard (al): NAT64 ``64:ff9b::/96`` of a public IPv4 (``64:ff9b::808:808``) and the IPv6 addresses of
  major providers (Google, Cloudflare, Microsoft) are allowed; ``is_reserved`` is judged after the embedded IPv4
  is read out. The webhook opener keeps ``ProxyHandler`` (HTTPS through a CONNECT proxy as before).
"""

import threading
import time
from typing import Any

import anyio
import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from rest_framework.test import APIClient

import toolhub.api.wait_slots as wait_slots
from tests.helpers import RequestCall
from toolhub.api.wait_slots import wait_slot, wait_slot_async
from toolhub.models import CallStatus


def test_a_wait_cancelled_while_taking_its_slot_gives_it_back(monkeypatch: Any) -> None:
    """Found: a wait cancelled while its slot was still being taken from the cache (0.1 s into a 0.4 s take) left that
    slot taken after the thread finished; with two slots, two such cancels left the user none for a minute and a
    half. Expect: after the cancel, every slot is free again."""
    cache.clear()
    adding = threading.Event()
    real_take = wait_slots._take

    def slow_take(user_id: int) -> tuple[str | None, str]:
        adding.set()
        time.sleep(0.4)  # the cache answering slowly
        return real_take(user_id)

    monkeypatch.setattr(wait_slots, "_take", slow_take)
    waited: list[bool] = []

    async def main() -> None:
        with anyio.move_on_after(0.1):
            async with wait_slot_async(4242) as free:
                waited.append(free)
                await anyio.sleep(5)
        await anyio.sleep(0.6)  # the thread's add has long finished

    anyio.run(main)
    assert adding.is_set()
    with wait_slot(4242) as first, wait_slot(4242) as second:
        assert first and second, "a cancelled wait kept its slot"


class _CacheDown:
    """The shared cache unreachable (Redis restarting): every command raises, as ``redis-py`` does."""

    def __getattr__(self, name: str) -> Any:
        def down(*args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

        return down


@pytest.mark.django_db(transaction=True)
def test_a_long_poll_with_the_cache_down_answers_the_call_as_it_is(
    alice: User, request_call: RequestCall, monkeypatch: Any
) -> None:
    """Found: with the shared cache down, ``GET /api/v1/calls/{id}/?wait=3`` (a GET: no throttle, nothing else
    needs the cache) answered 500, as did ``POST /api/v1/calls/?wait=`` and MCP's ``tools/call`` after the call was
    already queued (a client retrying it runs the tool twice). Expect: a slot that cannot be taken is a slot not
    free: the call is answered at once as it is."""
    call = request_call("crm_lookup", {"email": "ada@acme.example"}, alice, tenant="acme")
    monkeypatch.setattr(wait_slots, "cache", _CacheDown())
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(alice)
    started = time.monotonic()
    answer = client.get(f"/api/v1/calls/{call.pk}/?wait=3")
    assert answer.status_code == 200, answer.content[:300]
    assert answer.json()["status"] == CallStatus.AWAITING_RESULT
    assert time.monotonic() - started < 1.5
