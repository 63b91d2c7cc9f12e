"""Review of 2026-12-06 (b): regressions of API tokens in the console and of confusable usernames.

Reviewed (main at c76a846): ``toolhub.api.tokens.token_handle`` and ``install``, ``ApiTokenAdmin`` (the key shown
once, ``hidden_lookups``, ``_not_a_popup``, the holder read-only), ``GuardedLookups``/``_fields_of``, migration
toolhub 0036; ``toolhub.confusable_names``, ``toolhub.admin_usernames.username_problem`` and the paths that create
users (the user pages, ``createsuperuser``, ``load_demo``).

Findings:

1. ``createsuperuser`` checked the name as typed and stored it NFKC-normalised (Django's ``UserManager`` does):
   ``ᴬᴰᴹᴵᴺ`` (modifier capitals) read as no account, passed, and was stored as ``ADMIN`` beside ``admin``; a
   fullwidth ``ａｄｍｉｎ`` passed too and failed late with an ``IntegrityError``. ``username_problem`` now reads a
   name as the user model stores it (``normalize_username``), for every caller.
2. ``load_demo`` created its superuser ``admin`` (and ``alice``, the operators) beside a real account that reads the
   same (``Admin``, ``ɑdmin``), checking only exact names; it now refuses, naming that account, as it does for a real
   account of the very name.
3. A copy in capitals of a script without case read as no account: all-Lisu ``ꓮꓓꓟꓲꓠ`` (drawn ``ADMIN``) was
   accepted beside ``admin`` while Latin ``ADMIN`` is refused (its ``ꓲ`` was read only as ``l``, a capital I's
   prototype, never as a folded ``i``). ``toolhub.confusable_names`` now reads such a letter as ``i`` too.

Checked and holding:

- No registered admin list accepts a lookup reaching a token's key (``?user__auth_token__key__startswith=``,
  ``__pk__``, the relation itself): every path from every registered model up to three relations deep is refused.
- No admin ``search_fields`` reaches the key; ``?q=<key>`` only echoes the query; ``?o=`` sorts by user and created.
- The token list, change, history and delete pages, the user change, delete and ``delete_selected`` pages, the
  admin index (recent actions) and the autocomplete never show a key; ``?key=``, ``?pk=``, ``?_popup``,
  ``?_to_field`` answer 400; the add page answers the key once with ``Cache-Control: no-store``.
- ``LogEntry.object_repr`` for tokens added and deleted after 0036 is the handle; ``governance.added``/``deleted``
  of ``drf_create_token`` (and ``-r``) hold no key.
- No API route lists or issues tokens (no ``obtain_auth_token``); tenant-scoped staff see no token pages
  (``CrossTenantOnly``). Creating a token for a superuser is for people who cross the boundary, who can already
  set that superuser's password on the user page (Django's model, a design choice, not a finding).
- The user forms normalise (NFKC) before the check; ``admіn`` (Cyrillic і) and Greek/Latin mixes are refused;
  ``ɑdmin``, ``Admin``, mathematical bold ``𝐚𝐝𝐦𝐢𝐧`` read as ``admin``; zero-width and other non-``\\w`` characters are
  refused by Django's validator; ``admin.`` is a visibly different name and UTS #39 keeps it apart.
"""

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from toolhub.admin_usernames import username_problem


@pytest.fixture
def admin_user(db: None) -> Iterator[User]:
    yield User.objects.create_superuser("admin", "ops@corp.example", "Admin-password-3f9a")


@pytest.mark.django_db
@pytest.mark.parametrize("typed", ["ᴬᴰᴹᴵᴺ", "ａｄｍｉｎ"])
def test_createsuperuser_reads_the_name_as_stored(
    admin_user: User, typed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: ``createsuperuser --noinput`` with ``ᴬᴰᴹᴵᴺ`` beside ``admin`` stored ``ADMIN`` (the check read the
    modifier letters, the manager stored NFKC); fullwidth ``ａｄｍｉｎ`` crashed with an IntegrityError.
    Expect: a ``CommandError`` naming ``admin``, and no account added."""
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "Another-password-8d2c")
    with pytest.raises(CommandError, match="'admin'"):
        call_command("createsuperuser", "--noinput", username=typed, email="x@corp.example")
    assert list(User.objects.values_list("username", flat=True)) == ["admin"]


@pytest.mark.django_db
def test_username_problem_reads_compatibility_forms(admin_user: User) -> None:
    """Found: ``username_problem("ᴬᴰᴹᴵᴺ")`` was ``None`` beside ``admin``. Expect: it names ``admin``."""
    problem = username_problem("ᴬᴰᴹᴵᴺ")
    assert problem is not None
    assert "'admin'" in problem


@pytest.mark.django_db
@pytest.mark.parametrize("real", ["Admin", "ɑdmin"])
def test_load_demo_refuses_beside_a_lookalike_account(real: str) -> None:
    """Found: ``load_demo`` beside a real ``Admin`` (or ``ɑdmin``) superuser created the demo superuser ``admin``
    (weak password with DEBUG on), reading as the real one. Expect: refused naming it, nothing loaded."""
    User.objects.create_superuser(real, "ops@corp.example", "Real-password-5b7e")
    with pytest.raises(CommandError, match=real):
        call_command("load_demo")
    assert list(User.objects.values_list("username", flat=True)) == [real]


@pytest.mark.django_db
@pytest.mark.parametrize(("existing", "copy"), [("admin", "ꓮꓓꓟꓲꓠ"), ("alice", "ꓮꓡꓲꓚꓰ")])
def test_caseless_capital_copy_reads_as_the_account(existing: str, copy: str) -> None:
    """Found: an all-Lisu ``ꓮꓓꓟꓲꓠ`` (drawn ``ADMIN``) was accepted beside ``admin`` while Latin ``ADMIN`` is refused:
    Lisu has no case, so its ``ꓲ`` was read only as ``l`` (a capital I's prototype), never as ``i`` as a folded capital
    I is. Expect: refused, naming the account."""
    User.objects.create_user(existing)
    problem = username_problem(copy)
    assert problem is not None
    assert repr(existing) in problem
