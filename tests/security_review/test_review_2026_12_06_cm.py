"""Review 2026-12-06 cm: the reviews cj (settings parsing, deploy checks) and ci (OpenAI Agents paused runs).

Findings:
1. ``DJANGO_LOG_LEVEL`` (in the README's Configuration table) was handed to ``logging.config`` as given: ``info`` or
   ``verbose`` stopped every process with ``ValueError: Unable to configure root logger``, naming no variable. Now
   read by ``_env_choice`` (any case, upper-cased), or startup stops naming the variable and the levels.
2. ``CELERY_TASK_ALWAYS_EAGER`` was read only when ``CELERY_BROKER_URL`` was set: without a broker a misspelt value
   (``flase``) passed, against cj's rule that a switch that cannot be read stops startup. Now always read.
3. ``paused_run_refused`` read a call as held, then cancelled it through ``tool_call_cancel``, which withdraws any
   call not started: an operator's approval landing in between (call queued, not yet run) was overridden and the
   call cancelled, against its docstring ("a call decided meanwhile is left: the operator's decision stands") and
   unlike an approval that landed before the read. Now it withdraws only from ``pending_approval``
   (``tool_call_cancel(..., allowed_from=...)``, carried to ``tool_call_withdraw``).
4. ``paused_run_release`` took any user: another user holding a claimed run's id gave it back to be resumed again,
   and each call's trail recorded the release as theirs. Now only the run's own user releases it.

Checked and holds:
- ``_env_bool`` takes any case and surrounding whitespace (``True``, `` 1 ``, ``ON``); ``_env_int`` / ``_env_rate``
  strip too; an empty value is the default.
- Every other variable of the README's Configuration table is a free string (keys, hosts, origins, URLs, queue,
  proxy header, cache URL) or goes through ``_env_int`` / ``_env_bool`` / ``_env_rate`` / ``_database_url``;
  ``TOOLHUB_<NAME>`` goes through ``toolhub.conf`` (pydantic), tests/settings.py only sets test values.
- ``DJANGO_DEBUG=1 manage.py check`` (README quick start, Makefile ``EMBEDDED``, .ci/run) still starts.
- No message echoes a secret: ``_database_url`` never repeats the URL (dj-database-url's own messages hold no part of
  it, an unknown scheme only its scheme); the keys (``DJANGO_SECRET_KEY``, fallbacks, e-mail password) are never
  parsed by a helper that echoes its value.
- W013 fires on DEBUG off with eager tasks, including ``CELERY_TASK_ALWAYS_EAGER=1`` set deliberately: the message
  names both causes and the id can be silenced; W010-W012 read only settings.
- Each ``openai_agents.*`` event is written by ``audit_call_event`` on the call's own row (its tenant); calls are
  read by ``pk`` and the run's tenant.
- A run's own user may cancel their held calls (``tool_call_cancel`` checks no further right): a refused run
  withdraws them whatever the user's permissions; a call decided first is left, and ``CallNotWithdrawableError``
  is taken as that.
"""

import pytest
from django.contrib.auth.models import User

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_approve
from tests.posture.conftest import (
    PRODUCTION_ENV,
    RunDjango,
    run_django,  # noqa: F401 - a fixture, registered by being imported here
)
from tests.security_review.sdk_calls import HELD, held_sdk_call
from tests.security_review.test_review_2026_12_06_cj import started
from tests.tenancy.conftest import make_user
from toolhub.adapters.openai_agents import store
from toolhub.adapters.openai_agents.models import PausedAgentRun, PausedRunStatus
from toolhub.models import AuditEvent, CallStatus, Tenant


def test_a_log_level_logging_cannot_read_stops_startup_naming_its_variable(run_django: RunDjango) -> None:  # noqa: F811
    """Found: ``DJANGO_LOG_LEVEL=verbose`` failed in ``logging.config`` ("Unable to configure root logger"), naming no
    variable. Expect: ``ImproperlyConfigured`` naming ``DJANGO_LOG_LEVEL`` and the levels."""
    last = started(run_django, DJANGO_LOG_LEVEL="verbose")

    assert last.startswith("django.core.exceptions.ImproperlyConfigured: DJANGO_LOG_LEVEL='verbose'"), last
    assert "WARNING" in last


def test_a_log_level_in_lower_case_is_read(run_django: RunDjango) -> None:  # noqa: F811
    """Found: ``DJANGO_LOG_LEVEL=info`` (lower case) stopped startup. Expect: read as ``INFO``; empty: ``WARNING``."""
    shown = "import toolhub.settings as s; print(s.LOGGING['root']['level'])"

    lower = run_django("-c", shown, **{**PRODUCTION_ENV, "DJANGO_LOG_LEVEL": " info "})
    empty = run_django("-c", shown, **{**PRODUCTION_ENV, "DJANGO_LOG_LEVEL": ""})

    assert lower.returncode == 0, lower.stderr
    assert (lower.stdout.strip(), empty.stdout.strip()) == ("INFO", "WARNING")


