"""Review of 2026-12-05 (cy): the recorded management commands (``toolhub.governed_commands``) reviewed again.

Reviewed: 1d0beef, be72b0c, f990b27, bc53989, 80af239, 56da2c8 (main at a677711): the wrapped ``createsuperuser``,
``changepassword``, ``drf_create_token`` and ``axes_reset*``, ``governance_trail.governance_recording`` /
``command_actor`` / ``os_user`` / ``account_named``, ``recorded_as_on_their_pages`` and the header's own
"Change password" page. Each finding's test failed on the reviewed code and passes now.

Findings:

1. ``recorded_as_on_their_pages`` promised that a command records a row "as its console page records it", but an API
   token made or replaced by ``drf_create_token`` was recorded as ``authtoken.token`` with the id ``[redacted]``
   (its primary key is its key), while the token page, and a token deleted with its user (review cu), record it as
   ``authtoken.tokenproxy`` with the user's id: an auditor following a token (or filtering on the page's model)
   missed every one issued from the shell. A ``Binding`` now carries the model its page shows (``audit_binding``:
   the page's model) and ``governance_recording`` records the row through it, as the page does.
2. Review l's sweep (every installed command records or is allowed) allowed commands by name only: an app installed
   before Django's, or an upgrade moving a command, could put a command changing accounts under an allowed name
   (``clearsessions``, ``migrate``) and slip past it. The sweep now also pins each allowed command to the app it was
   reviewed in (``ALLOWED_FROM``), as it already pinned the recording ones.
3. ``governance_recording`` listened to the signals of each watched model only; a write through a proxy of it sends
   them as the proxy, so a token created through ``TokenProxy`` (the token page's own model) inside a recorded
   command left no event. It now listens to every proxy of a watched model too, recording the row as the model's.

Checked and holding:

- No secret reaches an event or an exception: the password and its hash (``changepassword``, ``createsuperuser
  --noinput`` with ``DJANGO_SUPERUSER_PASSWORD``), the token's key (its label and id redacted), a login attempt's
  request data and a typed name that is no account (kept as ``None``). ``drf_create_token`` prints the key, as the
  original does (the operator asked for it); its "user does not exist" error and ``changepassword``'s echo the name
  the operator typed, as the originals do, and record nothing.
- Failing midway: the interactive commands write nothing before their prompts end, so a KeyboardInterrupt or a
  refused password records nothing; a write that fails rolls back with its event (the block's transaction, or the
  write's own: ``get_or_create``'s, a ``delete()``'s). ``drf_create_token -r`` deletes then creates in two
  transactions, as the original: a deletion that happened is recorded even if the creation then fails.
- ``axes_reset_username`` / ``axes_reset_ip`` with several names or addresses, matching none or many: one
  ``governance.deleted`` per attempt deleted, none when nothing matched; output and counts as the originals'.
- Chains: a token's and a password's events reach the chains of the user's tenants only, a new superuser's and a
  lifted lockout's the platform's; every event verifies with ``verify_audit`` afterwards (test below, committed
  for real, SQLite and PostgreSQL).
- The sweep: commands resolve by name to the first installed app, and the wrapping app comes before auth, DRF and
  axes (the sweep fails if it stops winning); each recording command is tested by review l. It cannot see writes
  a wrapped command would make without model signals (``QuerySet.update``, ``bulk_create``): today's originals
  save and delete row by row (axes' reset is a ``QuerySet.delete``, row by row while a receiver listens).
- The override behaves as the original: same options, help, output and exit codes (``KeyboardInterrupt`` and
  ``CommandError`` pass through), ``--database`` as the original (one database is configured).

Noted, not changed: the header's "Change password" page (``admin_site.GuardedPasswordChangeForm.save``) still names
the user page's tenants and secrets itself (identical today) rather than through ``audit_binding``;
``governance_recording`` records only watched models, not the governing rows a watched row's deletion cascades to
(the admin's ``_append_cascade`` does): no wrapped command deletes a row with governing dependants today.
"""

import json
from io import StringIO

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.management.commands import changepassword
from django.contrib.auth.models import User
from django.core.management import call_command, get_commands
from django.test import Client
from rest_framework.authtoken.models import Token

from toolhub.models import AuditEvent


def _payloads(kind: str) -> list[dict[str, object]]:
    return [json.loads(e.data) for e in AuditEvent.objects.filter(event_type=kind).order_by("id")]


