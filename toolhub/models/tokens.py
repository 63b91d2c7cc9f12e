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


class ApiTokenBinding(models.Model):
    """The password a token was issued under (``toolhub.credentials.password_fingerprint``), asked at each use.

    A row of its own beside DRF's token, as its use is, made with the token (``toolhub.api.token_binding``) and
    gone with it (``CASCADE``). A token with none authenticates no one (one written past the model's save), nor one
    whose account was deactivated since (``token_binding.DEACTIVATED``, written by a trigger whatever deactivated it).
    """

    token = models.OneToOneField("authtoken.Token", on_delete=models.CASCADE, primary_key=True, related_name="binding")
    password_fingerprint = models.CharField(max_length=64, blank=True)

    def __str__(self) -> str:
        return f"binding of {self.token}"
