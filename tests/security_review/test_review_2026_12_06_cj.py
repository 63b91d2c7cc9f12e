"""Review 2026-12-06 cj: operations commands and production posture (settings, system checks, commands).

Findings:
1. Eight settings read from the environment with a bare ``int()`` / ``float()`` (``DJANGO_SECURE_HSTS_SECONDS``,
   ``DATABASE_CONN_MAX_AGE``, ``EMAIL_PORT``, ``CELERY_DB_REUSE_MAX``, ``CELERY_TASK_SOFT_TIME_LIMIT``,
   ``CELERY_TASK_TIME_LIMIT``, ``TOOLHUB_AUDIT_CHECKPOINT_SECONDS``): a malformed value stopped every process with
   ``ValueError: invalid literal for int()`` naming no variable; a negative HSTS age or a hard time limit below the
   soft one was taken as given. Now ``_env_int`` / ``_env_seconds`` stop startup with ``ImproperlyConfigured``
   naming the variable and its range (the hard limit above the soft one).
2. ``TOOLHUB_THROTTLE_RUNS`` / ``_DECISIONS`` / ``_CALLS`` were not read until a throttled request came: a malformed
   rate (``30``, ``30/fortnight``) answered every run start, decision and direct call with a 500. Now refused at
   startup, naming the variable.
3. A ``DATABASE_URL`` dj-database-url cannot read stopped startup with its own ``ParseError`` naming no variable.
   Now ``ImproperlyConfigured`` naming ``DATABASE_URL``, without repeating the URL (it may hold a password).
4. ``check --deploy`` passed with ``DJANGO_ALLOWED_HOSTS=*``, with an ``http://`` origin in
   ``DJANGO_CSRF_TRUSTED_ORIGINS`` and with the demo app (``load_demo``, ``generate_calls``) installed by
   ``TOOLHUB_DEMO=1`` beside DEBUG off; Django's own deploy checks cover none of them. Now ``toolhub.W010``,
   ``W011`` and ``W012`` (``toolhub/deployment_checks.py``), each with a hint. Likewise a production server without
   ``CELERY_BROKER_URL`` (tasks eager in the web process: no worker time limits, no beat, so no sweeps, approval
   expiry or checkpoints) passed; now ``toolhub.W013``.
5. ``_env_bool`` read any value but 1/true/yes/on as off: ``DJANGO_SECURE_SSL_REDIRECT=flase`` or
   ``DJANGO_SECURE_COOKIES=ture`` started a production server without the https redirect or with cookies over http,
   and an empty value was off too. Now a switch is one of 1/true/yes/on, 0/false/no/off (empty: its default), or
   startup stops naming the variable.

Checked and holds:
- The third-party commands that change accounts, tokens and lockouts (``createsuperuser``, ``changepassword``,
  ``drf_create_token``, ``axes_reset*``) are wrapped by ``toolhub.governed_commands`` and record governance events;
  ``toolhub_roles`` records each group added or changed; ``load_demo`` records its users, memberships, groups, grants,
  providers and agents; ``audit_checkpoint --acknowledge`` records the acknowledgement; ``generate_calls`` records
  that it wrote and runs only where the demo is installed.
- Without DEBUG and without ``TOOLHUB_DEMO``, ``load_demo`` and ``generate_calls`` are unknown commands (the demo app
  is not installed); with ``TOOLHUB_DEMO=1`` and DEBUG off ``load_demo`` gives random passwords (shown once), never
  the weak ones, unless ``--demo-passwords``; it refuses a database with a non-demo user named or reading as a demo one.
- No command prints a secret it was not asked to create: ``toolhub_db_roles`` names the variable holding the role's
  password, never the value; ``audit_public_key`` prints the public key only; ``drf_create_token`` prints the token
  it creates (its purpose) and its event holds no key.
- ``DJANGO_SECRET_KEY`` unset without DEBUG refuses to start; the login lockout variables were already validated.
- ``drf_create_token`` and ``drf_create_token -r`` record ``governance.added`` / ``deleted`` without the key (run by
  hand); ``generate_calls --tenants`` with a retired slug is refused by ``Tenant.save``; the capability permissions
  live on ``ToolGroup``'s content type, so ``remove_stale_contenttypes`` cannot take them from anyone.
- ``loaddata``, ``flush``, ``shell`` and ``dbshell`` stay unrecorded by design (review 2026-12-05 l: raw database
  access, beyond any trail; ``flush`` is refused on the trail by its truncate guard).
"""

from typing import Any

import pytest
from django.core import checks

from tests.posture.conftest import (
    PRODUCTION_ENV,
    RunDjango,
    run_django,  # noqa: F401 - a fixture, registered by being imported here
)

IMPORT_SETTINGS = "import toolhub.settings"