@pytest.mark.django_db
def test_a_token_issued_from_the_shell_is_recorded_as_its_page_records_it(alice: User) -> None:
    """Found: ``drf_create_token`` recorded the token as ``authtoken.token`` with id ``[redacted]``, the token page as
    ``authtoken.tokenproxy`` with the user's id. Expect: the command's events name the row as the page's do."""
    call_command("drf_create_token", "alice", stdout=StringIO())
    call_command("drf_create_token", "alice", "-r", stdout=StringIO())
    key = Token.objects.get(user=alice).key
    root = User.objects.create_superuser("root", "root@example.com", "root-passw0rd-42")
    client = Client()
    client.force_login(root)
    assert client.post(f"/admin/authtoken/tokenproxy/{alice.pk}/delete/", {"post": "yes"}).status_code == 302
    added = _payloads("governance.added")
    deleted = _payloads("governance.deleted")
    shapes = {(p["model"], p["id"], p["object"].split(",")[0]) for p in [*added, *deleted] if p["model"] != "auth.user"}
    assert shapes == {("authtoken.tokenproxy", alice.pk, "API token of alice")}  # the handle (review dv), no key
    assert len(added) == 2 and len(deleted) == 2
    assert key not in "".join(e.data for e in AuditEvent.objects.all())


@pytest.mark.django_db(transaction=True)
def test_recorded_commands_commit_events_that_verify(alice: User, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checked: the commands run outside any test transaction (their own, begun at the first write) commit their
    events in the right chains and the trail verifies. Expect: verify_audit intact, events where they belong."""
    monkeypatch.setattr(changepassword.Command, "_get_pass", lambda self, prompt="": "a-New-passw0rd-42")
    call_command("changepassword", "alice", stdout=StringIO())
    call_command("drf_create_token", "alice", "-r", stdout=StringIO())
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "a-Root-passw0rd-42")
    call_command("createsuperuser", "--noinput", "--username", "root", "--email", "r@example.com", stdout=StringIO())
    for name in ("alice", "Tr0ub4dor&3-typed-in-the-wrong-field"):
        AccessAttempt.objects.create(
            username=name,
            ip_address="203.0.113.9",
            user_agent="curl",
            failures_since_start=5,
            post_data="password=hunter2",
            get_data="",
            http_accept="*/*",
            path_info="/admin/login/",
        )
    out = StringIO()
    call_command("axes_reset_username", "alice", "nobody", "Tr0ub4dor&3-typed-in-the-wrong-field", stdout=out)
    assert out.getvalue().strip() == "2 attempts removed."
    verified = StringIO()
    call_command("verify_audit", stdout=verified)
    assert "every chain intact" in verified.getvalue()
    chains = sorted((e.event_type, json.loads(e.data)["model"], e.tenant) for e in AuditEvent.objects.all())
    assert chains == [
        ("governance.added", "auth.user", ""),
        ("governance.added", "authtoken.tokenproxy", "acme"),
        ("governance.changed", "auth.user", "acme"),
        ("governance.deleted", "axes.accessattempt", ""),
        ("governance.deleted", "axes.accessattempt", ""),
    ]
    every = "".join(e.data for e in AuditEvent.objects.all())
    for secret in ("a-New-passw0rd-42", "a-Root-passw0rd-42", "hunter2", "Tr0ub4dor", Token.objects.get().key):
        assert secret not in every


def test_the_sweep_notices_an_allowed_command_taken_over_by_another_app(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: review l's sweep allowed commands by name only, so an app installed before Django's (or an upgrade
    moving a command) could put a ``clearsessions`` that changes accounts under a reviewed name and pass it. Expect:
    the sweep fails when an allowed name resolves to another app than the one it was reviewed in."""
    from tests.security_review import test_review_2026_12_05_l as review_l

    installed = get_commands()
    monkeypatch.setattr(review_l, "get_commands", lambda: {**installed, "clearsessions": "someapp.accounts_sync"})
    with pytest.raises(AssertionError, match="clearsessions"):
        review_l.test_every_installed_command_records_governance_or_says_why_not()


@pytest.mark.django_db
def test_a_row_written_through_a_proxy_of_a_watched_model_is_recorded(alice: User) -> None:
    """Found: ``governance_recording`` listened to each watched model's own signals only, so a token created or
    deleted through DRF's ``TokenProxy`` (the token page's model) inside a recorded command left no event.
    Expect: a write through a proxy of a watched model is recorded as one through the model."""
    from rest_framework.authtoken.models import TokenProxy

    from toolhub.governance_trail import command_actor, governance_recording
    from toolhub.governed_commands.base import recorded_as_on_their_pages

    with governance_recording(actor=command_actor(), watched=recorded_as_on_their_pages(Token)):
        token = TokenProxy.objects.create(user=alice)
        key = token.key
        token.delete()
    assert [(p["model"], p["id"]) for p in _payloads("governance.added")] == [("authtoken.tokenproxy", alice.pk)]
    assert [(p["model"], p["id"]) for p in _payloads("governance.deleted")] == [("authtoken.tokenproxy", alice.pk)]
    assert key not in "".join(e.data for e in AuditEvent.objects.all())
