"""Fixtures of the Pydantic AI adapter tests: a user of another tenant."""

import pytest
from django.contrib.auth.models import User

from toolhub.models import Tenant, TenantMembership


@pytest.fixture
def bob(other_tenant: Tenant) -> User:
    """A user of another tenant."""
    user = User.objects.create_user("bob", "bob@example.com", "bob-password")
    TenantMembership.objects.create(user=user, tenant=other_tenant)
    return user
