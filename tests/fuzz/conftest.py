"""Fixtures of the model-output fuzzer: requesting calls without dispatching them, and counting the cases."""

import time
from collections import Counter
from typing import Any

import pytest

#: Cases run, by test and outcome (filled by the fuzz tests, reported at the end of the session).
CASES: Counter[tuple[str, str]] = Counter()
_started = time.monotonic()


def pytest_sessionstart(session: pytest.Session) -> None:
    global _started
    _started = time.monotonic()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say how many cases ran, by test and outcome, and how long the session took."""
    if not CASES:
        return
    by_test: dict[str, Counter[str]] = {}
    for (test, outcome), count in sorted(CASES.items()):
        by_test.setdefault(test, Counter())[outcome] += count
    total = sum(CASES.values())
    terminalreporter.section("model-output fuzz")
    for test, outcomes in by_test.items():
        terminalreporter.write_line(
            f"{test}: {sum(outcomes.values())} cases ({', '.join(f'{k} {v}' for k, v in sorted(outcomes.items()))})"
        )
    terminalreporter.write_line(
        f"total: {total} cases in {time.monotonic() - _started:.1f} s (session, database set-up included)"
    )
