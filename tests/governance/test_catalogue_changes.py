"""Operators' catalogue changes are audit events with the operator's identity."""

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from toolhub.audit_verify import verify_audit_chains
from toolhub.models import AuditEvent, ToolDefinition

pytestmark = pytest.mark.django_db


@pytest.fixture
def platform_operator(operator: User) -> User:
    """The catalogue is shared by every tenant: only an operator who crosses the tenant boundary changes it."""
    operator.user_permissions.add(Permission.objects.get(content_type__app_label="toolhub", codename="cross_tenant"))
    return operator


def test_disabling_a_tool_in_the_admin_is_recorded_with_who_and_what(platform_operator: User) -> None:
    # given a platform operator on the catalogue's change page
    client = Client()
    client.force_login(platform_operator)
    definition = ToolDefinition.objects.get(name="record_effect")

    # when they disable the tool and raise its risk
    response = client.post(
        f"/admin/toolhub/tooldefinition/{definition.pk}/change/", {"enabled": "", "risk_override": "critical"}
    )

    # then the change is applied and audited, once
    assert response.status_code == 302, response.content[:500]
    definition.refresh_from_db()
    assert (definition.enabled, definition.risk_override) == (False, "critical")
    event = AuditEvent.objects.get(event_type="catalogue.changed", tool_name="record_effect")
    assert event.actor == "operator:operator"
    assert event.payload["changes"] == {
        "enabled": {"before": True, "after": False},
        "risk_override": {"before": "", "after": "critical"},
    }
    assert verify_audit_chains()[1] == []


def test_saving_without_a_change_records_nothing(platform_operator: User) -> None:
    client = Client()
    client.force_login(platform_operator)
    definition = ToolDefinition.objects.get(name="record_effect")
    assert client.get(f"/admin/toolhub/tooldefinition/{definition.pk}/change/").context["has_change_permission"]
    client.post(f"/admin/toolhub/tooldefinition/{definition.pk}/change/", {"enabled": "on", "risk_override": ""})
    assert not AuditEvent.objects.filter(event_type="catalogue.changed").exists()
