"""The agentic part of the stored run state: round trip, and malformed input read as nothing."""

from typing import Any

import pytest

from toolhub.disclosure.state import DisclosureState


def test_agentic_and_chained_state_round_trip() -> None:
    state = (
        DisclosureState()
        .with_agentic("order_processor", {"state": "confirmed"})
        .with_chained("customer", {"type": "customer", "call_id": "c", "data": {"id": "c1"}})
    )

    assert DisclosureState.from_json(state.to_json()) == state
    assert state.with_chained("customer", {"data": {"id": "c2"}}).chained["customer"] == {"data": {"id": "c2"}}


def test_a_run_without_agentic_state_stores_what_it_stored_before() -> None:
    assert "agentic" not in DisclosureState().to_json() and "chained" not in DisclosureState().to_json()


@pytest.mark.parametrize(
    "stored",
    [
        {"agentic": "draft", "chained": ["customer"]},
        {"agentic": {"order_processor": "confirmed"}, "chained": {"customer": 3}},
        {"agentic": None, "chained": None},
    ],
)
def test_malformed_agentic_state_reads_as_none(stored: Any) -> None:
    state = DisclosureState.from_json(stored)

    assert state.agentic == {} and state.chained == {}
