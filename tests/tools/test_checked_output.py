"""A result that does not match its tool's output type fails with an error that quotes none of its values.

pydantic quotes an offending value cut in the middle; a secret the result repeats would come out in pieces
that the secret scrubber, matching whole values, cannot recognise.
"""

from typing import Annotated, Literal

import pytest
from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

from toolhub.tools.factories import checked_output

SECRET = "sk-live-0123456789abcdefghijklmnopqrstuvwxyz-TAIL"


class Receipt(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Literal["charged", "declined"]


def _refuse(value: str) -> str:
    raise PydanticCustomError("upstream_refused", "the provider refused this answer")


def test_the_error_keeps_title_locations_and_reasons_without_the_values() -> None:
    with pytest.raises(ValidationError) as raised:
        checked_output(Receipt, {"status": "pending", "authorization": f"Bearer {SECRET}"})

    shown = str(raised.value)
    assert raised.value.title == "Receipt" and raised.value.error_count() == 2
    assert "status\n  Input should be 'charged' or 'declined'" in shown and "authorization\n  Extra inputs" in shown
    assert "Bearer" not in shown and SECRET[:12] not in shown and SECRET[-8:] not in shown and "pending" not in shown
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_an_error_pydantic_cannot_rebuild_still_says_where_and_why() -> None:
    with pytest.raises(ValueError, match=r"1 validation error\(s\) for .*: \(root\): the provider refused") as raised:
        checked_output(Annotated[str, AfterValidator(_refuse)], f"Bearer {SECRET}")
    assert SECRET[:12] not in str(raised.value)


def test_a_result_that_matches_is_returned_validated() -> None:
    assert checked_output(Receipt, {"status": "charged"}) == Receipt(status="charged")
