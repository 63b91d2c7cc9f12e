"""Demo data the demo tools act on: accounts with a ledger, and orders."""

from decimal import Decimal

from django.db import models


class Account(models.Model):
    """A demo account; a frozen account refuses credits."""

    account_id = models.CharField(max_length=50, unique=True)
    owner = models.CharField(max_length=100)
    tenant = models.CharField(max_length=100, blank=True)
    balance = models.DecimalField(max_digits=14, decimal_places=2, default=Decimal("0"))
    frozen = models.BooleanField(default=False)

    def __str__(self) -> str:
        return self.account_id


class LedgerEntry(models.Model):
    """One movement of money, with the call that made it (side effects are counted from here)."""

    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="entries")
    amount = models.DecimalField(max_digits=14, decimal_places=2)
    kind = models.CharField(max_length=10)
    call_id = models.CharField(max_length=64, blank=True, db_index=True)
    #: The entry this one undoes (a refund its debit, a reversal its credit): one each, so asking twice moves
    #: money once, whoever asks and under whichever key.
    reverses = models.OneToOneField("self", null=True, blank=True, on_delete=models.PROTECT, related_name="reversed_by")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "ledger entries"

    def __str__(self) -> str:
        return f"{self.kind} {self.amount} on {self.account_id}"


class Order(models.Model):
    """A demo order."""

    product = models.CharField(max_length=200)
    amount = models.DecimalField(max_digits=14, decimal_places=2)
    tenant = models.CharField(max_length=100, blank=True)
    created_by = models.CharField(max_length=150, blank=True)
    call_id = models.CharField(max_length=64, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Order {self.pk}: {self.product} ({self.amount})"
