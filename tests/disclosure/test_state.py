"""The stored state reads back what was written; anything malformed reads as the empty state."""

from typing import Any

import pytest

from toolhub.disclosure import DisclosureState


def test_state_round_trips_through_json() -> None:
    state = (
        DisclosureState()
        .with_unfolded("database_operations", ["query_table"], exclusive=True)
        .with_hits(["get_weather"])
        .with_groups(["payments"])
        .with_visible(["query_table"])
    )

    assert DisclosureState.from_json(state.to_json()) == state
    assert state.exclusive == "database_operations"


def test_a_second_exclusive_facade_keeps_the_first() -> None:
    state = DisclosureState().with_unfolded("a", ["x"], exclusive=True).with_unfolded("b", ["y"], exclusive=True)

    assert state.exclusive == "a"
    assert dict(state.unfolded) == {"a": ("x",), "b": ("y",)}


@pytest.mark.parametrize(
    "stored",
    [
        None,
        [],
        "text",
        {"hits": "get_weather"},
        {"unfolded": ["a"]},
        {"active_groups": "payments"},
        {"hits": [1, None]},
    ],
)
def test_malformed_state_reads_as_nothing_extra(stored: Any) -> None:
    state = DisclosureState.from_json(stored)

    assert state.hits == () and dict(state.unfolded) == {} and state.active_groups is None and state.exclusive == ""