def test_a_misspelt_eager_switch_stops_startup_without_a_broker(run_django: RunDjango) -> None:  # noqa: F811
    """Found: without ``CELERY_BROKER_URL``, ``CELERY_TASK_ALWAYS_EAGER=flase`` was never read, so passed. Expect:
    startup stops naming the variable, as with a broker."""
    last = started(run_django, CELERY_BROKER_URL="", CELERY_TASK_ALWAYS_EAGER="flase")

    assert last.startswith("django.core.exceptions.ImproperlyConfigured: CELERY_TASK_ALWAYS_EAGER='flase'"), last


def test_switches_are_read_in_any_case_with_spaces(run_django: RunDjango) -> None:  # noqa: F811
    """Found: nothing (holds). Expect: ``True``, `` 1 ``, ``ON`` are on; ``Off`` is off."""
    shown = (
        "import toolhub.settings as s; print(s.USE_X_FORWARDED_HOST, s.SECURE_HSTS_PRELOAD, s.EMAIL_USE_TLS, "
        "s.SECURE_SSL_REDIRECT)"
    )
    env = {
        "DJANGO_USE_X_FORWARDED_HOST": "True",
        "DJANGO_SECURE_HSTS_PRELOAD": " 1 ",
        "EMAIL_USE_TLS": "ON",
        "DJANGO_SECURE_SSL_REDIRECT": "Off",
    }

    result = run_django("-c", shown, **{**PRODUCTION_ENV, **env})

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "True", "False"]


@pytest.mark.django_db
def test_refusing_a_run_leaves_a_call_an_operator_approved_meanwhile(
    alice: User, operator: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: the refusal read the call as held, an operator approved it (queued, not yet run), and
    ``tool_call_cancel`` then cancelled the approved call, against "the operator's decision stands".
    Expect: the approved call stays queued, its request approved; nothing is cancelled by the refusal."""
    # given a call the SDK paused on, held for approval
    held = held_sdk_call(alice, "refused-run")
    request = ApprovalRequest.objects.get(call=held)
    read_as_held = store._own_call

    def approved_after_the_read(*args: object) -> object:
        call = read_as_held(*args)  # type: ignore[arg-type]
        approval_approve(request_id=request.pk, user=operator)
        return call

    monkeypatch.setattr(store, "_own_call", approved_after_the_read)

    # when the run is refused while the operator approves
    store.paused_run_refused(
        user=alice, tenant="acme", run_key="refused-run", items=[HELD], reason="The run was not stored."
    )

    # then the operator's decision stands
    held.refresh_from_db()
    assert held.status == CallStatus.QUEUED
    assert ApprovalRequest.objects.get(pk=request.pk).status == ApprovalStatus.APPROVED
    trail = list(AuditEvent.objects.filter(call_id=held.pk).values_list("event_type", flat=True))
    assert "approval.approve" in trail
    assert not [event for event in trail if "cancel" in event]


@pytest.mark.django_db
def test_a_refused_run_still_withdraws_its_held_call(alice: User) -> None:
    """Found: nothing (holds with finding 3's narrowing). Expect: a call still held is cancelled with its request."""
    held = held_sdk_call(alice, "refused-run")

    store.paused_run_refused(
        user=alice, tenant="acme", run_key="refused-run", items=[HELD], reason="The run was not stored."
    )

    held.refresh_from_db()
    assert held.status == CallStatus.CANCELLED
    assert ApprovalRequest.objects.get(call=held).status == ApprovalStatus.CANCELLED


@pytest.mark.django_db
def test_only_the_runs_user_gives_a_claimed_run_back(alice: User, tenant: Tenant) -> None:
    """Found: ``paused_run_release`` released any user's claimed run for whoever asked, recording them as releasing.
    Expect: another user's release changes nothing (False); the run's own user's is taken."""
    claimed = PausedAgentRun.objects.create(
        run_key="claimed-run", tenant="acme", user=alice, agent_name="clerk", state={}, status=PausedRunStatus.RESUMED
    )
    mallory = make_user("mallory", tenant=tenant)

    assert store.paused_run_release(paused_run_id=claimed.pk, user=mallory) is False
    claimed.refresh_from_db()
    assert claimed.status == PausedRunStatus.RESUMED

    assert store.paused_run_release(paused_run_id=claimed.pk, user=alice) is True
    claimed.refresh_from_db()
    assert claimed.status == PausedRunStatus.PAUSED
