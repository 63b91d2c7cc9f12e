"""Console sessions stored by their key's digest: a reader of the database holds no working session.

Django's database sessions keep the cookie's value, the session key, as ``django_session.session_key``: whoever read
the table (a backup, a read role, a SQL console, a dump) sent it as ``sessionid`` and was any signed-in
administrator, on the console and (``toolhub.api.sessions``) the REST API. As API keys (``toolhub.api.keys``), the
column holds the key's digest (:func:`~toolhub.api.keys.key_digest`, 40 hex: the column's width); the cookie carries
the key, and every lookup, write, rotation (``cycle_key``) and deletion digests it first. A row stored before, its key
in clear, is found by no cookie: its holder signs in again, once. ``SESSION_ENGINE`` names this module.

Expired rows sign in no one but stay until deleted: beat deletes them (:func:`sessions_clear_expired`, run by
``toolhub.tasks.sessions_clear_task``), as Django's ``clearsessions`` would if anything ran it.

No column names a session's user, so :func:`sessions_end` reads who each live session is signed in as from its data:
Django refuses a deactivated account's or a former staff member's session only while that lasts, and the row, kept,
signed its holder in again once the account was reactivated (``toolhub.api.token_revocation`` ends them instead).
"""

import logging
from typing import Any

from django.contrib.auth import SESSION_KEY
from django.contrib.sessions.backends import db
from django.core.exceptions import SuspiciousOperation
from django.utils import timezone

from toolhub.api.keys import key_digest

__all__ = ["SessionStore", "sessions_clear_expired", "sessions_end", "sessions_signed_in"]


class SessionStore(db.SessionStore):
    """Django's database session store, its rows found and written by :func:`key_digest` of the session key."""

    def _lookup(self) -> dict[str, Any]:
        return {"session_key": key_digest(self.session_key or ""), "expire_date__gt": timezone.now()}

    def _missing(self, error: Exception) -> None:
        if isinstance(error, SuspiciousOperation):
            logging.getLogger(f"django.security.{error.__class__.__name__}").warning(str(error))
        self._session_key = None

    def _get_session_from_db(self) -> Any:
        try:
            return self.model.objects.get(**self._lookup())
        except (self.model.DoesNotExist, SuspiciousOperation) as error:
            self._missing(error)
            return None

    async def _aget_session_from_db(self) -> Any:
        try:
            return await self.model.objects.aget(**self._lookup())
        except (self.model.DoesNotExist, SuspiciousOperation) as error:
            self._missing(error)
            return None

    def credential_rows(self, session_key: str) -> Any:
        """The row of ``session_key`` (``toolhub.credentials.CredentialRow``): a re-read asks it in its user's read."""
        from toolhub.credentials import CredentialRow

        # Live while it expires later than now, as ``load`` reads it (``expire_date__gt``), not at its expiry instant.
        return CredentialRow(self.model, "session_key", key_digest(session_key), "expire_date", timezone.now(), "gt")

    def exists(self, session_key: str) -> bool:
        return bool(self.model.objects.filter(session_key=key_digest(session_key)).exists())

    async def aexists(self, session_key: str) -> bool:
        return bool(await self.model.objects.filter(session_key=key_digest(session_key)).aexists())

    def create_model_instance(self, data: dict[str, Any]) -> Any:
        row = super().create_model_instance(data)
        row.session_key = key_digest(row.session_key)
        return row

    async def acreate_model_instance(self, data: dict[str, Any]) -> Any:
        row = await super().acreate_model_instance(data)
        row.session_key = key_digest(row.session_key)
        return row

    def delete(self, session_key: str | None = None) -> None:
        key = self.session_key if session_key is None else session_key
        if key is not None:
            self.model.objects.filter(session_key=key_digest(key)).delete()

    async def adelete(self, session_key: str | None = None) -> None:
        key = self.session_key if session_key is None else session_key
        if key is not None:
            await self.model.objects.filter(session_key=key_digest(key)).adelete()


def sessions_signed_in(*, using: str = "default") -> dict[str, list[str]]:
    """Every live session's stored key, by the id (as text) of the user it is signed in as: one read of the table.

    The console's sessions are its staff's, so the read is as long as the signed-in staff's sessions (expired rows,
    which sign in no one, are left to :func:`sessions_clear_expired`).
    """
    store = SessionStore()
    rows = store.model.objects.using(using).filter(expire_date__gt=timezone.now())
    signed_in: dict[str, list[str]] = {}
    for stored, data in rows.values_list("session_key", "session_data").iterator():
        user_id = store.decode(data).get(SESSION_KEY)
        if user_id is not None:
            signed_in.setdefault(str(user_id), []).append(stored)
    return signed_in


def sessions_end(user: Any, *, using: str = "default", signed_in: dict[str, list[str]] | None = None) -> int:
    """Delete every live session signed in as ``user`` (read from each one's data: no column names it); how many.

    ``signed_in``: :func:`sessions_signed_in` read once for several users ended together (a deletion of many), the
    user's entry taken from it; without it the table is read for this user alone. No statement when none is found.
    """
    found = sessions_signed_in(using=using) if signed_in is None else signed_in
    ended = found.pop(user._meta.pk.value_to_string(user), [])
    if ended:
        SessionStore.get_model_class().objects.using(using).filter(session_key__in=ended).delete()
    return len(ended)


def sessions_clear_expired(*, batch: int = 1000, batches: int = 50) -> int:
    """Delete the sessions that expired (they sign in no one); how many. Beat runs it (``sessions_clear_task``).

    Nothing else deletes them (a row goes on sign-out, a password change or a revocation only): the table grew with
    every sign-in for ever. A batch of ``batch`` keys at a time through the ``expire_date`` index, at most ``batches``
    a call, each its own short statement: a first run over years of rows holds no long delete, later ticks go on.
    """
    model = SessionStore.get_model_class()
    now = timezone.now()
    cleared = 0
    for _ in range(batches):
        keys = list(model.objects.filter(expire_date__lt=now).values_list("session_key", flat=True)[:batch])
        if keys:
            cleared += model.objects.filter(session_key__in=keys, expire_date__lt=now).delete()[0]
        if len(keys) < batch:
            break
    return cleared
