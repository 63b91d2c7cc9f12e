"""The demo tools, autodiscovered like any app's ``tools.py``."""

import datetime as dt
import enum
from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Any

from django.db import transaction
from django.utils import timezone
from pydantic import BaseModel, Field

from demo.models import Account, LedgerEntry, Order
from toolhub import Param, Risk, Secret, ToolContext, ToolError, tool

Money = Annotated[Decimal, Field(gt=0, max_digits=14, decimal_places=2)]


class Operation(enum.Enum):
    """An arithmetic operation."""

    ADD = "+"
    SUBTRACT = "-"
    MULTIPLY = "*"
    DIVIDE = "/"


class OrderOut(BaseModel):
    order_id: int
    product: str
    amount: Decimal
    created_at: dt.datetime


@tool(risk=Risk.LOW, idempotent=True, group="utilities", category="time")
def current_time() -> dt.datetime:
    """Return the current date and time (UTC)."""
    return timezone.now()


@tool(risk=Risk.LOW, idempotent=True, group="utilities", category="time")
def days_between(start: dt.date, end: dt.date) -> int:
    """Count the days from one date to another.

    Args:
        start: The first date (ISO 8601, e.g. 2025-01-31).
        end: The second date; negative results mean it is before ``start``.
    """
    return (end - start).days


@tool(risk=Risk.LOW, idempotent=True, group="utilities", category="math")
def calculate(
    a: Annotated[float, Param("The left operand.")],
    op: Annotated[Operation, Param("The operation: +, -, * or /.")],
    b: Annotated[float, Param("The right operand.")],
) -> float:
    """Apply an arithmetic operation to two numbers."""
    if op is Operation.DIVIDE:
        if b == 0:
            raise ToolError("Division by zero is undefined; ask the user for a non-zero divisor.")
        return a / b
    if op is Operation.ADD:
        return a + b
    if op is Operation.SUBTRACT:
        return a - b
    return a * b


#: The channels the demo notification service knows.
NOTIFY_CHANNELS = ("#general", "#ops", "#sales")


@tool(
    risk=Risk.MEDIUM,
    group="utilities",
    category="notifications",
    presets={"api_key": Secret("DEMO_NOTIFY_API_KEY")},
)
def send_notification(
    channel: Annotated[str, Param("Where to post: #general, #ops or #sales.")],
    message: Annotated[str, Param("What to post."), Field(min_length=1, max_length=500)],
    api_key: str,
    ctx: ToolContext,
) -> dict[str, Any]:
    """Post a message to one of the team's notification channels.

    The service's API key comes from the environment variable DEMO_NOTIFY_API_KEY on the workers; the
    model never sees it, and toolhub replaces it by ``[secret]`` wherever the tool's output would show it.
    Without it, calls fail with "the tool is not configured on this server" (the detail names the variable).
    """
    if channel not in NOTIFY_CHANNELS:
        # Like many HTTP clients, the demo service echoes the request it refused, credentials included:
        # what the model and the trail get reads "Bearer [secret]".
        raise ToolError(
            f"The notification service refused channel {channel!r} (POST https://notify.example/v1/messages, "
            f"Authorization: Bearer {api_key}); use one of {', '.join(NOTIFY_CHANNELS)}."
        )
    return {"channel": channel, "delivered": True, "notification_id": f"ntf-{ctx.idempotency_key or 'local'}"}


@tool(risk=Risk.LOW, idempotent=True, group="orders", category="orders")
def get_order(order_id: Annotated[int, Param("The order's number.")], ctx: ToolContext) -> OrderOut:
    """Look up an order of the current tenant."""
    order = Order.objects.filter(pk=order_id, tenant=ctx.tenant or "").first()
    if order is None:
        raise ToolError(f"There is no order {order_id} for this tenant.")
    return OrderOut(order_id=order.pk, product=order.product, amount=order.amount, created_at=order.created_at)


def _large_order(arguments: Mapping[str, Any], ctx: ToolContext) -> str | None:
    amount = arguments.get("amount")
    if amount is not None and Decimal(str(amount)) > Decimal("1000"):
        return "orders above 1000 need an operator's approval"
    return None


@tool(risk=Risk.MEDIUM, needs_approval=_large_order, group="orders", category="orders")
def create_order(
    product: Annotated[str, Param("What to order."), Field(min_length=1, max_length=200)],
    amount: Annotated[Money, Param("The order's total, in the account currency.")],
    ctx: ToolContext,
) -> OrderOut:
    """Create an order; orders above 1000 wait for an operator's approval."""
    order = Order.objects.create(
        product=product,
        amount=amount,
        tenant=ctx.tenant or "",
        created_by=ctx.user or "",
        call_id=ctx.idempotency_key or "",
    )
    return OrderOut(order_id=order.pk, product=order.product, amount=order.amount, created_at=order.created_at)


