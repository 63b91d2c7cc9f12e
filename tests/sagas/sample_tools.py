"""Tools of the saga tests, run in-process (eager); registered with ``registry.temporarily`` by a fixture."""

from toolhub import ToolContext, ToolError, tool

LOG: list[tuple[str, str]] = []
RELEASE_FAILS = {"on": False}


@tool
def book(item: str, ctx: ToolContext) -> dict:
    """Book an item."""
    LOG.append(("book", item))
    return {"bookingId": f"B-{item}", "item": item}


@book.compensation(idempotent=True)
def cancel_booking(booking_id: str, ctx: ToolContext) -> dict:
    """Cancel a booking."""
    LOG.append(("cancel", booking_id))
    return {"cancelled": booking_id, "key": ctx.idempotency_key}


@tool
def reserve(item: str) -> dict:
    """Reserve an item."""
    LOG.append(("reserve", item))
    return {"ok": True}


@reserve.compensation(idempotent=True)
def release(item: str) -> dict:
    """Release an item; refused while RELEASE_FAILS is on."""
    if RELEASE_FAILS["on"]:
        raise ToolError(f"the warehouse refused to release {item}")
    LOG.append(("release", item))
    return {"released": item}


@tool
def lossy(item: str) -> dict:
    """A step whose result lacks what its compensation needs."""
    return {"nothing": "useful"}


@lossy.compensation(idempotent=True)
def unlossy(receipt: str) -> dict:
    """Needs a receipt nobody gave."""
    return {}


@tool(
    compensate_with="cancel_booking",
    compensation_mapping=lambda arguments, result: {"booking_id": f"{result['ref']}/{arguments['item']}"},
)
def book_mapped(item: str) -> dict:
    """Book with a reference the compensation must be built from."""
    return {"ref": "R9"}


@tool(idempotent=True)
def reverse_auth(auth_ref: str, card_check: str) -> dict:
    """Reverse an authorisation (``card_check`` is not declared sensitive)."""
    LOG.append(("reverse", auth_ref))
    return {"reversed": auth_ref}


@tool(
    sensitive=("cvv",),
    compensate_with="reverse_auth",
    compensation_mapping=lambda arguments, result: {"auth_ref": result["ref"], "card_check": [arguments["cvv"]]},
)
def authorise(cvv: str, amount: int) -> dict:
    """Authorise a payment; its mapping copies the short sensitive CVV, nested, into a parameter shown in clear."""
    LOG.append(("authorise", str(amount)))
    return {"ref": "AU-1"}


#: Processor handles by card: the lookup by a sensitive argument that raises ``KeyError(<card>)``.
HANDLES: dict[str, str] = {}


@tool(
    sensitive=("card",),
    compensate_with="reverse_auth",
    compensation_mapping=lambda arguments, result: {
        "auth_ref": result["ref"],
        "card_check": HANDLES[arguments["card"]],
    },
)
def charge(card: str) -> dict:
    """Charge a card; its mapping raises an error quoting the card."""
    LOG.append(("charge", "card"))
    return {"ref": "CH-1"}


@tool
def explode(reason: str) -> str:
    """Fail."""
    raise ToolError(f"exploded: {reason}")


TOOLS = (book, cancel_booking, reserve, release, lossy, unlossy, book_mapped, reverse_auth, authorise, charge, explode)
