"""``@tool.compensation`` and ``compensate_with=``: declare the compensating tool; no reference goes stale."""

import pytest

from toolhub import Tool, tool
from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.definition import TOOL_ATTRIBUTE
from toolhub.tools.registry import ToolRegistry, autodiscover, registry


def test_compensation_makes_a_tool_and_points_the_original_at_it() -> None:
    # given
    @tool(risk="medium")
    def book(room: str) -> dict:
        """Book a room."""
        return {"booking_id": "B1"}

    before = book.tool

    # when
    @book.compensation
    def cancel_booking(booking_id: str) -> dict:
        """Cancel a booking."""
        return {}

    # then the compensation is a tool of its own, the function still works, and book points at it
    assert isinstance(cancel_booking.tool, Tool) and cancel_booking.tool.name == "cancel_booking"
    assert cancel_booking("B1") == {}
    assert book.tool.compensate_with == "cancel_booking"
    assert getattr(book, TOOL_ATTRIBUTE) is book.tool
    # a reference taken before the decorator ran is the same tool, and sees the compensation too
    assert book.tool is before and before.compensate_with == "cancel_booking"


def test_compensation_takes_tool_options_and_a_mapping() -> None:
    @tool
    def reserve(item: str) -> dict:
        """Reserve."""
        return {}

    def mapping(arguments: dict, result: dict) -> dict:
        return {"what": arguments["item"]}

    @reserve.compensation(mapping=mapping, idempotent=True, name="release_item")
    def release(what: str) -> dict:
        """Release."""
        return {}

    assert release.tool.name == "release_item" and release.tool.idempotent
    assert reserve.tool.compensate_with == "release_item"
    assert reserve.tool.compensation_mapping is mapping


def test_an_existing_tool_can_be_the_compensation_but_takes_no_options_there() -> None:
    @tool
    def lock(item: str) -> dict:
        """Lock."""
        return {}

    @lock.compensation
    @tool(idempotent=True)
    def unlock(item: str) -> dict:
        """Unlock."""
        return {}

    assert lock.tool.compensate_with == "unlock" and unlock.tool.idempotent
    with pytest.raises(ToolDefinitionError, match="already a tool"):

        @lock.compensation(idempotent=True)
        @tool
        def unlock_again(item: str) -> dict:
            """Unlock again."""
            return {}


def test_compensate_with_still_works_as_an_option() -> None:
    @tool(compensate_with="refund_debit")
    def debit(amount: int) -> dict:
        """Debit."""
        return {}

    assert debit.tool.compensate_with == "refund_debit" and debit.tool.compensation_mapping is None


def test_autodiscovery_registers_both_tools_with_the_compensation_declared() -> None:
    target = ToolRegistry()
    autodiscover(["tests.testapp"], target=target)
    assert target.get("saga_step").compensate_with == "undo_saga_step"
    assert target.get("undo_saga_step").idempotent
    assert registry.get("saga_step").compensate_with == "undo_saga_step"


def test_the_demo_debit_is_compensated_by_an_idempotent_refund() -> None:
    debit, refund = registry.get("debit"), registry.get("refund_debit")
    assert debit is not None and refund is not None
    assert debit.compensate_with == "refund_debit" and refund.idempotent