def started(run: RunDjango, **env: str) -> str:
    """The last line a process importing the production settings with ``env`` wrote (its error, if it failed)."""
    result = run("-c", IMPORT_SETTINGS, **{**PRODUCTION_ENV, **env})
    assert result.returncode != 0, "the settings were accepted"
    return result.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("DJANGO_SECURE_HSTS_SECONDS", "1y", "from 0 to"),
        ("DJANGO_SECURE_HSTS_SECONDS", "-5", "from 0 to"),
        ("DATABASE_CONN_MAX_AGE", "sixty", "from 0 to"),
        ("EMAIL_PORT", "smtp", "from 1 to 65535"),
        ("CELERY_DB_REUSE_MAX", "many", "from 1 to"),
        ("CELERY_TASK_SOFT_TIME_LIMIT", "5m", "from 1 to"),
        ("CELERY_TASK_TIME_LIMIT", "250", "from 301 to"),
        ("TOOLHUB_AUDIT_CHECKPOINT_SECONDS", "5 minutes", "seconds above 0"),
    ],
)
def test_a_malformed_number_stops_startup_naming_its_variable(
    run_django: RunDjango,  # noqa: F811
    name: str,
    value: str,
    expected: str,
) -> None:
    """Found: ``int(os.environ.get(...))``: ``ValueError: invalid literal for int()`` naming no variable, or a negative
    HSTS age / a hard time limit under the soft one taken as given. Expect: ``ImproperlyConfigured`` naming the
    variable, the value and its range."""
    last = started(run_django, **{name: value})

    assert last.startswith("django.core.exceptions.ImproperlyConfigured: "), last
    assert f"{name}={value!r}" in last
    assert expected in last


@pytest.mark.parametrize("rate", ["30", "30/fortnight", "/minute", "x/minute", "30/minute/2", "0/minute"])
def test_a_malformed_throttle_rate_stops_startup_not_every_throttled_request(
    run_django: RunDjango,  # noqa: F811
    rate: str,
) -> None:
    """Found: a rate DRF cannot parse was read at the first throttled request: every run start, decision and direct
    call answered 500. Expect: startup stops with ``ImproperlyConfigured`` naming the variable and the rate's form."""
    last = started(run_django, TOOLHUB_THROTTLE_DECISIONS=rate)

    assert last.startswith("django.core.exceptions.ImproperlyConfigured: TOOLHUB_THROTTLE_DECISIONS="), last
    assert "N/minute" in last


def test_a_database_url_that_cannot_be_read_is_named_without_its_password(run_django: RunDjango) -> None:  # noqa: F811
    """Found: dj-database-url's ``ParseError`` ("This string is not a valid url") named no variable. Expect:
    ``ImproperlyConfigured`` naming ``DATABASE_URL``, and nothing of the URL (its password) in what was written."""
    url = "postgres://toolhub_app:S3cret-pw-91@db.internal:port/toolhub"

    result = run_django("-c", IMPORT_SETTINGS, **{**PRODUCTION_ENV, "DATABASE_URL": url})

    assert result.returncode != 0
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("django.core.exceptions.ImproperlyConfigured: DATABASE_URL is not a database URL")
    )
    assert "S3cret-pw-91" not in result.stderr + result.stdout


def test_the_documented_production_settings_still_start(run_django: RunDjango) -> None:  # noqa: F811
    """Found: (with findings 1-3) validation must not refuse what the README documents. Expect: its environment, with
    every validated variable at a sound value, starts; empty values are the defaults."""
    shown = (
        "import toolhub.settings as s; print(s.SECURE_HSTS_SECONDS, s.DATABASES['default']['CONN_MAX_AGE'], "
        "s.EMAIL_PORT, s.CELERY_TASK_TIME_LIMIT, s.REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']['runs'], "
        "s.CELERY_BEAT_SCHEDULE['toolhub-audit-checkpoint']['schedule'])"
    )

    result = run_django("-c", shown, **{**PRODUCTION_ENV, "EMAIL_PORT": "", "TOOLHUB_THROTTLE_RUNS": "5/s"})

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["31536000", "60", "25", "360", "5/s", "300"]


def deploy_warnings(check_id: str) -> list[checks.CheckMessage]:
    return [found for found in checks.run_checks(include_deployment_checks=True) if found.id == check_id]


def test_check_deploy_warns_of_allowed_hosts_star(settings: Any) -> None:
    """Found: ``DJANGO_ALLOWED_HOSTS=*`` passed ``check --deploy --fail-level WARNING``: any Host header believed.
    Expect: ``toolhub.W010`` with a hint naming the variable; a list of names is not warned."""
    settings.ALLOWED_HOSTS = ["toolhub.example.com", "*"]
    warned = deploy_warnings("toolhub.W010")
    settings.ALLOWED_HOSTS = ["toolhub.example.com"]

    assert len(warned) == 1
    assert "DJANGO_ALLOWED_HOSTS=toolhub.example.com" in (warned[0].hint or "")
    assert deploy_warnings("toolhub.W010") == []


