"""Tool API v2: one options object, needs_approval=, compensate_with=<tool>, from_function; old spellings warn."""

import typing
from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import BaseModel

from toolhub import FunctionToolOptions, Tool, ToolContext, ToolOptions, tool
from toolhub.checks import check_tools
from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.inputs import ExternalInputs, FieldsInputs, ModelInputs, SchemaInputs, SignatureInputs
from toolhub.tools.options import FUNCTION_TOOL_OPTIONS, TOOL_OPTIONS
from toolhub.tools.registry import ToolRegistry, registry


def _over_limit(arguments: Mapping[str, Any], ctx: ToolContext) -> str | None:
    return "over the limit" if arguments.get("amount", 0) > 100 else None


def pay(amount: int) -> None:
    """Pay."""


class Numbers(BaseModel):
    a: int
    b: int


class Total(BaseModel):
    total: int


# One options object


def test_the_options_are_declared_once_and_typed() -> None:
    # the accepted options are the TypedDict's keys, and every key has a type IDEs can show
    assert frozenset(ToolOptions.__optional_keys__) == TOOL_OPTIONS
    assert TOOL_OPTIONS < FUNCTION_TOOL_OPTIONS
    assert {"name", "description", "presets", "input_model", "output_model"} == FUNCTION_TOOL_OPTIONS - TOOL_OPTIONS
    hints = typing.get_type_hints(FunctionToolOptions)
    assert set(hints) == FUNCTION_TOOL_OPTIONS
    # disclosure reads these names
    assert {"category", "tags", "always_visible"} <= TOOL_OPTIONS


def test_an_unknown_option_lists_the_known_ones_for_every_factory() -> None:
    with pytest.raises(
        ToolDefinitionError, match=r"'pay': unknown option\(s\) retries; known options: .*needs_approval"
    ):
        tool(retries=3)(pay)  # type: ignore[call-overload]
    with pytest.raises(ToolDefinitionError, match=r"unknown option\(s\) presets"):
        Tool.create("made", "Made.", {"x": int}, lambda arguments: None, presets={"x": 1})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(ToolDefinitionError, match=r"unknown option\(s\) input_model"):
        Tool.external("remote", "Remote.", None, input_model=Numbers)  # type: ignore[typeddict-unknown-key]


@pytest.mark.parametrize(
    ("made", "strategy"),
    [
        (lambda: tool(pay).tool, SignatureInputs),
        (lambda: Tool.create("fields", "Fields.", {"a": int}, lambda arguments: None), FieldsInputs),
        (lambda: Tool.create("model", "Model.", Numbers, lambda numbers: None), ModelInputs),
        (
            lambda: Tool.create("schema", "Schema.", {"properties": {"a": {"type": "integer"}}}, lambda a: 1),
            SchemaInputs,
        ),
        (lambda: Tool.external("outside", "Outside.", Numbers), ExternalInputs),
    ],
)
def test_each_way_of_declaring_inputs_is_one_strategy(made: Any, strategy: type) -> None:
    built = made()
    assert isinstance(built.inputs, strategy)
    assert built.json_schema["type"] == "object"


# needs_approval


def test_needs_approval_takes_a_bool_or_a_rule_returning_a_reason() -> None:
    always = Tool.from_function(pay, needs_approval=True)
    never = Tool.from_function(pay, name="pay_never", risk="high", needs_approval=False)
    rule = Tool.from_function(pay, name="pay_rule", needs_approval=_over_limit)

    assert always.needs_approval is True and never.needs_approval is False
    assert rule.needs_approval is _over_limit and tool(pay).tool.needs_approval is None


@pytest.mark.parametrize(
    ("old", "new"), [("always", True), ("never", False), ("auto", None), (_over_limit, _over_limit)]
)
def test_approval_still_works_for_one_release_with_a_deprecation_warning(old: Any, new: Any) -> None:
    with pytest.warns(DeprecationWarning, match="approval= is deprecated; use needs_approval=") as record:
        legacy = Tool.from_function(pay, approval=old)
    assert record[0].filename == __file__  # the warning names the developer's line
    with pytest.warns(DeprecationWarning) as decorated:
        tool(approval=old)(pay)
    assert decorated[0].filename == __file__
    modern = Tool.from_function(pay, needs_approval=new)

    assert legacy.needs_approval is new
    assert legacy.version == modern.version  # upgrading changes no tool's version: no approval comes back
    with pytest.warns(DeprecationWarning, match="Tool.approval is deprecated"):
        assert legacy.approval == (old if isinstance(old, str) else _over_limit)


def test_approval_and_needs_approval_together_or_a_bad_value_are_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="'pay': pass needs_approval= only"):
        Tool.from_function(pay, approval="always", needs_approval=True)
    with pytest.raises(ToolDefinitionError, match="'pay': approval must be 'auto', 'always', 'never'"):
        with pytest.warns(DeprecationWarning):
            Tool.from_function(pay, approval="sometimes")
    with pytest.raises(ToolDefinitionError, match="'pay': needs_approval must be True, False or a callable"):
        Tool.from_function(pay, needs_approval="always")  # type: ignore[typeddict-item]


def test_the_check_reports_a_rule_that_cannot_take_arguments_and_ctx() -> None:
    def only_arguments(arguments: Mapping[str, Any]) -> str | None:
        return None

    bad = Tool.from_function(pay, name="pay_bad_rule", risk="low", needs_approval=only_arguments)  # type: ignore[typeddict-item]

    with registry.temporarily(bad):
        problems = [p for p in check_tools() if p.obj == "pay_bad_rule"]
    assert [p.id for p in problems] == ["toolhub.E007"]
    assert "rule(arguments, ctx)" in problems[0].msg and "reason" in problems[0].hint


