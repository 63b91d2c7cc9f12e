"""One typed settings object for ``TOOLHUB``: validated at startup with the key named, rebuilt when settings change."""

from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from tests.posture.conftest import ROOT, RunDjango
from toolhub.conf import DEFAULTS, ToolhubSettings, toolhub_setting, toolhub_settings


def _settings_module(tmp_path: Path, toolhub: str) -> dict[str, str]:
    (tmp_path / "bad_toolhub_settings.py").write_text(f"from toolhub.settings import *  # noqa\nTOOLHUB = {toolhub}\n")
    return {"DJANGO_SETTINGS_MODULE": "bad_toolhub_settings", "PYTHONPATH": f"{ROOT}:{tmp_path}", "DJANGO_DEBUG": "1"}


@pytest.mark.parametrize(
    ("toolhub", "expected"),
    [
        ('{"AUDIT_CHAINS": "8"}', "TOOLHUB['AUDIT_CHAINS']: Input should be a valid integer (got '8'; default 8)"),
        # a tenant's chains are numbered from a multiple of 4,096 (toolhub.audit_hash.TENANT_SHARDS)
        ('{"AUDIT_CHAINS": 5000}', "TOOLHUB['AUDIT_CHAINS']: Input should be less than or equal to 4096 (got 5000"),
        ('{"CALL_LEASE_SECONDS": -1}', "TOOLHUB['CALL_LEASE_SECONDS']: Input should be greater than 0 (got -1"),
        ('{"DEFAULT_TOOL_ACCESS": "yes"}', "TOOLHUB['DEFAULT_TOOL_ACCESS']: Input should be 'deny' or 'allow'"),
        ('{"MAX_STRING_LENGHT": 5}', "TOOLHUB['MAX_STRING_LENGHT'] is not a toolhub setting; known: "),
    ],
)
def test_a_bad_value_fails_the_check_command_naming_the_key(
    toolhub: str, expected: str, run_django: RunDjango, tmp_path: Path
) -> None:
    done = run_django("manage.py", "check", **_settings_module(tmp_path, toolhub))

    assert done.returncode != 0
    assert "ImproperlyConfigured: Invalid toolhub settings: " + expected in done.stderr, done.stderr[-2000:]


def test_a_bad_environment_value_fails_naming_the_variable(run_django: RunDjango, tmp_path: Path) -> None:
    done = run_django("manage.py", "check", TOOLHUB_SAGA_MAX_ATTEMPTS="many", **_settings_module(tmp_path, "{}"))

    assert done.returncode != 0
    assert "Environment variable TOOLHUB_SAGA_MAX_ATTEMPTS='many': Input should be a valid integer" in done.stderr


def test_good_settings_pass_the_check(run_django: RunDjango, tmp_path: Path) -> None:
    done = run_django(
        "manage.py", "check", TOOLHUB_PROGRESS_KEEP="7", **_settings_module(tmp_path, '{"AUDIT_CHAINS": 4}')
    )

    assert done.returncode == 0, done.stderr[-2000:]


def test_the_object_follows_settings_changes_and_keeps_the_typed_values(settings: object) -> None:
    before = toolhub_settings()
    assert isinstance(before, ToolhubSettings) and before.CALL_LEASE_SECONDS == float(DEFAULTS["CALL_LEASE_SECONDS"])

    with override_settings(TOOLHUB={"CALL_LEASE_SECONDS": 5, "SAGA_MAX_ATTEMPTS": 2}):
        changed = toolhub_settings()
        assert (changed.CALL_LEASE_SECONDS, changed.SAGA_MAX_ATTEMPTS) == (5.0, 2)
        assert isinstance(changed.CALL_LEASE_SECONDS, float)
        assert toolhub_setting("SAGA_MAX_ATTEMPTS") == 2  # the alias reads the same object

    assert toolhub_settings().CALL_LEASE_SECONDS == before.CALL_LEASE_SECONDS
    with override_settings(TOOLHUB={"PROGRESS_KEEP": 0}), pytest.raises(ImproperlyConfigured, match="PROGRESS_KEEP"):
        toolhub_settings()
    with pytest.raises(KeyError, match="Unknown toolhub setting 'NOPE'"):
        toolhub_setting("NOPE")
    with pytest.raises(Exception, match="frozen"):
        before.AUDIT_CHAINS = 2  # type: ignore[misc]
