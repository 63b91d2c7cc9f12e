"""How many ``?wait=`` long-polls one user holds at once: each holds a web worker and a database connection.

The follow itself is bounded (``CALL_WAIT_MAX_SECONDS``), but GETs are not throttled: without a cap one user sending a
handful of waits at once (a WSGI server has a few workers) would hold every worker, and the console and the API with
them, for as long as they kept sending. The count lives in the shared cache (the throttles' one), so it holds across
processes; a request past the cap answers at once with the call as it is, as ``?wait=0`` would.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.cache import cache

from toolhub.conf import toolhub_settings

__all__ = ["wait_slot"]

#: Extra life of a count past the longest wait: a process killed mid-wait leaves its slot taken at most this long.
_SLOT_SPARE_SECONDS = 60


@contextmanager
def wait_slot(user_id: int) -> Iterator[bool]:
    """Take one of the user's wait slots for the block; yields whether one was free (else: do not wait)."""
    settings = toolhub_settings()
    key = f"toolhub:call-waits:{user_id}"
    cache.add(key, 0, timeout=int(settings.CALL_WAIT_MAX_SECONDS) + _SLOT_SPARE_SECONDS)
    try:
        held = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=int(settings.CALL_WAIT_MAX_SECONDS) + _SLOT_SPARE_SECONDS)
        held = 1
    try:
        yield held <= settings.CALL_WAITS_PER_USER
    finally:
        try:
            cache.decr(key)
        except ValueError:  # the count expired meanwhile: nothing left to give back
            pass
