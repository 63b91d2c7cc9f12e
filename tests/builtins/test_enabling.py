"""Off until enabled and granted: the app registers the tools, and only an explicit allow grant lets them run."""

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from tests.builtins.conftest import NAMES, CallBuiltin, refusal, tree
from toolhub.builtins.checks import check_builtin_settings
from toolhub.builtins.tools import BUILTIN_TOOLS
from toolhub.models import CallStatus, Grant, Tenant, ToolDefinition, ToolGroup
from toolhub.tools.definition import Risk
from toolhub.tools.export import SCHEMA_PROFILES, profile_parameters
from toolhub.tools.profiles import profile_problems
from toolhub.tools.registry import ToolRegistry, autodiscover, registry


def test_without_the_app_no_built_in_tool_exists() -> None:
    assert not set(NAMES) & set(registry.names())


def test_installing_the_app_registers_them_high_risk_in_the_builtins_group() -> None:
    target = ToolRegistry()

    autodiscover(["toolhub.builtins"], target=target)

    assert sorted(target.names()) == sorted(NAMES)
    assert {tool.risk for tool in target.all()} == {Risk.HIGH}
    assert {tool.group for tool in target.all()} == {"builtins"}


@pytest.mark.usefixtures("builtins")
def test_without_an_explicit_grant_nothing_runs_even_where_every_tool_is_allowed(
    call_builtin: CallBuiltin, root: Path, alice: User
) -> None:
    # given DEFAULT_TOOL_ACCESS = "allow" (the test settings), a superuser, and the risk lowered by an operator
    ToolDefinition.objects.filter(name__in=NAMES).update(risk_override="low")
    alice.is_superuser = True
    alice.save()

    call = call_builtin("write_text_file", {"file_path": "a.txt", "content": "x"})

    assert call.status == CallStatus.FAILED
    assert refusal(call)["code"] == "not_granted"
    assert "needs an explicit grant" in call.error
    assert tree(root.parent) == []


@pytest.mark.usefixtures("builtins")
def test_under_the_production_default_an_ungranted_call_is_denied_before_it_is_queued(
    call_builtin: CallBuiltin, settings: Any
) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}

    call = call_builtin("list_directory", {})

    assert call.status == CallStatus.DENIED
    assert "not granted" in call.error


@pytest.mark.usefixtures("builtins")
def test_a_grant_to_the_users_group_or_for_the_builtins_group_counts_and_another_tenants_does_not(
    call_builtin: CallBuiltin, alice: User, other_tenant: Tenant
) -> None:
    ToolDefinition.objects.filter(name__in=NAMES).update(risk_override="low")
    Grant.objects.create(tenant=other_tenant, tool_name="list_directory")
    assert refusal(call_builtin("list_directory", {}))["code"] == "not_granted"

    writers = Group.objects.create(name="workspace-writers")
    alice.groups.add(writers)
    Grant.objects.create(group=writers, tool_name="list_directory")
    assert call_builtin("list_directory", {}).status == CallStatus.SUCCEEDED
    assert refusal(call_builtin("view_text_file", {"file_path": "a.txt"}))["code"] == "not_granted"

    Grant.objects.create(tenant=Tenant.objects.get(slug="acme"), tool_group=ToolGroup.objects.create(name="builtins"))
    assert call_builtin("write_text_file", {"file_path": "a.txt", "content": "x"}).status == CallStatus.SUCCEEDED


def test_the_checks_report_a_missing_root_and_a_broken_allow_list(settings: Any) -> None:
    settings.TOOLHUB = {
        **settings.TOOLHUB,
        "WORKSPACE_ROOT": "",
        "SHELL_COMMANDS": [{"command": "ls", "arguments": ["["]}, {"command": "/bin/rm"}, {"command": "echo"}],
    }

    messages = check_builtin_settings()

    assert [message.id for message in messages] == [
        "toolhub_builtins.W001",
        "toolhub_builtins.E001",
        "toolhub_builtins.E001",
    ]
    assert "pattern '[' does not compile" in messages[1].msg
    assert "must be a bare name" in messages[2].msg


@pytest.mark.parametrize("profile", SCHEMA_PROFILES)
def test_every_built_in_tool_obeys_each_schema_profile(profile: str) -> None:
    for fn in BUILTIN_TOOLS:
        schema, strict = profile_parameters(fn.tool, profile)  # type: ignore[attr-defined]
        assert profile_problems(schema, profile, strict=strict) == [], fn.__name__
