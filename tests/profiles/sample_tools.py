"""Tools with the representative parameter types of the profile tests (Decimal with limits, Enum, Optional...)."""

import datetime as dt
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from toolhub import Param, tool


class Color(StrEnum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str
    unit: str | None = None
    color: Color = Color.RED


@tool
def book_stay(
    amount: Annotated[Decimal, Field(max_digits=8, decimal_places=2, ge=0), Param("Amount in EUR.")],
    color: Color,
    on: dt.date,
    mode: Literal["fast", "slow"],
    note: str | None,
    tags: list[str],
    address: Address,
    stops: list[Address] | None = None,
    at: dt.datetime | None = None,
    copies: int = 1,
    fee: Decimal | None = None,
) -> str:
    """Book something."""
    return "ok"


@tool(strict=True)
def book_stay_strictly(
    amount: Annotated[Decimal, Field(max_digits=8, decimal_places=2, ge=0)],
    color: Color,
    address: Address,
    at: dt.datetime | None = None,
    copies: int = 1,
) -> str:
    """Book strictly."""
    return "ok"
