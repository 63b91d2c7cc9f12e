"""Review of 2026-12-05 (ab): registering tools as developers write them, mistakes included.

Each test fails on the reviewed code (main at 066a32d) and states who reaches what, where, and what is expected.
The tools are written here as a developer would in an app's ``tools.py`` and checked with ``registry.temporarily``
and the system checks ``manage.py check`` runs.

Findings: a ``sensitive=`` parameter's default (``pin: str = "0000"``, a key read from the settings) was published
in the tool's JSON Schema, so every model, ``/api/v1/tools/``, the provider exports and MCP's list read it
(``Tool.__post_init__`` now refuses a sensitive default other than ``None`` or ``""``, however the inputs are declared:
``Inputs.published_defaults``); a generator function (sync or async) was accepted as a tool: a sync one's body ran
only when the result was serialized for storage, after ``call_with_timeout`` had returned, so its time limit never
applied (a 1 s body under ``timeout=0.2`` succeeded), and every call of an async one failed ("cannot be serialized")
(refused when defined); an ``async def`` ``needs_approval`` rule passed ``toolhub.E007``, and its coroutine, never
awaited, is truthy, so every call was held "the tool's approval rule matched" without the rule being asked; an
``async`` compensation mapping passed ``toolhub.E102`` and made every rollback of the step fail ("returned coroutine,
not a mapping") (both now errors naming the cause); a parameter the model fills in named as a context key toolhub
sets (``user_id``/``userId``, ``agent``, ``run_id``, or ``ctx: dict`` where ``ctx: ToolContext`` was meant) drew no
word, though the model chooses its value (``ctx: dict`` took ``{"user": "admin"}`` from the model): new warning
``toolhub.W005``; a context type named ``Tenant`` or ``User`` (default key ``tenant``/``user``) or registered with
``key="user"`` was accepted, and every call of a tool taking it failed at run time, the boundary's slug or
username never validating into the class (``register_context_type`` refuses it without a ``factory=``).

Checked and found holding (no test here): a tool named like a meta tool (``tool_search``, ``reset_equipped_tools``)
or a built-in, or the same name in two apps, stops startup naming both modules (``ToolRegistry.register``); names
differing in case or ``-``/``_`` are ``toolhub.E003``; ``compensate_with=`` naming no tool is ``E002``/``E006``, a
compensation whose required parameters nothing fills ``E101``, one that would receive a sensitive value ``E103``,
a mapping with the wrong arity ``E102``; a docstring describing a parameter the function lacks is refused when
defined; a parameter without a hint, ``*args``/``**kwargs``, positional-only, ``Optional[ToolContext]``, a callable
or bare ``Any`` type, a ``SecretStr``, and ``sensitive=`` naming a nested field or no parameter are refused when
defined, naming tool and parameter; a type pydantic cannot schema is ``E001``; ``presets=`` with ``input_model=`` is
refused; a preset's own default never reaches the schema (preset names are sensitive and injected); a mutable
default (``items: list = []``) is copied per call by pydantic; a ``tenant`` argument, nested too (``ctx.tenant``
in a model-filled ``ctx: dict``), is refused unless it names the caller's tenant; a ``needs_approval`` rule reading
an argument the call lacks raises ``KeyError`` and holds the call (fail closed); the meta tools, demo and test tools
raise none of the new refusals or ``W005``.

Not fixed (reported): an operator's ``ApprovalRule`` whose ``tool_name`` or ``argument`` names no tool or parameter
(a typo) is saved and never matches (``approvals.rules.rule_matches``), so the calls it was meant to hold run.
"""

import dataclasses
import inspect
from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from toolhub import FromContext, Tool, ToolContext, register_context_type, registry, tool
from toolhub.checks import check_tools
from toolhub.exceptions import ToolDefinitionError
from toolhub.sagas.checks import check_compensations


def _messages(check: Any, tool_name: str, message_id: str) -> list[Any]:
    return [message for message in check() if message.obj == tool_name and message.id == message_id]