# compensate_with


def test_compensate_with_takes_the_function_or_the_tool_itself() -> None:
    @tool(idempotent=True, risk="low")
    def refund(amount: int) -> None:
        """Refund."""

    by_function = Tool.from_function(pay, name="pay_a", compensate_with=refund)
    by_tool = Tool.from_function(pay, name="pay_b", compensate_with=refund.tool)  # type: ignore[attr-defined]
    by_name = Tool.from_function(pay, name="pay_c", compensate_with="refund")

    target = ToolRegistry()
    for built in (refund.tool, by_function, by_tool, by_name):  # type: ignore[attr-defined]
        target.register(built)
    target.freeze()
    assert by_function.compensate_with == by_tool.compensate_with == by_name.compensate_with == "refund"


def test_a_reference_taken_before_the_decorator_sees_the_compensation() -> None:
    @tool(risk="medium")
    def debit(amount: int) -> dict:
        """Debit."""
        return {}

    captured = debit.tool  # type: ignore[attr-defined]

    @debit.compensation(idempotent=True, risk="low")  # type: ignore[attr-defined]
    def refund_debit(amount: int) -> dict:
        """Refund."""
        return {}

    assert captured.compensate_with == "refund_debit" and captured is debit.tool  # type: ignore[attr-defined]
    assert captured.with_note("Copied.").compensate_with == "refund_debit"


def test_a_compensation_is_fixed_once_the_registry_freezes() -> None:
    @tool(risk="low")
    def step(x: int) -> None:
        """Step."""

    target = ToolRegistry()
    target.register(step)
    target.freeze()

    with pytest.raises(ToolDefinitionError, match="'step': its compensation cannot change once the registry is frozen"):

        @step.compensation  # type: ignore[attr-defined]
        def undo_step(x: int) -> None:
            """Undo."""


def test_a_compensation_that_is_no_tool_fails_the_freeze_and_the_check() -> None:
    def not_a_tool(x: int) -> None:
        """Not a tool."""

    bad = Tool.from_function(pay, name="pay_bad", risk="low", compensate_with=not_a_tool)
    with registry.temporarily(bad):
        problems = [p for p in check_tools() if p.obj == "pay_bad"]
    assert [p.id for p in problems] == ["toolhub.E006"]
    assert "is not a tool" in problems[0].msg and "@tool function" in problems[0].hint

    target = ToolRegistry()
    target.register(bad)
    with pytest.raises(ToolDefinitionError, match="'pay_bad': compensate_with=.*is not a tool"):
        target.freeze()


def test_a_tool_cannot_compensate_itself_nor_take_two_compensations() -> None:
    with pytest.raises(ToolDefinitionError, match="cannot compensate itself"):
        Tool.from_function(pay, compensate_with="pay")

    @tool(risk="low", compensate_with="undo_a")
    def act(x: int) -> None:
        """Act."""

    with pytest.raises(ToolDefinitionError, match="'act' is compensated by 'undo_a' already"):

        @act.compensation  # type: ignore[attr-defined]
        def undo_b(x: int) -> None:
            """Undo b."""


# from_function: the one way from a function


def test_from_function_with_models_is_the_decorator_with_models() -> None:
    @tool(input_model=Numbers, output_model=Total, risk="low")
    def add(numbers: Numbers, ctx: ToolContext) -> dict:
        """Add two numbers."""
        return {"total": numbers.a + numbers.b}

    built = add.tool  # type: ignore[attr-defined]
    assert built.description == "Add two numbers." and built.input_type is Numbers
    assert built.invoke(built.validate_arguments({"a": 2, "b": "3"}), ToolContext()) == Total(total=5)
    assert list(built.json_schema["properties"]) == ["a", "b"]
    with pytest.raises(ToolDefinitionError, match="'add': presets= fill a function's parameters"):
        Tool.from_function(add, input_model=Numbers, presets={"a": 1})


def test_the_old_factories_warn_and_build_the_same_tool() -> None:
    with pytest.warns(DeprecationWarning, match=r"Tool.from_callable\(fn\) is deprecated"):
        old = Tool.from_callable(pay, risk="low")
    assert old.json_schema == Tool.from_function(pay).json_schema

    with pytest.warns(DeprecationWarning, match=r"from_function\(name, description, In, Out, fn\) is deprecated"):
        legacy = Tool.from_function("adder", "Add.", Numbers, Total, lambda n: Total(total=n.a + n.b))
    assert legacy.name == "adder" and legacy.invoke({"a": 1, "b": 2}) == Total(total=3)
    with pytest.raises(ToolDefinitionError, match="'adder': the input type must be a pydantic model"):
        with pytest.warns(DeprecationWarning):
            Tool.from_function("adder", "Add.", dict, Total, lambda n: n)  # type: ignore[call-overload]


# Module structure


def test_the_tool_package_has_no_import_cycle() -> None:
    # every import between toolhub/tools modules, at module level or inside a function, goes one way
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "toolhub" / "tools"
    graph: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        tree = ast.parse(path.read_text())
        graph[path.stem] = {
            node.module.split(".")[2]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("toolhub.tools.")
        }

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        for dependency in graph.get(start, set()) - seen:
            if dependency == target or reaches(dependency, target, seen | {dependency}):
                return True
        return False

    cyclic = sorted(module for module in graph if reaches(module, module, set()))
    assert cyclic == []
