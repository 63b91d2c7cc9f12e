"""Tool groups' run-time settings are edited in the admin: rules checked, capabilities become permissions."""

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from toolhub.models import ToolGroup

pytestmark = pytest.mark.django_db


def _form(**changes: Any) -> dict[str, Any]:
    data = {
        "name": "payments",
        "description": "",
        "provider": "",
        "extra_tools": "[]",
        "capabilities": "[]",
        "active_by_default": "on",
        "activation_rules": "[]",
        "system_prompt_addition": "",
        "approver_permission": "",
        "escalate_after_seconds": "",
    }
    data.update(changes)
    return data


@pytest.fixture
def admin_client(client: Any) -> Any:
    client.force_login(User.objects.create_superuser("root", "root@example.com", "root-password"))
    return client


def test_saving_a_group_makes_its_capabilities_grantable_permissions(admin_client: Any) -> None:
    response = admin_client.post(
        reverse("admin:toolhub_toolgroup_add"),
        _form(capabilities='["money_movement"]', activation_rules='[{"roles": ["finance"]}]'),
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    group = ToolGroup.objects.get(name="payments")
    assert group.activation_rules == [{"roles": ["finance"]}]
    assert Permission.objects.filter(codename="capability_money_movement", content_type__app_label="toolhub").exists()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("activation_rules", '[{"role": ["finance"]}]', "unknown key"),
        ("activation_rules", '[{"context": "web"}]', "context is an object"),
        ("capabilities", '["Money Movement"]', "lowercase letters"),
    ],
)
def test_bad_rules_and_capabilities_are_refused_with_a_message(
    admin_client: Any, field: str, value: str, message: str
) -> None:
    response = admin_client.post(reverse("admin:toolhub_toolgroup_add"), _form(**{field: value}))

    assert response.status_code == 200
    assert message in response.content.decode()
    assert not ToolGroup.objects.exists()


def test_migrate_gives_every_existing_groups_capabilities_a_permission() -> None:
    from django.core.management import call_command

    ToolGroup.objects.create(name="legacy", capabilities=["internet_access"])
    assert not Permission.objects.filter(codename="capability_internet_access").exists()

    call_command("migrate", verbosity=0)

    assert Permission.objects.filter(codename="capability_internet_access", content_type__app_label="toolhub").exists()