def test_check_deploy_warns_of_a_plain_http_csrf_origin(settings: Any) -> None:
    """Found: ``DJANGO_CSRF_TRUSTED_ORIGINS=http://...`` passed the deploy check: forms posted from a page anyone on
    the path can change pass CSRF. Expect: ``toolhub.W011`` naming the origin (bounded); https origins are not."""
    origins = [f"http://host{n}.example.com" for n in range(5)]
    settings.CSRF_TRUSTED_ORIGINS = ["https://toolhub.example.com", *origins]
    warned = deploy_warnings("toolhub.W011")
    settings.CSRF_TRUSTED_ORIGINS = ["https://toolhub.example.com"]

    assert len(warned) == 1
    assert "'http://host0.example.com'" in warned[0].msg
    assert "and 2 more" in warned[0].msg and "host4" not in warned[0].msg
    assert deploy_warnings("toolhub.W011") == []


def test_check_deploy_warns_of_the_demo_installed_in_production(run_django: RunDjango) -> None:  # noqa: F811
    """Found: ``TOOLHUB_DEMO=1`` beside DEBUG off passed ``check --deploy --fail-level WARNING``, though it brings
    ``load_demo`` and ``generate_calls`` (synthetic audit history) to a real database. Expect: ``toolhub.W012``; the
    documented production environment (no ``TOOLHUB_DEMO``) still passes."""
    demo = run_django("manage.py", "check", "--deploy", "--fail-level", "WARNING", **PRODUCTION_ENV, TOOLHUB_DEMO="1")
    plain = run_django("manage.py", "check", "--deploy", "--fail-level", "WARNING", **PRODUCTION_ENV)

    assert demo.returncode != 0
    assert "toolhub.W012" in demo.stderr
    assert plain.returncode == 0, plain.stderr


@pytest.mark.parametrize(
    "name", ["DJANGO_SECURE_SSL_REDIRECT", "DJANGO_SECURE_COOKIES", "DJANGO_DEBUG", "DJANGO_SECURE_HSTS_PRELOAD"]
)
def test_a_misspelt_switch_stops_startup_instead_of_reading_as_off(
    run_django: RunDjango,  # noqa: F811
    name: str,
) -> None:
    """Found: ``_env_bool`` read anything but 1/true/yes/on as off: ``DJANGO_SECURE_SSL_REDIRECT=flase`` started a
    production server without the https redirect (and ``DJANGO_SECURE_COOKIES=ture`` with cookies over http).
    Expect: ``ImproperlyConfigured`` naming the variable and the values it takes."""
    last = started(run_django, **{name: "flase"})

    assert last.startswith(f"django.core.exceptions.ImproperlyConfigured: {name}='flase': must be one of"), last


def test_a_switch_written_as_documented_is_read_and_an_empty_one_is_its_default(
    run_django: RunDjango,  # noqa: F811
) -> None:
    """Found: (with the finding above) an empty ``DJANGO_SECURE_SSL_REDIRECT`` read as off. Expect: ``off``/``0``
    read as off, ``Yes`` as on, empty as the default (on without DEBUG)."""
    shown = (
        "import toolhub.settings as s; print(s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.USE_X_FORWARDED_HOST)"
    )
    env = {"DJANGO_SECURE_SSL_REDIRECT": "", "DJANGO_SECURE_COOKIES": "off", "DJANGO_USE_X_FORWARDED_HOST": " Yes "}

    result = run_django("-c", shown, **{**PRODUCTION_ENV, **env})

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False", "True"]


def test_check_deploy_warns_of_eager_tasks_in_production(settings: Any) -> None:
    """Found: a production server without ``CELERY_BROKER_URL`` passed ``check --deploy``: its tasks ran eagerly in
    the web process (tools inside requests, no beat: no sweeps, no approval expiry, no checkpoints). Expect:
    ``toolhub.W013`` with DEBUG off and eager tasks, naming the variable; none with a broker, or in DEBUG."""
    settings.DEBUG, settings.CELERY_TASK_ALWAYS_EAGER = False, True
    warned = deploy_warnings("toolhub.W013")
    settings.CELERY_TASK_ALWAYS_EAGER = False
    brokered = deploy_warnings("toolhub.W013")
    settings.DEBUG, settings.CELERY_TASK_ALWAYS_EAGER = True, True

    assert len(warned) == 1
    assert "CELERY_BROKER_URL" in (warned[0].hint or "")
    assert brokered == []
    assert deploy_warnings("toolhub.W013") == []
