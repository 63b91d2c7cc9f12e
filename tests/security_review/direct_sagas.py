"""Direct (REST-style) saga calls for the sagas reviews: the sample saga tools, and a call whose settling is lost.

Shared by reviews 2026-12-05 dk and 2026-12-06 bd; ``saga_tools`` is a fixture (registered in ``conftest``).
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.sagas.sample_tools import LOG, RELEASE_FAILS, TOOLS
from toolhub import ToolContext
from toolhub.authorization import CallPrincipal
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.sagas.models import Compensation, CompensationStatus, Rollback, Saga
from toolhub.signals import call_settled
from toolhub.tools.registry import registry

__all__ = ["compensation_under_way", "direct_call", "saga_tools", "settling_unheard", "unheard_call"]


@pytest.fixture
def saga_tools(settings: Any) -> Iterator[None]:
    """The sample saga tools registered, their log cleared, retries three with a 10 s base."""
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 3, "SAGA_RETRY_BASE_SECONDS": 10.0}
    LOG.clear()
    RELEASE_FAILS["on"] = False
    with registry.temporarily(*TOOLS):
        yield


def direct_call(name: str, arguments: dict[str, Any], *, saga: str, user: User) -> ToolCall:
    """``user``'s direct call of ``name`` in acme's saga ``saga``, executed in process."""
    principal = CallPrincipal(user_id=user.pk, username=user.username, tenant="acme")
    call = tool_call_request(
        request=CallRequest(
            tool_name=name, arguments=arguments, principal=principal, context=ToolContext(tenant="acme"), saga_id=saga
        )
    )
    call.refresh_from_db()
    return call


@contextmanager
def settling_unheard() -> Iterator[None]:
    """Calls settling inside notify nobody: the process died between their commit and the notification."""
    receivers = call_settled.receivers
    call_settled.receivers = []
    try:
        call_settled.sender_receivers_cache.clear()
        yield
    finally:
        call_settled.receivers = receivers
        call_settled.sender_receivers_cache.clear()


def unheard_call(name: str, arguments: dict[str, Any], *, saga: str, user: User) -> ToolCall:
    """A direct call whose settling the sagas never heard of (the process died between commit and notification)."""
    with settling_unheard():
        return direct_call(name, arguments, saga=saga, user=user)


def compensation_under_way(saga: Saga, rollback: Rollback) -> None:
    """``rollback`` truly under way: one of its compensations is running (one with none left would finish at once).

    Shared by reviews 2026-12-05 dq and dx, whose runs wait for a rollback under way.
    """
    step = ToolCall.objects.create(
        tool_name="record_effect", status=CallStatus.SUCCEEDED, kind=CallKind.CALL, tenant=saga.tenant
    )
    Compensation.objects.create(
        saga=saga,
        rollback=rollback,
        sequence=1,
        step_call=step,
        step_tool="record_effect",
        tool_name="undo_effect",
        status=CompensationStatus.RUNNING,
    )
