"""How many ``?wait=`` long-polls one user holds at once: each holds a web worker and a database connection.

The follow itself is bounded (``CALL_WAIT_MAX_SECONDS``), but GETs are not throttled: without a cap one user sending a
handful of waits at once (a WSGI server has a few workers) would hold every worker, and the console and the API with
them, for as long as they kept sending. The slots live in the shared cache (the throttles' one), so they hold across
processes when it is shared (``DJANGO_CACHE_URL``); a request past the cap answers at once with the call as it is, as
``?wait=0`` would.

Each slot is its own cache key, taken with ``add`` (atomic in every backend) and living on its own: one count for all
of a user's waits would expire under the waits still holding it, and their releases would then count down a fresh
count below zero, one more free slot each time (a user who kept waiting gained ``CALL_WAITS_PER_USER`` every cycle).
"""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.cache import cache

from toolhub.conf import toolhub_settings

__all__ = ["wait_slot"]

#: Extra life of a slot past the longest wait: a process killed mid-wait leaves its slot taken at most this long.
_SLOT_SPARE_SECONDS = 60


@contextmanager
def wait_slot(user_id: int) -> Iterator[bool]:
    """Take one of the user's wait slots for the block; yields whether one was free (else: do not wait)."""
    settings = toolhub_settings()
    life = int(settings.CALL_WAIT_MAX_SECONDS) + _SLOT_SPARE_SECONDS
    token = uuid.uuid4().hex
    keys = (f"toolhub:call-wait:{user_id}:{slot}" for slot in range(settings.CALL_WAITS_PER_USER))
    taken = next((key for key in keys if cache.add(key, token, timeout=life)), None)
    try:
        yield taken is not None
    finally:
        # Only a slot still ours is given back: one that outlived its life may be another wait's now.
        if taken is not None and cache.get(taken) == token:
            cache.delete(taken)
