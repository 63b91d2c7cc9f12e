"""Context objects are injected explicitly: the model can never see or set one, whatever the order of definition."""

import dataclasses
import functools
from typing import Annotated

import pytest
from pydantic import BaseModel

from tests.helpers import RequestCall, audit_text
from toolhub import FromContext, register_context_type, registry, tool
from toolhub.checks import context_injection_problems
from toolhub.exceptions import ToolDefinitionError
from toolhub.models import CallStatus
from toolhub.tools.context_types import is_context_type
from toolhub.tools.registry import ToolRegistry, autodiscover

pytestmark = pytest.mark.django_db


@pytest.fixture
def request_call(request_call: RequestCall) -> RequestCall:
    return functools.partial(request_call, tenant="acme")


def test_from_context_is_injected_even_when_the_class_is_registered_after_the_tool(request_call: RequestCall) -> None:
    # given a tool naming a context class explicitly, defined before the class is registered
    @dataclasses.dataclass(frozen=True)
    class Account:
        user_id: str

    ran: list[str] = []

    @tool
    def my_account(status: str, user: Annotated[Account, FromContext]) -> str:
        """Show my account."""
        ran.append(user.user_id)
        return f"{status}:{user.user_id}"

    register_context_type(Account)

    # then the model sees only status, and the object comes from the call's context
    assert list(my_account.tool.json_schema["properties"]) == ["status"]
    with registry.temporarily(my_account):
        call = request_call("my_account", {"status": "open"}, context={"account": {"user_id": "u-1"}})
        # and the model cannot set it, nested or flat: an unknown argument, nothing runs
        nested = request_call("my_account", {"status": "open", "user": {"user_id": "victim"}})
        flat = request_call("my_account", {"status": "open", "user_id": "victim"})

    assert (call.status, call.result) == (CallStatus.SUCCEEDED, "open:u-1")
    assert ran == ["u-1"]
    assert nested.status == flat.status == CallStatus.INVALID
    assert "- user: Extra inputs are not permitted" in nested.error
    assert "- user_id: Extra inputs are not permitted" in flat.error
    assert "victim" not in nested.error + flat.error + audit_text(nested) + audit_text(flat)


def test_the_bare_spelling_still_works_when_the_class_is_registered_first(request_call: RequestCall) -> None:
    @register_context_type
    class Shop(BaseModel):
        shop_id: int

    @register_context_type(key="promo")
    class Promo(BaseModel):
        code: str

    @tool
    def my_shop(shop: Shop, promo: Promo | None = None) -> str:
        """Show my shop."""
        return f"{shop.shop_id}:{promo}"

    assert my_shop.tool.json_schema["properties"] == {}
    with registry.temporarily(my_shop):
        call = request_call("my_shop", {}, context={"shop": {"shop_id": "7"}})
        refused = request_call("my_shop", {"shop": {"shop_id": 1}})

    assert (call.status, call.result) == (CallStatus.SUCCEEDED, "7:None")
    assert refused.status == CallStatus.INVALID


def test_a_bare_parameter_whose_class_is_registered_later_is_refused_at_registration() -> None:
    # given a tool that names a class bare before the class is registered: the model would fill it in
    @dataclasses.dataclass(frozen=True)
    class LateUser:
        user_id: str

    @tool
    def late(user: LateUser) -> str:
        """Who."""
        return user.user_id

    assert "user" in late.tool.json_schema["properties"]
    register_context_type(LateUser)

    # then the registry refuses the tool, naming the fix
    refusal = r"Tool 'late', parameter 'user'.*Annotated\[.*LateUser, FromContext\]"
    with pytest.raises(ToolDefinitionError, match=refusal), registry.temporarily(late):
        pass
    assert "late" not in registry


def test_registering_a_context_class_a_registered_tool_exposes_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Exposed:
        user_id: str

    @tool
    def exposing(who: Exposed) -> str:
        """Who."""
        return who.user_id

    with registry.temporarily(exposing):
        with pytest.raises(ToolDefinitionError, match="tool 'exposing' already takes it as parameter 'who'"):
            register_context_type(Exposed)

    assert not is_context_type(Exposed)


def test_startup_refuses_a_tools_module_that_registers_its_context_class_after_the_tool() -> None:
    with pytest.raises(ToolDefinitionError, match="Tool 'whoami', parameter 'user'.*FromContext"):
        autodiscover(["tests.toolsec.late_context"], target=ToolRegistry())


def test_freezing_checks_every_tool_again() -> None:
    # given a tool registered while its class was not a context type yet (in a registry of its own)
    @dataclasses.dataclass(frozen=True)
    class Frozen:
        user_id: str

    @tool
    def before_freeze(who: Frozen) -> str:
        """Who."""
        return who.user_id

    target = ToolRegistry()
    target.register(before_freeze)
    register_context_type(Frozen)

    with pytest.raises(ToolDefinitionError, match="Tool 'before_freeze', parameter 'who'"):
        target.freeze()
    assert not target.frozen


def test_a_context_class_nested_in_a_parameter_is_refused() -> None:
    @register_context_type
    @dataclasses.dataclass(frozen=True)
    class Nested:
        user_id: str

    @tool
    def many(users: list[Nested]) -> int:
        """Count."""
        return len(users)

    with pytest.raises(ToolDefinitionError, match="Tool 'many', parameter 'users'"), registry.temporarily(many):
        pass
    assert "many" not in registry


def test_from_context_mistakes_are_refused_when_the_tool_is_defined() -> None:
    with pytest.raises(ToolDefinitionError, match="parameter 'name': FromContext: builtin and toolhub types"):

        @tool
        def builtin(name: Annotated[str, FromContext]) -> str:
            """Builtin."""
            return name

    @dataclasses.dataclass(frozen=True)
    class Deep:
        user_id: str

    with pytest.raises(ToolDefinitionError, match="FromContext marks a whole parameter"):

        @tool
        def nested(users: list[Annotated[Deep, FromContext]]) -> int:
            """Nested."""
            return len(users)


def test_the_system_check_reports_exposed_and_unregistered_context_classes() -> None:
    @dataclasses.dataclass(frozen=True)
    class Checked:
        user_id: str

    @dataclasses.dataclass(frozen=True)
    class NeverRegistered:
        user_id: str

    @tool
    def exposed(who: Checked) -> str:
        """Who."""
        return who.user_id

    @tool
    def unregistered(who: Annotated[NeverRegistered, FromContext]) -> str:
        """Who."""
        return who.user_id

    register_context_type(Checked)

    problems = context_injection_problems([exposed.tool, unregistered.tool])

    assert [(p.id, p.obj) for p in problems] == [("toolhub.E005", "exposed"), ("toolhub.W003", "unregistered")]
    assert "FromContext" in problems[0].hint and "register_context_type" in problems[1].hint
