"""Fixtures for governance tests: requesting calls as a principal, holding dispatch, a webhook receiver."""

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.helpers import RequestCall
from toolhub.models import ToolCall


@pytest.fixture
def deny_by_default(settings: Any) -> None:
    """The production default: a user needs a grant."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}


@pytest.fixture
def request_call(request_call: RequestCall, alice: User) -> RequestCall:
    """Request a call as alice (tenant acme) unless ``user`` says otherwise, optionally through an agent."""

    def request(tool: str, arguments: Any, *, user: User | None = None, **options: Any) -> ToolCall:
        who = user or alice
        context = {"tenant": "acme", "user": who.username, "user_id": who.pk}
        return request_call(tool, arguments, who, tenant="acme", context=context, **options)

    return request


class _Receiver(http.server.BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append({"body": body, "headers": dict(self.headers)})
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def webhook_receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local HTTP endpoint that records what it receives."""
    received: list[dict[str, Any]] = []
    handler = type("Receiver", (_Receiver,), {"received": received})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", received
    server.shutdown()
    server.server_close()


def parse(body: bytes) -> dict[str, Any]:
    return json.loads(body)
