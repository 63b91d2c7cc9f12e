"""When each API token last authenticated a request: what an administrator reads to retire tokens nobody uses."""

from django.db import models

from toolhub.api.token_use import TokenChannel


class ApiTokenUse(models.Model):
    """A token's latest use, kept to ``toolhub.api.token_use.STAMP_RESOLUTION`` (one write per token per window).

    A row of its own, not a column of DRF's token table: DRF's model stays as it is (its admin, its migrations), and
    the row goes with its token (``CASCADE``: a revoked, replaced or deleted token leaves no trace of its use here).
    It holds no key: the token table's primary key is the key's digest (``toolhub.api.keys``).
    """

    token = models.OneToOneField("authtoken.Token", on_delete=models.CASCADE, primary_key=True, related_name="use")
    last_used_at = models.DateTimeField()
    channel = models.CharField(max_length=8, choices=TokenChannel.choices)

    def __str__(self) -> str:
        return f"{self.token} used {self.last_used_at:%Y-%m-%d %H:%M} over {self.get_channel_display()}"
