"""Fixtures of the interceptor tests: test tools that record each execution, and interceptors to configure."""

import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.helpers import RequestCall
from tests.testapp.models import SideEffect
from toolhub import ToolContext, registry, tool
from toolhub.interceptors import InterceptedCall, Interceptor, Refuse

#: The names of the interceptors that saw a call, in order, with the phase ("before"/"after").
SEEN: list[tuple[str, str]] = []


@tool(sensitive=("token",))
def send_email(ctx: ToolContext, to: str, body: str, token: str = "") -> str:
    """Send an email.

    Args:
        to: The recipient's address.
        body: The text.
        token: The mail server's access token.
    """
    SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="send_email", note=to)
    return f"sent to {to}"


@tool
def lookup_customer(name: str, ctx: ToolContext) -> dict[str, Any]:
    """Look a customer up.

    Args:
        name: The customer's name.
    """
    SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="lookup_customer", note=name)
    return {
        "name": name,
        "email": "ada.lovelace@example.org",
        "phone": "+44 20 7946 0958",
        "card": "4111 1111 1111 1111",
        "order": "1234 5678 9012 3456",
        "since": "2021-03-04",
        "notes": ["call +1 (415) 555-0132 after 5", "no PII here"],
    }


class Recorder(Interceptor):
    """Records the order it sees calls in; appends its name to a string argument ``body`` when asked."""

    def __init__(self, *, name: str, append: bool = False, refuse: bool = False, suffix_result: bool = False) -> None:
        self.name, self.append, self.refuse, self.suffix_result = name, append, refuse, suffix_result

    def before(self, call: InterceptedCall) -> Refuse | dict[str, Any] | None:
        SEEN.append((self.name, "before"))
        if self.refuse:
            return Refuse(f"{self.name} refuses: recipients outside the company need a manager.")
        if self.append and "body" in call.arguments:
            return {**call.arguments, "body": f"{call.arguments['body']}|{self.name}"}
        return None

    def after(self, call: InterceptedCall, result: Any) -> Any:
        SEEN.append((self.name, "after"))
        return f"{result}|{self.name}" if self.suffix_result else result


class Exploding(Interceptor):
    """Raises in the phase it is told to, with a message holding a value nobody may read."""

    name = "exploding"

    def __init__(self, *, phase: str) -> None:
        self.phase = phase

    def before(self, call: InterceptedCall) -> None:
        if self.phase == "before":
            raise RuntimeError("lookup service down: key=hunter2-internal")

    def after(self, call: InterceptedCall, result: Any) -> Any:
        if self.phase == "after":
            raise RuntimeError("classifier down: key=hunter2-internal")
        return result


class Tokenizer(Interceptor):
    """Rewrites the sensitive ``token`` and the recipient; the diff must hide the token."""

    name = "tokenizer"

    def before(self, call: InterceptedCall) -> dict[str, Any]:
        return {**call.arguments, "to": call.arguments["to"].lower(), "token": "rotated-secret-2"}


class BreaksSchema(Interceptor):
    name = "breaks_schema"

    def before(self, call: InterceptedCall) -> dict[str, Any]:
        return {**call.arguments, "to": 42}


Configure = Callable[..., None]


@pytest.fixture
def interceptors(settings: Any) -> Iterator[Configure]:
    """``interceptors(entry, ...)``: configure TOOLHUB["INTERCEPTORS"]; the test tools are registered meanwhile."""
    SEEN.clear()

    def configure(*entries: Any) -> None:
        settings.TOOLHUB = {**settings.TOOLHUB, "INTERCEPTORS": list(entries)}

    with registry.temporarily(send_email, lookup_customer):
        yield configure
    SEEN.clear()


@pytest.fixture
def request_call(request_call: RequestCall) -> RequestCall:
    """Interceptor calls act for tenant acme."""
    return functools.partial(request_call, tenant="acme")


def recorder(name: str, **options: Any) -> dict[str, Any]:
    return {"class": "tests.interceptors.conftest.Recorder", "options": {"name": name, **options}}


class Unstorable(Interceptor):
    """Replaces the result with something no JSON column stores."""

    name = "unstorable"

    def after(self, call: InterceptedCall, result: Any) -> Any:
        return {"when": object()}
