"""Tools of acme's books during which the world changes (a membership deleted, a key revoked): a request's wait.

Each test appends to ``WHILE_RUNNING`` what changes while the tool runs; ``report_tool`` registers both tools for it.
"""

import time
from collections.abc import Iterator
from typing import Any

import pytest

from toolhub.tools import tool
from toolhub.tools.definition import Risk
from toolhub.tools.progress import Progress
from toolhub.tools.registry import registry

__all__ = ["WHILE_RUNNING", "acme_ledger", "acme_report", "report_tool"]

#: What the tool does while it runs (set by each test): the world changes during the request's wait.
WHILE_RUNNING: list[Any] = []


@tool(risk=Risk.LOW)
def acme_report(note: str) -> str:
    """A report of acme's books (the world changes while it is written)."""
    for change in WHILE_RUNNING:
        change()
    return f"acme books: {note}"


@tool(risk=Risk.LOW, timeout=30)
def acme_ledger(progress: Progress) -> str:
    """Read acme's ledger in two steps, reporting each (the world changes between them)."""
    progress.update("step 1: opened the ledger", current=1, total=2)
    time.sleep(1.0)  # the MCP follower sends what is new every 0.2 s
    for change in WHILE_RUNNING:
        change()
    progress.update("step 2: acme ledger balance 1,234,567", current=2, total=2)
    time.sleep(1.0)
    return "ledger read"


@pytest.fixture
def report_tool() -> Iterator[None]:
    WHILE_RUNNING.clear()
    with registry.temporarily(acme_report, acme_ledger):
        yield
    WHILE_RUNNING.clear()
