"""No weak passwords: common and numeric ones are refused, and the demo's admin/admin exists only in demo mode."""

import re
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.forms import SetPasswordForm
from django.contrib.auth.models import User
from django.core.management import call_command

pytestmark = pytest.mark.django_db

DEMO_USERS = ("admin", "operator", "operator2", "auditor", "developer", "alice")


@pytest.mark.parametrize(
    ("password", "code"),
    [
        ("password123", "password_too_common"),
        ("qwertyuiop", "password_too_common"),
        ("4815162342", "password_entirely_numeric"),
    ],
)
def test_common_and_numeric_passwords_are_refused(alice: User, password: str, code: str) -> None:
    # the admin's "change password" form, which applies AUTH_PASSWORD_VALIDATORS
    form = SetPasswordForm(alice, {"new_password1": password, "new_password2": password})

    assert not form.is_valid()
    assert code in {error.code for error in form.errors.as_data()["new_password2"]}


def test_a_strong_password_is_accepted(alice: User) -> None:
    form = SetPasswordForm(
        alice, {"new_password1": "violet-Anchor-93-drift", "new_password2": "violet-Anchor-93-drift"}
    )

    assert form.is_valid(), form.errors


def _load_demo(*args: str) -> str:
    out = StringIO()
    call_command("load_demo", *args, stdout=out)
    return out.getvalue()


def test_without_debug_load_demo_creates_no_weak_password(settings: Any) -> None:
    # given DEBUG off, as in production (and as pytest runs)
    assert settings.DEBUG is False

    # when
    output = _load_demo()

    # then: no demo user has its weak password, each got a random one, shown once
    users = {user.username: user for user in User.objects.filter(username__in=DEMO_USERS)}
    assert set(users) == set(DEMO_USERS)
    assert not any(user.check_password(user.username) for user in users.values())
    shown = dict(re.findall(r"(admin|operator2|operator|auditor|developer|alice)/(\S+?)[,.](?:\s|$)", output))
    assert set(shown) == set(DEMO_USERS)
    assert all(users[name].check_password(password) for name, password in shown.items())
    assert "DEBUG is off" in output and "shown this once" in output
    assert users["admin"].is_superuser and users["operator"].is_staff and not users["alice"].is_staff

    # and a second load shows no password again and changes none
    again = _load_demo()
    assert not re.search(r"(admin|operator2?|auditor|developer|alice)/", again)
    assert all(User.objects.get(username=name).check_password(password) for name, password in shown.items())


def test_a_weak_demo_password_left_by_an_earlier_demo_load_is_replaced(settings: Any) -> None:
    settings.DEBUG = True
    _load_demo()
    settings.DEBUG = False

    output = _load_demo()

    assert not any(user.check_password(user.username) for user in User.objects.filter(username__in=DEMO_USERS))
    assert "shown this once" in output


def test_demo_mode_keeps_the_documented_demo_passwords(settings: Any) -> None:
    settings.DEBUG = True  # `make run`

    output = _load_demo()

    assert all(User.objects.get(username=name).check_password(name) for name in DEMO_USERS)
    assert (
        "admin/admin, operator/operator, operator2/operator2, auditor/auditor, developer/developer, alice/alice"
        in output
    )


def test_demo_passwords_can_be_asked_for_explicitly() -> None:
    _load_demo("--demo-passwords")

    assert all(User.objects.get(username=name).check_password(name) for name in DEMO_USERS)
