"""Review 2026-12-06 (k): a list asked for a popup on a reverse relation answered 500.

Finding (fails on b80a22d, passes after the fix):

1. ``?_to_field=<reverse relation>`` on a list (``/admin/auth/group/?_to_field=user``) raised ``AttributeError``
   inside Django's ``to_field_allowed`` (a ``ManyToManyRel`` has no ``primary_key``): a 500 for a hand-made URL,
   with the error e-mailed to the admins each time. Such a name is no column a popup can hand back: refused, 400,
   as an unknown field is (``GuardedLookups.to_field_allowed``).

Checked and holds: ``_to_field`` naming a column of the model the admin does not allow (a user's ``password``) is
refused (400); the primary key is allowed (the popup Django's own pages open).
"""

from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db.models import ForeignObjectRel
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.fixture
def console(db: None) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(User.objects.create_superuser("root-k", "root@example.com", "pw-root-k-1234"))
    return client


def _reverse_relations() -> list[tuple[Any, str]]:
    """Every registered model with each name of a relation pointing at it (``group`` ← ``user``)."""
    return [
        (model, field.name)
        for model in admin.site._registry
        for field in model._meta.get_fields(include_hidden=True)
        if isinstance(field, ForeignObjectRel)
    ]


def test_a_popup_on_a_reverse_relation_is_refused_not_a_500(console: Client) -> None:
    """Found: ``?_to_field=user`` on the roles list answered 500 (``AttributeError``: ``ManyToManyRel``).
    Expect: 400 on every list, for every relation that points at its model; the list is not shown."""
    relations = _reverse_relations()
    assert relations  # groups (users), tenants (memberships), runs (calls), ...
    answers = {}
    for model, name in relations:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        answers[f"{url}?_to_field={name}"] = console.get(url, {"_to_field": name, "_popup": "1"}).status_code
    assert {url: code for url, code in answers.items() if code != 400} == {}


def test_a_popup_on_a_column_not_allowed_is_refused_and_the_primary_key_is_not(console: Client) -> None:
    """Found: nothing (holds). Expect: a user's ``password`` refused (400); its ``id`` opens the popup."""
    users = reverse("admin:auth_user_changelist")
    assert console.get(users, {"_to_field": "password", "_popup": "1"}).status_code == 400
    assert console.get(users, {"_to_field": "id", "_popup": "1"}).status_code == 200
