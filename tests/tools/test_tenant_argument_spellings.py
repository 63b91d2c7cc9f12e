"""The tenant-argument check reads a tenant's name in any spelling, and an input model cannot hide its tenant field."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel, to_pascal

from tests.helpers import RequestCall
from toolhub import Tool, registry
from toolhub.authorization import principal_of_call, tenant_argument_denial
from toolhub.exceptions import ToolDefinitionError
from toolhub.models import CallStatus

pytestmark = pytest.mark.django_db

RAN: list[str] = []


@pytest.fixture(autouse=True)
def _ran() -> Any:
    RAN.clear()
    yield
    RAN.clear()


class CamelTransfer(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    tenant_id: str
    amount: int


class PascalReport(BaseModel):
    model_config = ConfigDict(alias_generator=to_pascal)

    tenant_slug: str


def _moved(request: CamelTransfer) -> str:
    RAN.append(request.tenant_id)
    return f"moved {request.amount}"


def _reported(request: PascalReport) -> str:
    RAN.append(request.tenant_slug)
    return "reported"


camel_transfer = Tool.from_function(_moved, name="camel_transfer", description="Move.", input_model=CamelTransfer)
pascal_report = Tool.from_function(_reported, name="pascal_report", description="Report.", input_model=PascalReport)


@pytest.mark.parametrize("key", ["tenant_id", "tenantId", "TenantId", "tenant-id", "TENANT_SLUG", "Tenant"])
def test_every_spelling_of_a_tenant_argument_is_checked(key: str) -> None:
    principal = principal_of_call(user_id=None, tenant="acme", agent_name="")
    assert tenant_argument_denial({key: "acme"}, principal) is None
    assert f"Argument {key!r} must be your own tenant" in (tenant_argument_denial({key: "globex"}, principal) or "")


@pytest.mark.parametrize("key", ["tenants", "tenant_note", "subtenant_id", "tenancy"])
def test_other_names_are_not_tenant_arguments(key: str) -> None:
    assert (
        tenant_argument_denial({key: "globex"}, principal_of_call(user_id=None, tenant="acme", agent_name="")) is None
    )


@pytest.mark.parametrize("sent", [{"tenantId": "globex", "amount": 5}, {"tenant_id": "globex", "amount": 5}])
def test_a_camel_case_model_naming_another_tenant_is_denied_and_not_run(
    request_call: RequestCall, alice: User, sent: dict[str, Any]
) -> None:
    with registry.temporarily(camel_transfer):
        call = request_call("camel_transfer", sent, alice)

    assert call.status == CallStatus.DENIED and "your own tenant" in call.error
    assert RAN == []


def test_a_camel_case_model_naming_its_own_tenant_runs(request_call: RequestCall, alice: User) -> None:
    with registry.temporarily(camel_transfer):
        call = request_call("camel_transfer", {"tenantId": "acme", "amount": 5}, alice)

    assert call.status == CallStatus.SUCCEEDED, call.error
    assert RAN == ["acme"]


def test_a_pascal_case_model_naming_another_tenant_is_denied(request_call: RequestCall, alice: User) -> None:
    with registry.temporarily(pascal_report):
        call = request_call("pascal_report", {"TenantSlug": "globex"}, alice)

    assert call.status == CallStatus.DENIED and RAN == []


def test_a_hand_written_schemas_camel_case_tenant_property_is_checked(request_call: RequestCall, alice: User) -> None:
    schema = {"type": "object", "properties": {"tenantId": {"type": "string"}}, "required": ["tenantId"]}
    lookup = Tool.create("schema_tenant", "Look up.", schema, lambda arguments: RAN.append(arguments["tenantId"]))
    with registry.temporarily(lookup):
        call = request_call("schema_tenant", {"tenantId": "globex"}, alice)

    assert call.status == CallStatus.DENIED and RAN == []


class Hidden(BaseModel):
    tenant_id: str = Field(alias="org")


class HiddenOnOutput(BaseModel):
    tenant: str = Field(serialization_alias="scope")


@pytest.mark.parametrize("model", [Hidden, HiddenOnOutput])
def test_a_model_storing_its_tenant_field_under_another_name_is_refused_at_definition(model: type[BaseModel]) -> None:
    with pytest.raises(ToolDefinitionError, match="hides it from the check"):
        Tool.from_function(lambda request: "x", name="hidden", description="Hidden.", input_model=model)


def test_a_field_aliased_to_a_tenant_name_is_checked_under_that_name(request_call: RequestCall, alice: User) -> None:
    class Scoped(BaseModel):
        org: str = Field(alias="tenant")

    scoped = Tool.from_function(
        lambda request: RAN.append(request.org), name="scoped", description="Scoped.", input_model=Scoped
    )
    with registry.temporarily(scoped):
        call = request_call("scoped", {"tenant": "globex"}, alice)

    assert call.status == CallStatus.DENIED and RAN == []
