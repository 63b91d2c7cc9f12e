"""Review 2026-12-06 v: a newcomer's smoke test of the README on the embedded default (SQLite, no services, demo data).

Findings:
1. The tour's own management commands (step 1 ``DJANGO_DEBUG=1 .venv/bin/python manage.py drf_create_token alice``,
   step 5 ``verify_audit``, ``check``, ``audit_export``, ``search_eval``, ...) each printed ``toolhub.W002`` about
   ``DEMO_NOTIFY_API_KEY``, a variable the README never names: only ``make run``'s own environment gave the demo's
   notification tool its placeholder key (``make worker`` did not either). Now every DEBUG process has it from
   the settings (an environment value still wins); production (no DEBUG, ``TOOLHUB_DEMO=1``) still warns.
2. Tour step 3's approval request page, opened by the demo's ``operator``, read "Asked by: None", "Approver group:
   None", "Escalation group: None": a foreign key to a page the viewer may not open is drawn by a callable
   (``toolhub.admin_relations.ShownRelation``), and Django writes a read-only callable's ``None`` as "None". Now the
   admin's empty value ("-"), as Django draws an empty foreign key (and as the page's "Rule: -").

Checked and holds (run by hand against a server started as ``make run`` starts it, on port 8765, on the code as found):
- ``migrate`` + ``load_demo`` on a fresh SQLite file, and again on the same file (idempotent); ``runserver`` starts
  with no system check issue.
- Tour steps 1-5: tokens; the order-demo run answers ``waiting`` with one pending approval and nothing executed; the
  approval e-mail to operator and operator2 is on the console; the approval desk says "Approval desk: 1 pending" and
  the request page shows tool, arguments, reason, input, who may approve, one field per argument, Approve / Reject;
  approving from the admin form completes the run (``create_order`` succeeded once, the output quotes the order);
  ``verify_audit`` says every chain is intact.
- ``transfer-demo`` completes its four calls; ``rollback-demo`` refunds the debit (``compensated``) after the frozen
  credit fails; rejecting over ``POST /api/v1/approvals/<id>/reject/`` with ``round`` gives the model
  "Rejected by operator: <comment>"; switching ``get_balance`` off as admin makes it an unknown tool to the model.
- ``/api/docs/`` and ``/api/schema/`` answer 200; admin lists answer 200 for admin, operator and auditor.
- ``POST /api/v1/calls/?wait=10`` with ``Idempotency-Key`` answers 200 (42.0), its replay ``Idempotent-Replayed``;
  three concurrent ``?wait=5`` polls of a held call by one user: two wait, the third answers at once (wait slots).
- MCP under uvicorn (the README's command): the curl ``tools/call`` and ``tools/list``, and the Python SDK snippet
  (``calculate``, ``toolhub_find_tools``) work.
- The demo's ``openai-local`` provider, enabled in the admin with ``OLLAMA_API_KEY`` set, reaches a fake
  OpenAI-compatible model on 127.0.0.1:11434 under the outbound policy (DEBUG allows loopback): tool call and answer.
- ``credential_env`` refusals on the provider page name the rule (``DJANGO_`` prefix; the tool whose ``Secret`` reads
  ``DEMO_NOTIFY_API_KEY``); a row saved before with ``DJANGO_SECRET_KEY`` is reported by ``check --database default``
  as ``toolhub.W007``; with the demo's rows ``check --database default`` reports nothing.
- ``audit_export`` (unsigned without a key, signed with ``TOOLHUB_AUDIT_KEY``), ``audit_public_key`` (fails without a
  key, saying so), ``audit_file_verify`` with and without ``--public-key-file``, the console's Export trail
  (acme 200 and verifies, globex 404 for acme's auditor), ``audit_checkpoint -o`` / ``--acknowledge``,
  ``verify_audit --checkpoint`` / ``--tenant acme``, ``generate_calls``, ``toolhub_roles``, ``sync_tools``,
  ``axes_reset_username``.
- ``search_eval`` on ``tests/data``: lexical recall@5 0.91 main, 0.83 held-out, 0.80 blind 3; hybrid 0.87 blind 3
  (as the README's table); a catalogue missing expected tools names the file, entry and problem.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from approvals.models import ApprovalRequest
from tests.helpers import RequestCall, console

ROOT = Path(__file__).resolve().parents[2]


def readme_tour_env() -> dict[str, str]:
    """The variables the README's tour step 1 sets before ``.venv/bin/python manage.py``."""
    readme = (ROOT / "README.md").read_text()
    step = readme.split("\n1. Get tokens: `", 1)[1].split("`", 1)[0]
    prefix = step.split(".venv/bin/python manage.py", 1)[0].split()
    assert prefix == ["DJANGO_DEBUG=1"], f"the README's tour command changed: {step!r}"
    return dict(item.split("=", 1) for item in prefix)


