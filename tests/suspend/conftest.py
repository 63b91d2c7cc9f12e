"""Fixtures of the seed-feature tests (suspension, argument errors, None results, serial calls)."""

from tests.tools.conftest import request_call, start_run

__all__ = ["request_call", "start_run"]
