"""Fault points for integration tests, armed only in worker processes started with their variable set."""

import os
import signal
import uuid
from typing import Any

#: Path of a flag file: the worker that settles a run's call while it exists removes it and SIGKILLs itself,
#: after the commit and before anything follows the settle (the run's next step).
DIE_AFTER_SETTLE_ENV = "TOOLHUB_TEST_DIE_AFTER_SETTLE"


def die_after_settle(sender: type, call_id: uuid.UUID, run_id: uuid.UUID | None, **kwargs: Any) -> None:
    flag = os.environ.get(DIE_AFTER_SETTLE_ENV)
    if not flag or run_id is None:
        return
    try:
        os.unlink(flag)  # one shot: the re-delivered task and later calls live on
    except FileNotFoundError:
        return
    os.kill(os.getpid(), signal.SIGKILL)