def _account(account_id: str, ctx: ToolContext, *, lock: bool = False) -> Account:
    accounts = Account.objects.select_for_update() if lock else Account.objects.all()
    account = accounts.filter(account_id=account_id, tenant=ctx.tenant or "").first()
    if account is None:
        raise ToolError(f"There is no account {account_id!r} for this tenant.")
    return account


@tool(risk=Risk.LOW, idempotent=True, group="ledger", category="ledger")
def get_balance(account_id: Annotated[str, Param("The account's id, e.g. ACC-1.")], ctx: ToolContext) -> Decimal:
    """Return an account's balance."""
    return _account(account_id, ctx).balance


@tool(risk=Risk.MEDIUM, group="ledger", category="ledger")  # compensated by refund_debit, below
def debit(
    account_id: Annotated[str, Param("The account to take money from.")],
    amount: Annotated[Money, Param("How much to take.")],
    ctx: ToolContext,
) -> dict[str, Any]:
    """Take money from an account."""
    with transaction.atomic():
        account = _account(account_id, ctx, lock=True)
        if account.balance < amount:
            raise ToolError(f"Account {account_id} has insufficient funds for {amount}.")
        account.balance -= amount
        account.save(update_fields=["balance"])
        LedgerEntry.objects.create(account=account, amount=-amount, kind="debit", call_id=ctx.idempotency_key or "")
    return {"tx_id": ctx.idempotency_key or "", "account_id": account_id, "amount": amount, "balance": account.balance}


def _undo(account: Account, entry: LedgerEntry, *, kind: str, ctx: ToolContext) -> None:
    """Book the entry that undoes ``entry`` on the locked ``account``, unless one already did.

    One undoing entry per entry (``LedgerEntry.reverses`` is one-to-one): a compensation is a tool like any
    other, so a model or a member may ask for it again, under another idempotency key; money moves once.
    """
    if LedgerEntry.objects.filter(reverses=entry).exists():
        return
    if account.balance - entry.amount < 0:
        raise ToolError(
            f"Account {account.account_id} holds {account.balance}, less than the {entry.amount} to take back; "
            "an operator must settle it."
        )
    account.balance -= entry.amount
    account.save(update_fields=["balance"])
    LedgerEntry.objects.create(
        account=account, amount=-entry.amount, kind=kind, call_id=ctx.idempotency_key or "", reverses=entry
    )


def _undone(
    kind: str, undo_kind: str, tx_id: str, account_id: str, amount: Decimal, ctx: ToolContext
) -> dict[str, Any]:
    """Undo the ``kind`` entry booked by the call ``tx_id`` on this tenant's ``account_id``; the account after."""
    signed = -amount if kind == "debit" else amount
    with transaction.atomic():
        account = _account(account_id, ctx, lock=True)
        entry = LedgerEntry.objects.filter(account=account, kind=kind, call_id=tx_id, amount=signed).first()
        if entry is None or not tx_id:
            raise ToolError(f"There is no {kind} {tx_id} of {amount} on account {account_id}; nothing to undo.")
        _undo(account, entry, kind=undo_kind, ctx=ctx)
    return {"undone": tx_id, "account_id": account_id, "amount": amount, "balance": account.balance}


@debit.compensation(idempotent=True, risk=Risk.MEDIUM, group="ledger", category="ledger")
def refund_debit(
    tx_id: Annotated[str, Param("The debit's transaction id.")],
    account_id: Annotated[str, Param("The account that was debited.")],
    amount: Annotated[Money, Param("How much was debited.")],
    ctx: ToolContext,
) -> dict[str, Any]:
    """Pay a debit back (its compensation); a debit is paid back once, however often this is asked."""
    return _undone("debit", "refund", tx_id, account_id, amount, ctx)


@tool(risk=Risk.MEDIUM, group="ledger", category="ledger")  # compensated by reverse_credit, below
def credit(
    account_id: Annotated[str, Param("The account to pay money into.")],
    amount: Annotated[Money, Param("How much to pay in.")],
    ctx: ToolContext,
) -> dict[str, Any]:
    """Pay money into an account; a frozen account refuses it."""
    with transaction.atomic():
        account = _account(account_id, ctx, lock=True)
        if account.frozen:
            raise ToolError(f"Account {account_id} is frozen and cannot receive money.")
        account.balance += amount
        account.save(update_fields=["balance"])
        LedgerEntry.objects.create(account=account, amount=amount, kind="credit", call_id=ctx.idempotency_key or "")
    return {"tx_id": ctx.idempotency_key or "", "account_id": account_id, "amount": amount, "balance": account.balance}


@credit.compensation(idempotent=True, risk=Risk.MEDIUM, group="ledger", category="ledger")
def reverse_credit(
    tx_id: Annotated[str, Param("The credit's transaction id.")],
    account_id: Annotated[str, Param("The account that was credited.")],
    amount: Annotated[Money, Param("How much was credited.")],
    ctx: ToolContext,
) -> dict[str, Any]:
    """Take a credit back (its compensation); once per credit, and only while the account still holds it."""
    return _undone("credit", "reversal", tx_id, account_id, amount, ctx)
