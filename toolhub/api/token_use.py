"""Stamp a token's latest use, at most once per token per ``STAMP_RESOLUTION``.

An administrator retiring credentials asks "which tokens does nobody use any more?" and, after a leak, "was this
one used, and where?". ``token_owner`` stamps every token it accepts (REST and MCP alike), never one it refuses.
A stamp is one upsert, and only when the stored one is older than the resolution, whatever channel it names: a
busy client costs one write per window, not one per request (a key used over REST and MCP in turn wrote at each
request while a change of channel wrote). So the channel is the one of the window's first use. Its use is read with
the token (one join), so an unchanged stamp costs no statement at all. A stamp is bookkeeping: one that cannot be
written (a read-only database, a lock or statement bound) is logged and the request goes on.

Uses are recorded from the moment the table was made (migration ``0050_api_token_use``): a token older than that
with no stamp may have been used every day before it, so it is not "never used" (:func:`uses_recorded_since`).

A token's deletion deletes its use row, then the token: a stamp committed between the two statements left a row
naming the deleted token, and the deferred foreign key failed the deletion (a password reset, a deactivation) at its
commit. So a token to be deleted is locked first (:func:`_token_deleting`, on every path: a revocation, its page, its
user's deletion, ``drf_create_token -r``): a stamp's check of its token then waits for the deletion and finds it gone.
"""

import logging
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db import DatabaseError, IntegrityError, models, transaction
from django.db.models.signals import pre_delete
from django.utils import timezone

__all__ = ["STAMP_RESOLUTION", "TokenChannel", "TokenGone", "install", "token_use_stamp", "uses_recorded_since"]

logger = logging.getLogger(__name__)

#: How stale a token's "last used" may be: a use within this window of the stored one writes nothing.
STAMP_RESOLUTION = timedelta(minutes=5)


class TokenChannel(models.TextChoices):
    """Where a token was presented: the REST API or the MCP server (both read it through ``token_owner``)."""

    REST = "rest", "REST API"
    MCP = "mcp", "MCP"


#: The migration that made the use table: from when it was applied, every accepted token is stamped.
USE_TABLE_MIGRATION = ("toolhub", "0050_api_token_use")


def uses_recorded_since(using: str = "default") -> datetime | None:
    """When tokens' uses began to be recorded (the use table's migration applied), ``None`` if nothing says.

    A token made before then and never stamped since is unknown before it, not "never used": retiring it as such on
    the day of the upgrade would cut off a client that uses it monthly. Read from ``django_migrations`` (one row).
    """
    from django.db.migrations.recorder import MigrationRecorder

    app, name = USE_TABLE_MIGRATION
    applied = MigrationRecorder.Migration.objects.using(using).filter(app=app, name=name).values_list("applied")
    found = applied.first()
    return found[0] if found is not None else None


class TokenGone(Exception):
    """The token was deleted (revoked, replaced) between its lookup and its stamp."""


def token_use_stamp(token: Any, channel: str) -> None:
    """Record that ``token`` (read with ``select_related("use")``) authenticated a request over ``channel`` now."""
    from toolhub.models import ApiTokenUse

    now = timezone.now()
    try:
        use = token.use
    except ObjectDoesNotExist:
        use = None
    if use is not None and now - use.last_used_at < STAMP_RESOLUTION:
        return
    try:
        with transaction.atomic():
            ApiTokenUse.objects.bulk_create(
                [ApiTokenUse(token_id=token.pk, last_used_at=now, channel=channel)],
                update_conflicts=True,
                unique_fields=["token"],
                update_fields=["last_used_at", "channel"],
            )
    except IntegrityError as gone:  # its token row went in the meantime: the key no longer authenticates
        raise TokenGone from gone
    except DatabaseError as failed:  # its savepoint rolled back: the request's own work goes on
        logger.warning("An API token's use was not recorded (%s): %s", channel, failed.__class__.__name__)


def _token_deleting(sender: Any, instance: Any, using: str = "default", **kwargs: Any) -> None:
    """Lock a token about to be deleted, before its use row goes (in the deletion's transaction; see above)."""
    sender._base_manager.using(using).select_for_update().filter(key=instance.key).values_list("key").first()


def install() -> None:
    """Lock every token being deleted before the collector deletes its use (``pre_delete`` runs first)."""
    from rest_framework.authtoken.models import Token

    pre_delete.connect(_token_deleting, sender=Token, dispatch_uid="toolhub.api.token_use")
