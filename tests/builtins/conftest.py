"""Fixtures for the built-in tools: registered for the test, a workspace root, grants for tenant acme."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
from django.contrib.auth.models import User

from tests.builtins.allowlist import SHELL_COMMANDS
from tests.helpers import RequestCall
from toolhub import registry
from toolhub.builtins.tools import BUILTIN_TOOLS
from toolhub.catalogue import tool_catalogue_sync
from toolhub.models import AuditEvent, Grant, Tenant, TenantMembership, ToolCall, ToolDefinition

NAMES = [fn.tool.name for fn in BUILTIN_TOOLS]  # type: ignore[attr-defined]


class CallBuiltin(Protocol):
    def __call__(
        self, name: str, arguments: dict[str, Any], *, tenant: str = "acme", user: User | None = None
    ) -> ToolCall: ...


@pytest.fixture
def root(tmp_path: Path, settings: Any) -> Path:
    """The workspace root (one directory per tenant inside), and a small shell allow list."""
    root = tmp_path / "workspaces"
    settings.TOOLHUB = {
        **settings.TOOLHUB,
        "WORKSPACE_ROOT": str(root),
        "SHELL_COMMANDS": SHELL_COMMANDS,
    }
    return root


@pytest.fixture
def builtins(db: None, root: Path) -> Iterator[None]:
    """The built-in tools registered and in the catalogue, at their default (high) risk."""
    with registry.temporarily(*BUILTIN_TOOLS):
        tool_catalogue_sync()
        yield


@pytest.fixture
def globex_member(other_tenant: Tenant) -> User:
    user = User.objects.create_user("gina", "gina@example.com", "gina-password")
    TenantMembership.objects.create(user=user, tenant=other_tenant)
    return user


@pytest.fixture
def granted(builtins: None, tenant: Tenant, other_tenant: Tenant) -> None:
    """Both tenants hold explicit grants, and an operator lowered the risk so granted calls run unattended."""
    for holder in (tenant, other_tenant):
        Grant.objects.bulk_create([Grant(tenant=holder, tool_name=name) for name in NAMES])
    ToolDefinition.objects.filter(name__in=NAMES).update(risk_override="low")


@pytest.fixture
def call_builtin(request_call: RequestCall, alice: User) -> CallBuiltin:
    """Call a built-in tool as alice (tenant acme) would through a run: the tenant is in the context."""

    def call(name: str, arguments: dict[str, Any], *, tenant: str = "acme", user: User | None = None) -> ToolCall:
        return request_call(name, arguments, user or alice, tenant=tenant, context={"tenant": tenant})

    return call


def refusal(call: ToolCall) -> dict[str, Any]:
    """The data of the call's one ``builtin.refused`` audit event."""
    (event,) = AuditEvent.objects.filter(call_id=call.id, event_type="builtin.refused")
    return json.loads(event.data)


def tree(path: Path) -> list[str]:
    """Every path under ``path``, relative, sorted (to prove nothing was written)."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []
