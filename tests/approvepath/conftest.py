"""Fixtures for the approval-path suite: a call held for approval, re-used from the approval suites."""

from tests.approvals.conftest import hold  # noqa: F401 - the fixture, shared with the approval suites
