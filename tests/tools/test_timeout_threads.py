"""A tool timed off the main thread runs in a helper thread; that thread's database session is closed after it."""

import threading
from typing import Any

import pytest
from django.db import connections

from toolhub.models import ToolCall
from toolhub.tools.timeouts import call_with_timeout

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.postgres  # SQLite's in-memory test database is one connection shared by every thread
def test_the_helper_threads_connection_is_closed_when_the_tool_returns() -> None:
    seen: dict[str, Any] = {}

    def tool_body() -> int:
        seen["wrapper"] = connections["default"]
        seen["thread"] = threading.current_thread().name
        return ToolCall.objects.count()

    def caller() -> None:
        seen["result"] = call_with_timeout(tool_body, seconds=5, tool_name="counting")

    thread = threading.Thread(target=caller)  # not the main thread: no SIGALRM, so a helper thread
    thread.start()
    thread.join(10)

    assert seen["result"] == 0
    assert seen["thread"] == "toolhub-counting"
    assert seen["wrapper"].connection is None  # the session it opened is closed, not left for the collector
