"""``TOOLHUB["ARGUMENT_ERROR_HANDLER"]``: what the model is told for arguments that fail the tool's schema."""

from typing import Any

from tests.helpers import RequestCall, audit_text
from toolhub import registry, tool
from toolhub.models import CallStatus

seen: list[tuple[str, list[dict[str, str]]]] = []


def terse(tool_name: str, errors: list[dict[str, str]]) -> str:
    seen.append((tool_name, errors))
    return f"{tool_name}: bad " + ", ".join(error["loc"] for error in errors)


def flood(tool_name: str, errors: list[dict[str, str]]) -> str:
    return "\n".join(["header", *(f"- problem {n} " + "x" * 500 for n in range(100))])


@tool
def book_room(room: int, nights: int) -> str:
    """Book a room."""
    return "booked"


def test_the_configured_handler_writes_the_message_without_the_values(request_call: RequestCall, settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "ARGUMENT_ERROR_HANDLER": "tests.suspend.test_argument_errors.terse"}
    seen.clear()
    with registry.temporarily(book_room):
        call = request_call("book_room", {"room": "suite-secret-value"})

    assert call.status == CallStatus.INVALID
    assert call.error == "book_room: bad room, nights"
    # the handler got locations, messages and types only: never the model's values
    [(name, errors)] = seen
    assert name == "book_room" and [e["loc"] for e in errors] == ["room", "nights"]
    assert set(errors[0]) == {"loc", "msg", "type"} and "suite-secret-value" not in str(errors)
    assert "suite-secret-value" not in audit_text(call)


def test_the_handler_output_is_bounded(request_call: RequestCall, settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "ARGUMENT_ERROR_HANDLER": "tests.suspend.test_argument_errors.flood"}
    with registry.temporarily(book_room):
        call = request_call("book_room", {})

    lines = call.error.split("\n")
    assert call.status == CallStatus.INVALID
    assert len(lines) == 14 and lines[-1] == "- ... and 88 more problem(s) of the same kind."
    assert max(len(line) for line in lines) <= 150


def test_without_a_handler_the_default_message_lists_each_problem(request_call: RequestCall) -> None:
    with registry.temporarily(book_room):
        call = request_call("book_room", {"room": 1})

    assert call.error.startswith("Invalid arguments for tool 'book_room'; nothing was executed.")
    assert "- nights: Field required" in call.error
