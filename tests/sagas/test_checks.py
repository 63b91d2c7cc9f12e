"""System checks: a compensation that cannot be satisfied fails at startup."""

import dataclasses

from toolhub import tool
from toolhub.sagas.checks import check_compensations
from toolhub.tools.registry import registry


@dataclasses.dataclass
class Booking:
    booking_id: str
    room: str


def _ids(messages: list) -> list[str]:
    return [message.id for message in messages if message.obj in {"book_room", "cancel_room", "undo_room"}]


def test_a_required_parameter_missing_from_a_known_result_type_is_an_error() -> None:
    @tool
    def book_room(room: str) -> Booking:
        """Book a room."""
        return Booking("B1", room)

    @book_room.compensation(idempotent=True)
    def cancel_room(reservation_code: str, room: str) -> dict:
        """Cancel."""
        return {}

    with registry.temporarily(book_room, cancel_room):
        problems = [m for m in check_compensations() if m.obj == "book_room"]
    assert [m.id for m in problems] == ["toolhub.E101"]
    assert "reservation_code" in problems[0].msg and "mapping" in problems[0].hint


def test_names_found_in_the_result_type_or_the_arguments_pass() -> None:
    @tool
    def book_room(room: str) -> Booking:
        """Book a room."""
        return Booking("B1", room)

    @book_room.compensation(idempotent=True)
    def cancel_room(bookingId: str, ROOM: str, note: str = "") -> dict:  # noqa: N803 - names are matched loosely
        """Cancel."""
        return {}

    with registry.temporarily(book_room, cancel_room):
        assert _ids(check_compensations()) == []


def test_a_mapping_skips_the_name_check_but_must_take_arguments_and_result() -> None:
    @tool
    def book_room(room: str) -> Booking:
        """Book a room."""
        return Booking("B1", room)

    @book_room.compensation(mapping=lambda arguments: {}, idempotent=True)
    def cancel_room(reservation_code: str) -> dict:
        """Cancel."""
        return {}

    with registry.temporarily(book_room, cancel_room):
        assert _ids(check_compensations()) == ["toolhub.E102"]


def test_a_compensation_that_is_not_idempotent_is_warned_about() -> None:
    @tool
    def book_room(room: str) -> dict:
        """Book a room."""
        return {}

    @book_room.compensation
    def undo_room(room: str) -> dict:
        """Undo."""
        return {}

    with registry.temporarily(book_room, undo_room):
        assert _ids(check_compensations()) == ["toolhub.W101"]


def test_the_installed_tools_pass() -> None:
    assert [m for m in check_compensations() if m.level >= 30] == []


def test_a_sensitive_argument_filled_into_a_compensation_that_does_not_declare_it_is_an_error() -> None:
    """The value would show on the compensation's call; the step's result is looked in first, so a field of it
    by that name is not the sensitive argument."""

    @tool(sensitive=("card_token", "pin"))
    def book_room(room: str, card_token: str, pin: str) -> Booking:
        """Book a room, paid by card."""
        return Booking("B1", room)

    @book_room.compensation(idempotent=True)
    def cancel_room(booking_id: str, cardToken: str, pin: str) -> dict:  # noqa: N803 - names are matched loosely
        """Cancel and refund."""
        return {}

    @tool(sensitive=("card_token", "pin"), compensate_with="undo_room")
    def book_suite(room: str, card_token: str, pin: str) -> Booking:
        """Book a suite, paid by card."""
        return Booking("S1", room)

    @tool(idempotent=True, sensitive=("card_token", "pin"))
    def undo_room(booking_id: str, card_token: str, pin: str) -> dict:
        """Cancel and refund (declares both sensitive)."""
        return {}

    with registry.temporarily(book_room, cancel_room):
        problems = [m for m in check_compensations() if m.obj == "book_room"]
    assert [m.id for m in problems] == ["toolhub.E103"]
    assert "cardToken, pin" in problems[0].msg and "sensitive=('cardToken', 'pin')" in problems[0].hint

    with registry.temporarily(book_suite, undo_room):
        assert [m.id for m in check_compensations() if m.obj == "book_suite"] == []
