"""Stamp a token's latest use, at most once per token per ``STAMP_RESOLUTION``.

An administrator retiring credentials asks "which tokens does nobody use any more?" and, after a leak, "was this
one used, and where?". ``token_owner`` stamps every token it accepts (REST and MCP alike), never one it refuses.
A stamp is one upsert, and only when the stored one is older than the resolution or names another channel: a
busy client costs one write per window, not one per request. Its use is read with the token (one join), so an
unchanged stamp costs no statement at all.
"""

from datetime import timedelta
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db import IntegrityError, models, transaction
from django.utils import timezone

__all__ = ["STAMP_RESOLUTION", "TokenChannel", "TokenGone", "token_use_stamp"]

#: How stale a token's "last used" may be: a use within this window of the stored one writes nothing.
STAMP_RESOLUTION = timedelta(minutes=5)


class TokenChannel(models.TextChoices):
    """Where a token was presented: the REST API or the MCP server (both read it through ``token_owner``)."""

    REST = "rest", "REST API"
    MCP = "mcp", "MCP"


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
    if use is not None and use.channel == channel and now - use.last_used_at < STAMP_RESOLUTION:
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
