"""A governance change's values are written in the trail as every other payload is (``governance_values``)."""

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User

from toolhub.admin_governance_audit import governance_values

pytestmark = pytest.mark.django_db


def test_dates_are_iso_8601_and_secrets_are_left_out() -> None:
    # given an account joined at a known instant
    user = User.objects.create_user("carol", password="s3cret-Passw0rd")
    user.date_joined = datetime(2026, 12, 5, 14, 30, tzinfo=UTC)

    # when its values are taken for the trail, its password excluded
    values = governance_values(user, excluded=("password",))

    # then the date reads as the rest of the trail writes dates, and no password (nor its hash) is there
    assert values["date_joined"] == "2026-12-05T14:30:00Z"
    assert values["last_login"] is None
    assert values["username"] == "carol"
    assert "password" not in values
    assert not any("s3cret" in str(value) or "pbkdf2" in str(value) for value in values.values())
