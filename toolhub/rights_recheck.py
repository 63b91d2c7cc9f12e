"""A download that streams re-reads its reader's rights between chunks: one that outlives them stops.

An export is authorized, scoped and audited when its request begins, then streams for as long as the rows take (a
tenant's whole trail, every call of a filter: minutes). A reader removed from the tenant, deactivated, stripped
of the permission, or whose session or key ended (a password reset) meanwhile must not keep receiving it. Between
chunks, at most every ``STREAM_RIGHTS_RECHECK_SECONDS``, the rights are read again
(``toolhub.tenancy.tenant_scope_now``: the user's row, permissions and memberships as they are now, and the
credential the request came with, ``toolhub.credentials``) and the stream is cut off with
:class:`RightsRevokedError` when they no longer hold. Raising, not ending, is deliberate: the client sees a broken
transfer, never a file that looks complete, and an audit export is recorded as failed. MCP's progress notifications
of a followed call are such a stream too (``RightsRecheck``, asked before each batch of updates). The same re-read
answers every request that waited (``?wait=``, MCP, or work run in the request itself:
``still_visible_after_running_here``): one way to ask "still allowed?".
"""

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from django.db.models import QuerySet

from toolhub.conf import toolhub_settings
from toolhub.dispatch import runs_in_this_process
from toolhub.tenancy import TenantScope, tenant_scope_now

__all__ = [
    "RightsRecheck",
    "RightsRevokedError",
    "console_reader_allowed",
    "scope_still_covers",
    "still_visible_after_running_here",
    "while_permitted",
]

T = TypeVar("T")


class RightsRevokedError(PermissionError):
    """The reader of a stream lost the rights it was started with; the stream stops here."""


def scope_still_covers(now: TenantScope, then: TenantScope) -> bool:
    """Whether the scope read ``now`` still holds every tenant the stream was scoped to ``then``."""
    return now.everything or (not then.everything and then.tenants <= now.tenants)


def console_reader_allowed(user: Any, then: TenantScope, *permissions: str) -> Callable[[TenantScope], bool]:
    """A console download's test: still active staff (the admin's test), any of ``permissions``, ``then``'s tenants.

    ``then`` is the scope the download was cut to when it began.
    """

    def allowed(now: TenantScope) -> bool:
        console = bool(user.is_active and user.is_staff)
        return console and any(user.has_perm(name) for name in permissions) and scope_still_covers(now, then)

    return allowed


class RightsRecheck:
    """A stream's "still allowed?", asked of its reader's rights read again at most every few seconds.

    ``allowed`` is asked of ``user``'s scope read again (``tenant_scope_now``) once ``STREAM_RIGHTS_RECHECK_SECONDS``
    passed since the last reading (in between, the last answer holds); once refused, refused for good. ``allowed``
    also reads ``user`` (refreshed by the re-read) for its flags and permissions.
    """

    def __init__(self, user: Any, allowed: Callable[[TenantScope], bool]) -> None:
        self.user, self.allowed = user, allowed
        self.every = toolhub_settings().STREAM_RIGHTS_RECHECK_SECONDS
        self.checked = time.monotonic()
        self.holding = True

    def holds(self) -> bool:
        """Whether the reader may still be sent the next part (reads the database when the interval is over)."""
        if self.holding and time.monotonic() - self.checked >= self.every:
            self.holding = bool(self.allowed(tenant_scope_now(self.user)))
            self.checked = time.monotonic()
        return self.holding


def while_permitted(chunks: Iterable[T], user: Any, allowed: Callable[[TenantScope], bool]) -> Iterator[T]:
    """``chunks`` while ``allowed`` (asked with ``user``'s scope as it is now) holds, checked between chunks.

    ``allowed`` also reads ``user`` (refreshed by the re-read) for its flags and permissions. Closing this stream
    closes ``chunks`` (its cursor, its export record).
    """
    recheck = RightsRecheck(user, allowed)
    source = iter(chunks)
    try:
        for chunk in source:
            if not recheck.holds():
                raise RightsRevokedError("The reader's rights were revoked while the download streamed.")
            yield chunk
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()


def still_visible_after_running_here(user: Any, visible: Callable[[Any], QuerySet[Any]], pk: Any) -> bool:
    """Whether ``user`` may still read row ``pk`` of ``visible(user)`` after the work their request set off.

    A request that starts a run, resumes one or rolls back a saga runs that work in this process when tasks are eager
    (the embedded default): model turns, tools and compensations, for as long as they take. That was a wait: the
    user's rights are read again (``tenant_scope_now``) and the row asked for among those they may read now, as a
    follow does after its wait. Work sent to a worker waited for nothing: the memo of the request holds, unread.
    """
    if not runs_in_this_process():
        return True
    tenant_scope_now(user)
    return visible(user).filter(pk=pk).exists()
