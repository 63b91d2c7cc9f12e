"""Production is the default: DEBUG off, a secret key required, `check --deploy` clean, no debug page.

Each test starts a fresh Python process on ``toolhub.settings`` with only the environment it names.
"""

import json

from tests.posture.conftest import PRODUCTION_ENV, RunDjango

SHOW_SETTINGS = (
    "import django; django.setup(); from django.conf import settings; print(settings.DEBUG, settings.SECRET_KEY)"
)


def test_without_a_secret_key_the_server_refuses_to_start(run_django: RunDjango) -> None:
    # when: no DJANGO_SECRET_KEY and no DJANGO_DEBUG, as on a server someone forgot to configure
    result = run_django("manage.py", "check")

    # then
    assert result.returncode != 0
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY is not set" in result.stderr
    assert "set DJANGO_DEBUG=1 for local development" in result.stderr


def test_debug_is_off_unless_asked_for(run_django: RunDjango) -> None:
    result = run_django("-c", SHOW_SETTINGS, DJANGO_SECRET_KEY="a-key-of-the-operators-own")

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "a-key-of-the-operators-own"]


def test_the_embedded_demo_asks_for_debug_and_may_use_a_development_key(run_django: RunDjango) -> None:
    # `make run` sets DJANGO_DEBUG=1 and no key
    result = run_django("-c", SHOW_SETTINGS, DJANGO_DEBUG="1")

    assert result.returncode == 0, result.stderr
    debug, key = result.stdout.split()
    assert debug == "True"
    assert key.startswith("django-insecure-")  # `check --deploy` would flag it, should it ever leave DEBUG


def test_check_deploy_passes_with_the_documented_production_environment(run_django: RunDjango) -> None:
    result = run_django("manage.py", "check", "--deploy", "--fail-level", "WARNING", **PRODUCTION_ENV)

    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_fails_without_it(run_django: RunDjango) -> None:
    # given only a key: HTTPS is on by default without DEBUG, but HSTS is switched on deliberately
    result = run_django(
        "manage.py",
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SECRET_KEY=PRODUCTION_ENV["DJANGO_SECRET_KEY"],
    )

    assert result.returncode != 0
    assert "security.W004" in result.stderr  # SECURE_HSTS_SECONDS
    for already_safe in ("security.W008", "security.W012", "security.W016", "security.W018"):
        assert already_safe not in result.stderr  # SSL redirect, secure cookies, DEBUG off: by default


def test_check_deploy_flags_a_debug_server_and_its_development_key(run_django: RunDjango) -> None:
    result = run_django("manage.py", "check", "--deploy", "--fail-level", "WARNING", DJANGO_DEBUG="1")

    assert result.returncode != 0
    assert "security.W018" in result.stderr  # DEBUG
    assert "security.W009" in result.stderr  # the development key


def test_the_openapi_schema_has_no_warnings(run_django: RunDjango) -> None:
    result = run_django("manage.py", "spectacular", "--validate", "--fail-on-warn", **PRODUCTION_ENV)

    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr
    assert "RiskLevelEnum" in result.stdout and "RiskOverrideEnum" not in result.stdout


# A 404 and a 500 (the database is unreachable) through the whole Django stack, over https as behind
# the proxy; prints what a client would see.
ERROR_PAGES = """
import json, os, django
django.setup()
from django.test import Client
client = Client(raise_request_exception=False, HTTP_HOST=os.environ["DJANGO_ALLOWED_HOSTS"].split(",")[0])
not_found = client.get("/no-such-page/", secure=True)
server_error = client.get("/api/v1/tools/", secure=True, HTTP_AUTHORIZATION="Token 0123456789abcdef")
print(json.dumps({
    "404": [not_found.status_code, not_found.content.decode()],
    "500": [server_error.status_code, server_error.content.decode()],
}))
"""

LEAKY_DATABASE = "postgres://leakuser:leakpass@127.0.0.1:9/leakdb"
LEAKS = ("leakuser", "leakdb", "DATABASE", "SECRET_KEY", "Traceback", "api/v1/", "URLconf", "toolhub")


def _error_pages(run_django: RunDjango, **env: str) -> dict[str, list]:
    result = run_django(
        "-c", ERROR_PAGES, **{"DJANGO_ALLOWED_HOSTS": "localhost", **env, "DATABASE_URL": LEAKY_DATABASE}
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_error_pages_in_production_do_not_leak_settings(run_django: RunDjango) -> None:
    pages = _error_pages(run_django, **PRODUCTION_ENV)

    assert pages["404"][0] == 404
    assert pages["500"][0] == 500
    for status, (_, body) in pages.items():
        leaked = [word for word in (*LEAKS, PRODUCTION_ENV["DJANGO_SECRET_KEY"]) if word in body]
        assert leaked == [], f"the {status} page shows {leaked}"


def test_the_same_errors_with_debug_on_show_the_debug_page(run_django: RunDjango) -> None:
    """What the default did before: the technical pages, with the connection settings in them."""
    pages = _error_pages(run_django, DJANGO_DEBUG="1")

    assert "URLconf" in pages["404"][1]
    assert pages["500"][0] == 500 and "leakdb" in pages["500"][1]
