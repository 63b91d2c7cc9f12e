"""The approval path's profile (``benchmarks.approval_profile``) attributes every statement of the path to a step."""

from collections.abc import Iterator

import pytest

from benchmarks.approval_profile import STEPS, profile
from toolhub.celery import app

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


@pytest.fixture
def eager() -> Iterator[None]:
    """The execute task run in this process, as the profile runs it."""
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        yield
    finally:
        app.conf.task_always_eager = before


def test_the_profile_completes_every_run_and_accounts_for_the_nine_statements(eager: None) -> None:
    # when two approvals are profiled beside the floor, the worker's part in this process
    result = profile(samples=2)

    # then each of the path's nine statements falls in one of the named steps, and the floor sent its five
    steps = {row["step"]: row for row in result["governed"]["steps"]}
    assert set(steps) <= {step for _, _, step in STEPS}
    assert result["governed"]["statements"] == 9
    assert sum(row["statements"] for row in steps.values()) == 9
    assert result["floor"]["statements"] == 5
