"""A compensable tool whose declared result type lacks what its compensation needs."""

import dataclasses

from toolhub import tool


@dataclasses.dataclass
class Shipment:
    shipment_id: str
    carrier: str


@tool(risk="low")
def ship_parcel(address: str) -> Shipment:
    """Ship a parcel."""
    return Shipment("S1", "post")


@ship_parcel.compensation(idempotent=True, risk="low")
def recall_parcel(tracking_number: str, carrier: str) -> dict:
    """Recall a parcel: needs a tracking number, which the shipment does not have."""
    return {}