def test_a_sensitive_parameters_default_is_published_in_the_tools_schema() -> None:
    """A developer keeps a default PIN (or an API key read from the settings) in the signature and marks it
    ``sensitive=("pin",)``, trusting the README: "never reach the audit trail, the API or the admin".

    Found: the tool is accepted and its JSON Schema says ``"pin": {"type": "string", "default": "0000-sk-live"}``,
    which the model reads in every run, and ``/api/v1/tools/``, the openai/anthropic/gemini exports and MCP's tool
    list publish; likewise for ``Tool.create`` (a ``(type, default)`` pair or a JSON Schema's ``default``) and an
    input model's ``Field(default=...)``.
    Expect: refused when the tool is defined, naming tool and parameter and pointing at ``presets=``/``Secret``;
    a sensitive parameter defaulting to ``None`` or ``""`` (it shows nothing) stays allowed.
    """
    with pytest.raises(ToolDefinitionError, match=r"'pin'.*sensitive.*default.*presets=") as refused:

        @tool(risk="low", sensitive=("pin",))
        def open_door(door: str, pin: str = "0000-sk-live") -> str:
            """Open a door."""
            return door

    assert "0000-sk-live" not in str(refused.value)

    with pytest.raises(ToolDefinitionError, match="'pin'"):
        Tool.create("open_gate", "Open a gate.", {"pin": (str, "0000-sk-live")}, lambda a: "ok", sensitive=("pin",))
    schema = {"type": "object", "properties": {"pin": {"type": "string", "default": "0000-sk-live"}}}
    with pytest.raises(ToolDefinitionError, match="'pin'"):
        Tool.create("open_hatch", "Open a hatch.", schema, lambda a: "ok", sensitive=("pin",))

    class Unlock(BaseModel):
        pin: str = Field("0000-sk-live", description="The PIN.")

    with pytest.raises(ToolDefinitionError, match="'pin'"):
        Tool.from_function(
            lambda request: "ok", name="unlock", description="Unlock.", input_model=Unlock, sensitive=("pin",)
        )

    @tool(risk="low", sensitive=("pin",))
    def open_safe(safe: str, pin: str | None = None) -> str:
        """Open a safe."""
        return safe

    @tool(risk="low", sensitive=("token",))
    def send_note(to: str, token: str = "") -> str:
        """Send a note."""
        return to

    assert open_safe.tool.json_schema["properties"]["pin"].get("default") is None
    assert send_note.tool.json_schema["properties"]["token"]["default"] == ""


def test_a_generator_tool_runs_its_body_past_its_time_limit() -> None:
    """A developer writes a tool that yields its rows (``def export_rows(...): ... yield row``), as one does for
    streaming; another writes ``async def`` and ``yield``.

    Found: both are accepted. Calling the sync one returns a generator at once, so ``call_with_timeout`` returns
    before the body runs; the body runs when ``outcomes._result_value`` serializes the result, outside the time limit
    (a body sleeping 1 s under ``timeout=0.2`` succeeds, an endless one holds the worker for good). Every call of the
    async one fails at run time ("The tool returned a value that cannot be serialized to JSON").
    Expect: refused when defined (``@tool``, ``Tool.create``, a callable object), saying why and what to do.
    """
    with pytest.raises(ToolDefinitionError, match=r"'export_rows'.*generator.*time limit"):

        @tool(risk="low", timeout=0.2)
        def export_rows(n: int) -> Any:
            """Export rows."""
            yield from range(n)

    with pytest.raises(ToolDefinitionError, match=r"'stream_rows'.*generator"):

        @tool(risk="low")
        async def stream_rows(n: int) -> Any:
            """Stream rows."""
            yield n

    def rows(arguments: Mapping[str, Any]) -> Any:
        yield arguments

    with pytest.raises(ToolDefinitionError, match=r"'rows'.*generator"):
        Tool.create("rows", "Rows.", {"n": int}, rows)

    class Rows:
        def __call__(self, arguments: Mapping[str, Any]) -> Any:
            yield arguments

    assert inspect.isgeneratorfunction(Rows.__call__)
    with pytest.raises(ToolDefinitionError, match=r"'rows_object'.*generator"):
        Tool.create("rows_object", "Rows.", {"n": int}, Rows())


