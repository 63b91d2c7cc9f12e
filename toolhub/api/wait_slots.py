"""How many waits for a call one user holds at once: ``?wait=`` long-polls and MCP's, one cap for every channel.

A ``?wait=`` long-poll holds a web worker and a database connection. The follow itself is bounded
(``CALL_WAIT_MAX_SECONDS``), but GETs are not throttled: without a cap one user sending a handful of waits at once (a
WSGI server has a few workers) would hold every worker, and the console and the API with them, for as long as they
kept sending. MCP's waits (``toolhub_call_status``, a ``tools/call`` following a queued call) sleep in the event loop,
but each of their reads takes a thread of the few every MCP request shares (authentication too): a user with a few
hundred waits open at once kept those threads busy. The slots live in the shared cache (the throttles' one), so they
hold across processes when it is shared (``DJANGO_CACHE_URL``); a wait past the cap answers at once with the call as
it is, as ``?wait=0`` would.

Each slot is its own cache key, taken with ``add`` (atomic in every backend) and living on its own: one count for all
of a user's waits would expire under the waits still holding it, and their releases would then count down a fresh
count below zero, one more free slot each time (a user who kept waiting gained ``CALL_WAITS_PER_USER`` every cycle).

A slot lives as long as the longest wait that may hold it (``CALL_WAIT_MAX_SECONDS``, or MCP's follow of a queued
call, ``MCP_CALL_WAIT_SECONDS``) plus a spare minute: one that expired under its wait would be the user's next wait's.

A slot the cache cannot give (the cache down) is a slot not free: the call is answered as it is, never a server
error after a POST already queued it (a client retrying that would run the tool twice). A slot the cache cannot take
back expires with its life.
"""

import logging
import math
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
from asgiref.sync import sync_to_async
from django.core.cache import cache

from toolhub.conf import ToolhubSettings, toolhub_settings

__all__ = ["wait_slot", "wait_slot_async"]

logger = logging.getLogger(__name__)

#: Extra life of a slot past the longest wait: a process killed mid-wait leaves its slot taken at most this long.
_SLOT_SPARE_SECONDS = 60


def _slot_life(settings: ToolhubSettings) -> int:
    """Seconds a slot lives: the longest wait that may hold it, plus the spare.

    ``?wait=`` and ``toolhub_call_status`` are cut to ``CALL_WAIT_MAX_SECONDS``, but MCP's followed ``tools/call``
    lasts ``MCP_CALL_WAIT_SECONDS``: a slot outlived by its wait is taken by the user's next one, past the cap.
    """
    longest = max(settings.CALL_WAIT_MAX_SECONDS, settings.MCP_CALL_WAIT_SECONDS)
    return math.ceil(longest) + _SLOT_SPARE_SECONDS


def _take(user_id: int) -> tuple[str | None, str]:
    """The key of a free slot of the user's, now taken (``None``: all taken), and the token that marks it ours."""
    settings = toolhub_settings()
    life = _slot_life(settings)
    token = uuid.uuid4().hex
    keys = (f"toolhub:call-wait:{user_id}:{slot}" for slot in range(settings.CALL_WAITS_PER_USER))
    try:
        return next((key for key in keys if cache.add(key, token, timeout=life)), None), token
    except Exception:  # any backend's failure (redis-py's errors are not OSErrors): no slot, answer at once
        logger.warning(
            "A call wait slot could not be taken (the cache failed): answered without waiting", exc_info=True
        )
        return None, token


def _give_back(taken: str | None, token: str) -> None:
    # Only a slot still ours is given back: one that outlived its life may be another wait's now.
    if taken is None:
        return
    try:
        if cache.get(taken) == token:
            cache.delete(taken)
    except Exception:  # the answer stands; the slot expires with its life
        logger.warning("A call wait slot could not be given back (the cache failed)", exc_info=True)


@contextmanager
def wait_slot(user_id: int) -> Iterator[bool]:
    """Take one of the user's wait slots for the block; yields whether one was free (else: do not wait)."""
    taken, token = _take(user_id)
    try:
        yield taken is not None
    finally:
        _give_back(taken, token)


@asynccontextmanager
async def wait_slot_async(user_id: int) -> AsyncIterator[bool]:
    """``wait_slot`` for an event loop: the cache is used off the loop; the slot is given back even on a cancel.

    A wait cancelled (the client went away) would otherwise keep its slot for the slot's whole life. The take is
    shielded too: a cancel while the cache is asked would lose the key its thread still takes; shielded, the cancel
    lands inside the block, whose ``finally`` gives the slot back.
    """
    with anyio.CancelScope(shield=True):
        taken, token = await sync_to_async(_take, thread_sensitive=False)(user_id)
    try:
        yield taken is not None
    finally:
        with anyio.CancelScope(shield=True):
            await sync_to_async(_give_back, thread_sensitive=False)(taken, token)
