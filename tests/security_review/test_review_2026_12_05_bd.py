"""Review bd: is the README true? Governance, Security model, Configuration and Production checked against the code.

Findings:
- ``TOOLHUB["AUDIT_CHECKPOINT_SECONDS"]`` was validated and then ignored: beat's schedule read only the environment
  variable (settings.py is imported before a deployment's settings set ``TOOLHUB``), so beat kept signing every
  300 s. Now the schedule follows the setting like every key (``toolhub.beat``, applied when Celery finalizes).
- README listed about half of the ``TOOLHUB`` keys (no ``APPROVAL_TIMEOUT_SECONDS``, ``CALL_LEASE_SECONDS``,
  ``WEBHOOK_MAX_ATTEMPTS``, ``SAGA_*``, ``MAX_ARGUMENTS_BYTES``, ...) and few defaults; it now has a table of every
  key with its default, held to ``ToolhubSettings`` by a test here.
- ``TOOLHUB["DEFAULT_MAX_TOOL_CALLS"]`` (README: "default max tool calls") was read by no code: agents always got
  10. Now an agent created without a budget (services, API, admin) gets the setting.
- README (Four eyes) promised that keys in ``SECRET_KEY_FALLBACKS`` still verify approved arguments, but the shipped
  settings read none: rotating ``DJANGO_SECRET_KEY`` voided waiting approvals. ``DJANGO_SECRET_KEY_FALLBACKS`` now
  sets it (documented in Configuration).
- README said ``verify_audit --workers`` defaults to the CPUs; it is the CPUs up to 8.

Checked and holds: the settings error message of the README's example, unknown keys and out-of-range values stop
startup naming the key; env ``TOOLHUB_<NAME>`` only for scalar keys; the Configuration table's Django variables and
defaults (settings.py); throttle rates; Celery time limits; ``toolhub.W004`` reads ``AUDIT_KEY_ENV`` and warns on
unset/short/SECRET_KEY; ``toolhub.W006`` / ``approvals.W001`` ids; ``audit_checkpoint -o`` / ``--acknowledge``;
``verify_audit --checkpoint/--tenant``; ``toolhub_db_roles --role`` and ``TOOLHUB_DB_APP_PASSWORD``;
``generate_calls`` refused without the demo app; ``load_demo`` random passwords without DEBUG; page size up to
500 and "Invalid cursor"; the desk's 15 s refresh; the 10,000-row exact count; Verify now once a minute per
tenant; 287 deltas per full checkpoint; the ``production`` extra adds gunicorn; ``DASHBOARD_HOURS`` 24.
"""

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agents_app.models import Agent
from agents_app.services import agent_create
from toolhub.conf import DEFAULTS

ROOT = Path(__file__).resolve().parents[2]


def test_beat_follows_the_checkpoint_interval_set_in_the_toolhub_settings(tmp_path: Path) -> None:
    """Found: TOOLHUB["AUDIT_CHECKPOINT_SECONDS"] = 45 in a deployment's settings left beat at 300 s.

    Expect: once Celery finalizes the app (as beat does before reading its schedule), the checkpoint entry
    runs every 45 s.
    """
    (tmp_path / "site_settings.py").write_text(
        "from toolhub.settings import *  # noqa\nTOOLHUB = {'AUDIT_CHECKPOINT_SECONDS': 45}\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "site_settings",
        "DJANGO_DEBUG": "1",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
    }
    env.pop("TOOLHUB_AUDIT_CHECKPOINT_SECONDS", None)
    code = (
        "import django; django.setup()\n"
        "from toolhub.celery import app\n"
        "app.finalize()\n"
        "print(app.conf.beat_schedule['toolhub-audit-checkpoint']['schedule'])\n"
    )

    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)

    assert done.stdout.strip() == "45.0", done.stderr


def test_readme_lists_every_toolhub_setting_with_its_default() -> None:
    """Found: half of the TOOLHUB keys were nowhere in README, and most defaults unstated.

    Expect: README's table of TOOLHUB keys has one row per key of ToolhubSettings, with its true default.
    """
    readme = (ROOT / "README.md").read_text()
    rows = dict(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \| (.+?) \| .+\|$", readme, re.M))
    missing = sorted(name for name in DEFAULTS if name not in rows)
    wrong = {
        name: (rows[name], default)
        for name, default in DEFAULTS.items()
        if name in rows and rows[name] != f"`{default!r}`"
    }

    assert not missing, f"TOOLHUB keys README does not list: {missing}"
    assert not wrong, f"README's defaults differ from ToolhubSettings: {wrong}"


@pytest.mark.django_db
def test_an_agent_created_without_a_budget_gets_the_configured_default(settings: Any) -> None:
    """Found: TOOLHUB["DEFAULT_MAX_TOOL_CALLS"] was read nowhere: every agent got 10 tool calls, whatever it said.

    Expect: an agent created without max_tool_calls (services, API, admin form's initial) gets the setting;
    one that names a budget keeps it.
    """
    settings.TOOLHUB = {"DEFAULT_MAX_TOOL_CALLS": 25}

    made = agent_create(name="budgeted-default")
    named = agent_create(name="budgeted-own", max_tool_calls=4)

    assert (made.max_tool_calls, named.max_tool_calls) == (25, 4)
    assert Agent().max_tool_calls == 25


def test_a_rotated_secret_key_can_be_kept_as_a_fallback_from_the_environment() -> None:
    """Found: README (Four eyes) says keys in SECRET_KEY_FALLBACKS still verify approved arguments' hashes, but the
    shipped settings read none from the environment: rotating DJANGO_SECRET_KEY voided every waiting approval.

    Expect: DJANGO_SECRET_KEY_FALLBACKS (comma-separated) becomes SECRET_KEY_FALLBACKS.
    """
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "toolhub.settings",
        "DJANGO_SECRET_KEY": "new-" + "k" * 50,
        "DJANGO_SECRET_KEY_FALLBACKS": "old-one, old-two",
    }
    code = "from toolhub import settings; print(settings.SECRET_KEY_FALLBACKS)"

    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)

    assert done.stdout.strip() == "['old-one', 'old-two']", done.stderr