def test_an_async_approval_rule_holds_every_call_without_being_asked() -> None:
    """A developer whose rule looks something up writes it ``async def large_refund(arguments, ctx)``, and an
    ``async`` compensation mapping beside it.

    Found: ``manage.py check`` says nothing (``toolhub.E007`` and ``E102`` only bind the arguments). The pipeline
    calls the rule synchronously: the coroutine it gets is truthy, so every call is held "the tool's approval rule
    matched" whatever the amount, the rule never asked (a "never awaited" warning aside); the mapping's coroutine
    is "not a mapping", so every rollback of the step fails to an operator.
    Expect: errors ``toolhub.E007`` and ``toolhub.E102`` that say the function is async.
    """

    async def large_refund(arguments: Mapping[str, Any], ctx: ToolContext) -> str | None:
        return "large" if arguments["amount"] > 500 else None

    async def undo_arguments(arguments: Mapping[str, Any], result: Any) -> Mapping[str, Any]:
        return {"order_id": arguments["order_id"]}

    @tool(risk="low", idempotent=True)
    def unrefund(order_id: int) -> str:
        """Take a refund back."""
        return "ok"

    @tool(risk="medium", needs_approval=large_refund, compensate_with=unrefund, compensation_mapping=undo_arguments)
    def async_ruled_refund(order_id: int, amount: Decimal) -> dict[str, Any]:
        """Refund an order."""
        return {"order_id": order_id}

    with registry.temporarily(async_ruled_refund, unrefund):
        registry_rule = _messages(check_tools, "async_ruled_refund", "toolhub.E007")
        mapping = _messages(check_compensations, "async_ruled_refund", "toolhub.E102")

    assert len(registry_rule) == 1 and "async" in registry_rule[0].msg and "async def" in registry_rule[0].hint
    assert len(mapping) == 1 and "async" in mapping[0].msg


def test_a_parameter_named_like_a_context_key_is_filled_by_the_model_without_a_word() -> None:
    """A developer writes ``def approve_expense(expense_id: int, userId: int, agent: str, ctx: dict)``, meaning
    "the caller", "the agent" and "the context".

    Found: accepted, and ``manage.py check`` is silent; all three are parameters the model fills in (``ctx: dict``
    took ``{"user": "admin"}`` from the model), while the README promises "the model never chooses who".
    Expect: a warning ``toolhub.W005`` per such parameter, whatever its case or separators, naming the context key
    and ``ctx: ToolContext`` as the way to read the caller's; none for ``tenant`` (its value is checked against the
    caller's), ``context`` or ``customer_id``, nor for any registered tool of the demo and the tests.
    """

    @tool(risk="low")
    def approve_expense(
        expense_id: int, userId: int, agent: str, ctx: dict[str, Any], tenant: str, context: str, customer_id: int
    ) -> str:
        """Approve an expense."""
        return "ok"

    assert registry.get("approve_expense") is None
    before = {message.obj for message in check_tools() if message.id == "toolhub.W005"}
    with registry.temporarily(approve_expense):
        warned = _messages(check_tools, "approve_expense", "toolhub.W005")

    assert sorted(message.msg.split("'")[3] for message in warned) == ["agent", "ctx", "userId"]
    assert all("ctx: ToolContext" in message.hint for message in warned)
    assert "'user_id'" in next(message.msg for message in warned if "'userId'" in message.msg)
    assert before == set()


def test_a_context_type_named_tenant_fails_every_call_of_its_tools() -> None:
    """A developer registers ``@register_context_type class Tenant`` (or ``User``, or passes ``key="user"``) and
    marks ``tenant: Annotated[Tenant, FromContext]``.

    Found: accepted; its default key is ``tenant``, which toolhub sets to the caller's slug, a string no ``Tenant``
    validates from, so every call fails at run time ("context it needs is missing"), the mistake seen only then.
    Expect: refused when registered, naming the key and the way out (``key=`` or ``factory=``); with a factory it
    is accepted.
    """

    @dataclasses.dataclass(frozen=True)
    class Tenant:
        slug: str

    with pytest.raises(ToolDefinitionError, match=r"Tenant.*'tenant'.*key=.*factory="):
        register_context_type(Tenant)

    @dataclasses.dataclass(frozen=True)
    class Caller:
        name: str

    with pytest.raises(ToolDefinitionError, match="'user'"):
        register_context_type(Caller, key="user")

    @dataclasses.dataclass(frozen=True)
    class User:
        name: str

    register_context_type(User, factory=lambda ctx: User(name=str(ctx.get("user"))))

    @tool(risk="low")
    def whoami(user: Annotated[User, FromContext]) -> str:
        """Who am I."""
        return user.name

    assert whoami.tool.invoke({}, ToolContext(user="alice")) == "alice"
