"""Review of 2026-12-05 (bl): the commits since 6b7a75b on the governed management commands
(``toolhub.governed_commands``, ``governance_trail.governance_recording``), the trail's URL and typed-name columns,
the stale-edit forms' validation of untouched fields, the admin's username look-alike rule and the login guard.

Each test fails on the reviewed code (main at bc53989) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. ``governance_recording`` opened its transaction when the block began, so the wrapped ``changepassword`` (and an
   interactive ``createsuperuser``) read the account and then prompted inside it: on the embedded SQLite the read's
   lock was held while a person typed, and every other process (``make run``'s server) waited on it and failed its
   writes with "database is locked" after the 20 s timeout. The transaction now begins at the block's first watched
   write (a write in a transaction of its own records its events there); the events still commit with the writes.
2. The admin's look-alike rule (``toolhub.visible.lookalike_problem``) took a letter's script from the first word of
   its character name, so ordinary Japanese names were refused as "mixing scripts": ``ユーキ`` (the prolonged sound
   mark, ``KATAKANA-HIRAGANA``), ``佐々木`` (the iteration mark, ``IDEOGRAPHIC``), as were ``oʻahu`` (a modifier
   letter), ``taro_田中`` and ``김민수.kim``. Scripts are now read from the name's NFKC form (as Django
   stores a username), the Japanese marks count as Japanese, modifier letters as no script, and the mixes Unicode's
   "highly restrictive" level allows (Latin with Han and kana, Bopomofo or Hangul) pass; Cyrillic or Greek among
   Latin letters is still refused.

Checked and holding (no test here):

- ``make run``'s commands (migrate, ``load_demo``, runserver) and ``createsuperuser --noinput`` with
  ``DJANGO_SUPERUSER_*`` on a fresh SQLite database, then ``drf_create_token`` (and ``-r``) and ``axes_reset``: all
  succeed and record (``governance.added`` for the superuser, token added/deleted/added with the key redacted).
- the governed app's place in INSTALLED_APPS: it holds no templates, static files, locale or migrations, and only
  the seven same-named commands; ``makemigrations --check`` finds nothing.
- receivers are disconnected on every exit (``ExitStack``: an error, ``SystemExit`` from createsuperuser's Ctrl-C,
  ``KeyboardInterrupt``); another thread's writes meanwhile are not recorded as the command's (thread filter);
  nested blocks use distinct dispatch uids (no wrapped command nests one); the wrapped commands write through
  ``save()`` / ``create()`` / ``delete()`` only (axes' database handler deletes through a queryset, which sends
  ``pre_delete`` per row while a receiver listens); no wrapped command uses ``queryset.update``.
- URL columns: ``url_redacted`` keeps host and path words, a change to a key alone is ``{"changed": true}`` by
  digest; ``accounts=`` keeps a typed login name only when it is an account's, the label too; ``os_user`` falls back
  to ``uid-<n>``.
- stale edits: an untouched field changed since shown is validated as stored (the grant check reads what is
  saved); a forged hidden copy equal to the stored value only makes the person's own change win; a stored value
  the form no longer offers errors on that field, as it would after a reload (Django's own rule).
- login guard: ``_host`` strips ``:port`` and ``[v6]:port`` and leaves bare IPv6 whole (an IPv6 address always has
  two colons, so no prefix of it reads as a port); only the trusted proxy's entry is read; the password-change
  page's GET answers 429 while locked; the logins and failures pages are read-only.
- other places usernames are chosen: no API route creates users; ``load_demo`` and ``toolhub_roles`` use fixed
  names; ``createsuperuser`` is the shell operator's own choice (not checked, noted).
"""

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.management.commands import changepassword
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection

from tests.helpers import console
from toolhub.models import AuditEvent


@pytest.mark.django_db(transaction=True)
def test_changepassword_holds_no_transaction_while_it_prompts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: the wrapped ``changepassword`` read the account and prompted for the password inside the recording's
    transaction (on SQLite a read lock that blocks every other process's writes while a person types). Expect: no
    transaction open at the prompt; the change and its ``governance.changed`` event are both committed."""
    User.objects.create_user("carol", "carol@example.com", "Carol-old-passw0rd")
    at_prompt: list[bool] = []

    def typed(self: Any, prompt: str = "") -> str:
        at_prompt.append(connection.in_atomic_block)
        return "a-New-passw0rd-42"

    monkeypatch.setattr(changepassword.Command, "_get_pass", typed)
    call_command("changepassword", "carol", stdout=StringIO())
    assert at_prompt and not any(at_prompt), at_prompt
    assert User.objects.get(username="carol").check_password("a-New-passw0rd-42")
    assert AuditEvent.objects.filter(event_type="governance.changed", data__contains='"password"').count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_recorded_write_and_its_event_still_roll_back_together() -> None:
    """Checked (with finding 1's change): a block that fails after its write keeps neither the write nor its event,
    and its receivers are gone afterwards. Expect: no user, no event, a later save unrecorded."""
    from toolhub.governance_trail import command_actor, governance_recording
    from toolhub.governed_commands.base import recorded_as_on_their_pages

    with (
        pytest.raises(KeyboardInterrupt),
        governance_recording(actor=command_actor(), watched=recorded_as_on_their_pages(User)),
    ):
        User.objects.create_user("dave", "dave@example.com", "Dave-passw0rd-42")
        raise KeyboardInterrupt
    assert not User.objects.filter(username="dave").exists()
    assert not AuditEvent.objects.filter(event_type__startswith="governance.").exists()
    User.objects.create_user("erin", "erin@example.com", "Erin-passw0rd-42")
    assert not AuditEvent.objects.filter(event_type__startswith="governance.").exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "username",
    ["ユーキ", "佐々木", "スズキイチロー", "山田ﾀﾛｳ", "oʻahu", "taro_田中", "김민수.kim", "μ", "zoë.müller@x.io"],
    ids=["prolonged-mark", "iteration-mark", "katakana", "half-width", "okina", "latin-han", "hangul", "mu", "latin"],
)
def test_ordinary_names_are_accepted_on_the_admin_user_page(username: str) -> None:
    """Found: ``ユーキ``, ``佐々木``, ``oʻahu``, ``taro_田中`` and ``김민수.kim`` were refused as mixing scripts (the
    script read from a character name's first word: ``KATAKANA-HIRAGANA``, ``IDEOGRAPHIC``, ``MODIFIER``; Latin
    beside Han or Hangul). Expect: the account is created; a Cyrillic or Greek letter among Latin ones is still
    refused."""
    root = User.objects.create_superuser("root", "root@example.com", "Root-password-7c1e")
    client = console(root)
    added = client.post("/admin/auth/user/add/", {"username": username, "usable_password": "false"})
    assert added.status_code == 302, added.content.decode()[:2000]
    assert User.objects.filter(username__in=[username, username.replace("ﾀﾛｳ", "タロウ")]).exists()
    for lookalike in ("\u0430lice_田中", "r\u03bfot"):  # a Cyrillic a, a Greek omicron
        refused = client.post("/admin/auth/user/add/", {"username": lookalike, "usable_password": "false"})
        assert refused.status_code == 200 and "mixes" in refused.content.decode()
        assert not User.objects.filter(username=lookalike).exists()
