"""The built-in tools on a real Celery worker: approval then one run, caps, time limit, no secret, refusals."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.integration.workers import Worker, wait_for
from toolhub import registry
from toolhub.authorization import CallPrincipal
from toolhub.builtins.tools import BUILTIN_TOOLS
from toolhub.catalogue import tool_catalogue_sync
from toolhub.celery import app as celery_app
from toolhub.models import AuditEvent, CallStatus, Grant, Tenant, ToolCall, ToolDefinition
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SECRET = "sk-worker-environment-secret"


@pytest.fixture
def builtins_worker(tmp_path: Path, settings: Any, tenant: Tenant) -> Iterator[Path]:
    """A worker of its own queue with the built-in tools installed, a secret in its environment; the root."""
    from tests.builtins.allowlist import SHELL_COMMANDS

    root = tmp_path / "workspaces"
    settings.TOOLHUB = {**settings.TOOLHUB, "WORKSPACE_ROOT": str(root), "SHELL_COMMANDS": SHELL_COMMANDS}
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = f"{previous}-builtins"
    worker = Worker(
        "builtins",
        concurrency=1,
        DJANGO_SETTINGS_MODULE="tests.builtins.worker_settings",
        TOOLHUB_TEST_WORKSPACE_ROOT=str(root),
        TOOLHUB_TEST_API_KEY=SECRET,
        CELERY_TASK_DEFAULT_QUEUE=celery_app.conf.task_default_queue,
    )
    worker.start()
    try:
        with registry.temporarily(*BUILTIN_TOOLS):
            tool_catalogue_sync()
            names = [fn.tool.name for fn in BUILTIN_TOOLS]  # type: ignore[attr-defined]
            Grant.objects.bulk_create([Grant(tenant=tenant, tool_name=name) for name in names])
            ToolDefinition.objects.filter(name__in=names).update(risk_override="low")
            yield root
    finally:
        worker.stop()
        celery_app.control.purge()
        celery_app.conf.task_default_queue = previous


def _request(alice: User, tool_name: str, arguments: dict[str, Any]) -> ToolCall:
    principal = CallPrincipal(user_id=alice.pk, username=alice.username, tenant="acme")
    return tool_call_request(
        request=CallRequest(
            tool_name=tool_name, arguments=arguments, principal=principal, context=ToolContext({"tenant": "acme"})
        )
    )


def _settled(call: ToolCall) -> ToolCall:
    return wait_for(  # type: ignore[return-value]
        lambda: (row := ToolCall.objects.get(pk=call.pk)).is_settled and row, timeout=60, what=f"call {call.tool_name}"
    )


def test_built_in_tools_on_a_worker(builtins_worker: Path, alice: User, operator: User) -> None:
    root = builtins_worker
    # an off-list command waits, nothing runs; approved, it runs once on the worker, without the worker's secrets
    held = _request(alice, "execute_shell_command", {"argv": ["sh", "-c", "echo ran >> runs.txt; env"]})
    assert held.status == CallStatus.PENDING_APPROVAL
    assert not (root / "acme" / "runs.txt").exists()
    approval_approve(request_id=ApprovalRequest.objects.get(call=held).pk, user=operator)
    ran = _settled(held)
    assert ran.status == CallStatus.SUCCEEDED, ran.error
    assert ran.worker.startswith("builtins-")
    assert (root / "acme" / "runs.txt").read_text() == "ran\n"
    assert SECRET not in ran.result["stdout"]
    assert "TOOLHUB_TEST_API_KEY" not in ran.result["stdout"]

    # a listed command's output is capped; a listed command past the limit is stopped
    capped = _settled(_request(alice, "execute_shell_command", {"argv": ["seq", "1", "100000"]}))
    assert capped.result["truncated"] is True
    assert "[output truncated at 1000 bytes:" in capped.result["stdout"]
    slow = _settled(_request(alice, "execute_shell_command", {"argv": ["sleep", "30"]}))
    assert slow.status == CallStatus.FAILED
    assert "did not finish within 1 s and was stopped" in slow.error

    # a path leaving the workspace is refused and audited on the worker too
    escaped = _settled(_request(alice, "write_text_file", {"file_path": "../escaped.txt", "content": "x"}))
    assert escaped.status == CallStatus.FAILED
    assert AuditEvent.objects.filter(call_id=escaped.pk, event_type="builtin.refused").count() == 1
    assert not (root / "escaped.txt").exists()
