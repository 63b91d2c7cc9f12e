"""The people and data of the security review: the tenancy suite's two tenants, reused as they are.

acme holds alice's rows (a run that moved money, one waiting for approval, one waiting for an
external result, an artifact); globex holds staff who must not reach them. See tests/tenancy/conftest.py.
"""

from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.audit.conftest import audit_key  # noqa: F401 - a fixture, registered by being imported here
from tests.tenancy.conftest import (  # noqa: F401 - fixtures, registered by being imported here
    _tenancy_tools,
    acme,
    acme_operator,
    carol,
    globex_auditor,
    globex_developer,
    globex_operator,
    globex_people,
    globex_user,
    platform_user,
    roles,
    superuser,
)

__all__ = ["client_for"]


def client_for(user: User) -> APIClient:
    """An API client logged in as ``user``."""
    client = APIClient()
    client.force_authenticate(user)
    return client