def manage_check(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``manage.py check`` with the project's settings and only the environment given (no key of the test run)."""
    clean = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DJANGO_", "TOOLHUB_", "DEMO_")) and name not in ("DATABASE_URL", "CELERY_BROKER_URL")
    }
    clean.update({"DJANGO_SETTINGS_MODULE": "toolhub.settings", "PYTHONPATH": str(ROOT)})
    clean["DATABASE_URL"] = f"sqlite:///{tmp_path / 'readme.sqlite3'}"
    clean.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120
    )


def test_the_readme_tour_commands_print_no_warning_about_the_demo_notification_key(tmp_path: Path) -> None:
    """Found: ``DJANGO_DEBUG=1 .venv/bin/python manage.py ...`` as the tour writes it (tokens, ``verify_audit``) printed
    ``toolhub.W002`` "secret 'DEMO_NOTIFY_API_KEY' ... is not set" on every command; only ``make run`` set the
    placeholder. Expect: no issue in DEBUG; without DEBUG a server given the demo (``TOOLHUB_DEMO=1``) and no key is
    still told ``toolhub.W002`` (the placeholder stays a development convenience)."""
    checked = manage_check(tmp_path, **readme_tour_env())
    production = manage_check(
        tmp_path,
        DJANGO_SECRET_KEY="Q8v2nR5tW1yZ4bE7hK0mP3sU6xA9cF2jL5oT8wB1eH4kN7qS0vY3zC6gI9lM2pR5",
        TOOLHUB_DEMO="1",
    )

    assert checked.returncode == 0, checked.stderr
    assert "toolhub.W002" not in checked.stderr
    assert "System check identified no issues" in checked.stdout
    assert "toolhub.W002" in production.stderr
    assert "DEMO_NOTIFY_API_KEY" in production.stderr


def test_an_environment_key_still_wins_over_the_demo_placeholder(tmp_path: Path) -> None:
    """Found: (with finding 1) the placeholder must not hide a real key. Expect: ``DEMO_NOTIFY_API_KEY`` in the
    environment is what the tool's Secret resolves to in DEBUG; the placeholder only when it is unset."""
    script = (
        "import django; django.setup(); from toolhub.tools.presets import Secret; "
        "print(Secret('DEMO_NOTIFY_API_KEY').resolve())"
    )
    base = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DJANGO_", "TOOLHUB_", "DEMO_")) and name != "DATABASE_URL"
    }
    base.update({"DJANGO_SETTINGS_MODULE": "toolhub.settings", "PYTHONPATH": str(ROOT), "DJANGO_DEBUG": "1"})
    base["DATABASE_URL"] = f"sqlite:///{tmp_path / 'readme.sqlite3'}"

    def key(**env: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert key(DEMO_NOTIFY_API_KEY="ntfy-real-key-7d1e") == "ntfy-real-key-7d1e"
    assert key() == "demo-notify-placeholder-key"


@pytest.mark.django_db
def test_the_tour_approval_page_shows_an_empty_relation_as_the_admin_empty_value(request_call: RequestCall) -> None:
    """Found: the demo's operator opening the tour's held ``create_order`` read "Asked by: None", "Approver group: None"
    and "Escalation group: None" (a read-only ``ShownRelation`` answered ``None``, which Django writes out). Expect:
    "-", the admin's empty value, as for an empty foreign key the viewer may open ("Rule: -"); a set one still named."""
    call_command("load_demo", verbosity=0)
    alice, operator = User.objects.get(username="alice"), User.objects.get(username="operator")
    call = request_call("create_order", {"product": "Laptop", "amount": "5000"}, alice, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)

    page = console(operator).get(f"/admin/approvals/approvalrequest/{request.pk}/change/").content.decode()

    def shown(label: str) -> str:
        found = re.search(rf"<label>{label}:</label>\s*<div class=\"readonly\">(.*?)</div>", page, re.S)
        assert found, label
        return found.group(1).strip()

    assert not request.askers.exists() and request.approver_group_id is None
    assert shown("Asked by") == "-"
    assert shown("Approver group") == "-"
    assert shown("Escalation group") == "-"
    assert shown("Rule") == "-"
    assert shown("Requested by") == "alice"
