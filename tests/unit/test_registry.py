"""The tool registry: one per process, frozen after startup, temporarily extended in tests."""

import pytest

from toolhub import registry, tool
from toolhub.exceptions import RegistryFrozenError, ToolDefinitionError
from toolhub.tools.registry import ToolRegistry, autodiscover


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def _other_echo(text: str) -> str:
    """Another tool called echo."""
    return text


OTHER_ECHO = tool(name="echo")(_other_echo).tool


@tool
def shout(text: str) -> str:
    """Shout the text."""
    return text.upper()


def test_the_project_registry_is_frozen_after_startup() -> None:
    assert registry.frozen
    assert "create_order" in registry  # demo/tools.py
    assert "record_effect" in registry  # tests/testapp/tools.py

    with pytest.raises(RegistryFrozenError, match="frozen after startup"):
        registry.register(echo)
    assert "echo" not in registry


def test_temporarily_registers_then_restores() -> None:
    # given
    before = registry.names()

    # when
    with registry.temporarily(echo, shout) as added:
        # then the tools are there for the block
        assert [t.name for t in added] == ["echo", "shout"]
        assert registry.get("echo") is echo.tool
        assert "shout" in registry.names()

    # and gone afterwards, the registry still frozen
    assert registry.names() == before
    assert registry.get("echo") is None
    assert registry.frozen


def test_temporarily_restores_after_an_error_in_the_block() -> None:
    before = registry.names()

    with pytest.raises(RuntimeError), registry.temporarily(echo):
        raise RuntimeError("boom")

    assert registry.names() == before


def test_temporarily_refuses_a_duplicate_and_leaves_nothing_behind() -> None:
    before = registry.names()

    with (
        pytest.raises(ToolDefinitionError, match="Duplicate tool name 'echo'"),
        registry.temporarily(shout, echo, OTHER_ECHO),
    ):
        pass  # pragma: no cover - never entered

    assert registry.names() == before
    assert registry.get("shout") is None


def test_temporarily_refuses_a_name_taken_by_a_real_tool() -> None:
    impostor = tool(name="create_order")(_other_echo).tool
    original = registry.get("create_order")

    with pytest.raises(ToolDefinitionError, match="Duplicate tool name 'create_order'"):
        with registry.temporarily(impostor):
            pass  # pragma: no cover

    assert registry.get("create_order") is original


def test_nested_temporarily_blocks() -> None:
    with registry.temporarily(echo):
        with registry.temporarily(shout):
            assert {"echo", "shout"} <= set(registry.names())
        assert "echo" in registry and "shout" not in registry
    assert "echo" not in registry


def test_register_refuses_duplicates_but_accepts_the_same_tool_twice() -> None:
    own = ToolRegistry()

    own.register(echo)
    own.register(echo)  # the same handler again: harmless

    with pytest.raises(ToolDefinitionError, match="Duplicate tool name 'echo'"):
        own.register(OTHER_ECHO)
    assert own.get("echo") is echo.tool
    assert len(own) == 1


def test_register_refuses_what_is_not_a_tool() -> None:
    def plain(x: int) -> None:
        """Not decorated."""

    with pytest.raises(ToolDefinitionError, match="is not a tool"):
        ToolRegistry().register(plain)


def test_a_frozen_registry_refuses_register() -> None:
    own = ToolRegistry()
    own.register(echo)
    own.freeze()

    with pytest.raises(RegistryFrozenError, match="Cannot register tool 'shout'"):
        own.register(shout)
    assert own.names() == ["echo"]


def test_autodiscover_registers_an_apps_tools_then_freezes() -> None:
    own = ToolRegistry()

    autodiscover(["tests.testapp", "toolhub", "an_app_that_does_not_exist"], target=own)

    assert own.frozen
    assert {"record_effect", "risky_effect", "crashes", "always_fails"} <= set(own.names())
    assert "create_order" not in own  # demo is not among the apps given
    assert own.all() == sorted(own.all(), key=lambda t: t.name)
