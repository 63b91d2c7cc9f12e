"""Review of 2026-12-05 (dz): regressions of "usernames that read as an existing account are refused".

Reviewed: ``toolhub.confusable_names`` (a UTS #39 skeleton, read after case folding too), its use on the user add and
change pages (``toolhub.admin_usernames``) and in the governed ``createsuperuser`` (main at 0f25db6).

Findings:

1. Case folding turned spelling into case: Python's full case folding reads ``ß`` as ``ss``, so ``strauß`` (or
   ``weiß``) was refused beside ``strauss`` (``weiss``), two ordinary, visibly different names. UTS #39 keeps them
   apart (``ß`` is a prototype itself, of ``β``). A name is now folded character by character, each to one character
   (Unicode's simple case folding), so folding changes only case.

Checked and holding (no test needed beyond those here and in review dr):

- The character table agrees with a Unicode 13 confusables.txt: no two single characters share a skeleton that
  confusables.txt keeps apart; it misses a few merges (lone pairs changed since). ``d``/``cl`` and ``w``/``vv`` are
  not confusables in UTS #39 and stay apart; ``m`` reads as ``rn`` (``amold`` beside ``arnold`` is refused) as
  UTS #39 says; ``1``, ``I`` read as ``l`` and ``0`` as ``o`` (``user1``/``userl``), ``5``/``s`` stay apart.
- Accents stay distinct (UTS #39 maps characters, not marks away): ``josé``/``jose``, ``müller``/``muller``,
  ``zoë``/``zoe``, ``renée``/``renee``, ``nguyễn``/``nguyen``, ``łars``/``lars`` are all accepted side by side.
- No two Hangul syllables share a skeleton; CJK merges are variants of one character (``黑``/``黒``, ``郎``/``郞``)
  plus ``土``/``士``; kana merge only with their look-alike ideographs (``カ``/``力``). Arabic merges are letters
  drawn alike (Arabic ``ي`` and Persian ``ی``; ``علي``/``على``): refusing those is the rule working.
- ``load_demo`` on a fresh SQLite database still runs; the existing admin user tests still pass.
- An unchanged username is not checked (the change form returns before the scan), so saving other fields of one of
  two stored look-alike accounts needs no rename and costs no scan over the users.
- ``createsuperuser --noinput`` with ``DJANGO_SUPERUSER_USERNAME`` a look-alike fails with ``CommandError`` (exit
  code 1), and neither the account nor a ``governance.added`` event is recorded.
- A user change form with an unchanged username runs one query and no scan (measured with 20,000 users); a new
  name is compared in about 0.4 s on SQLite for 20,000 mixed-case names.

Found and left, a trade-off: ``Lan`` is refused beside ``Ian`` (``Lona`` beside ``Iona``): ``Ian`` reads as ``lan``,
``Lan`` in another case. It is the same composition (look-alike, then case) that refuses ``AIice`` beside ``alice``
(``AIice`` reads as ``Alice``); no reading of a name tells the two apart, and the impersonation is worth the rare
capitalised pair (tested below so a change here is a decision).
"""

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from tests.helpers import console
from toolhub.models import AuditEvent


@pytest.fixture
def root() -> Iterator[User]:
    yield User.objects.create_superuser("root", "root@example.com", "Root-password-7c1e")


def add(root: User, username: str) -> tuple[int, str]:
    response = console(root).post("/admin/auth/user/add/", {"username": username, "usable_password": "false"})
    return response.status_code, response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(("existing", "username"), [("strauss", "strauß"), ("weiß", "weiss")])
def test_sharp_s_and_ss_are_two_names(root: User, existing: str, username: str) -> None:
    """Found: ``strauß`` was refused beside ``strauss`` ("reads as the existing account"): full case folding reads
    ``ß`` as ``ss``, a spelling, not a look-alike. Expect: accepted, as UTS #39 keeps them apart."""
    User.objects.create_user(existing)
    status, page = add(root, username)
    assert status == 302, page
    assert User.objects.filter(username=username).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("existing", "username"),
    [("jose", "josé"), ("muller", "müller"), ("zoe", "zoë"), ("nguyen", "nguyễn"), ("clown", "down"), ("w", "vv")],
)
def test_accented_and_ordinary_names_stand_side_by_side(root: User, existing: str, username: str) -> None:
    """Found: nothing (held). Expect: a name differing by an accent or by letters UTS #39 keeps apart is accepted."""
    User.objects.create_user(existing)
    assert add(root, username)[0] == 302


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("existing", "username"),
    [("strauss", "STRAUSS"), ("alice", "aIice"), ("alice", "AIice"), ("Ian", "Lan"), ("amy", "arny")],
)
def test_case_and_look_alikes_are_still_refused(root: User, existing: str, username: str) -> None:
    """Found: nothing (held after the fix). Expect: a case variant or a look-alike is still refused on the add page."""
    User.objects.create_user(existing)
    status, _ = add(root, username)
    assert status == 200
    assert not User.objects.filter(username=username).exists()


@pytest.mark.django_db
def test_two_stored_look_alikes_keep_their_names_when_other_fields_change(root: User) -> None:
    """Found: nothing (held). Expect: ``alice`` beside a stored ``aIice`` saves a new e-mail without a rename."""
    User.objects.create_user("aIice")
    alice = User.objects.create_user("alice")
    page = console(root).get(f"/admin/auth/user/{alice.pk}/change/")
    assert page.status_code == 200
    form = {"username": "alice", "email": "alice@example.com", "is_active": "on", "date_joined_0": "2026-12-05"}
    form["date_joined_1"] = "10:00:00"
    response = console(root).post(f"/admin/auth/user/{alice.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    alice.refresh_from_db()
    assert alice.email == "alice@example.com" and alice.username == "alice"


@pytest.mark.django_db
def test_createsuperuser_from_the_environment_refuses_a_look_alike(root: User, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: nothing (held). Expect: ``DJANGO_SUPERUSER_USERNAME=aIice`` beside ``alice`` fails (a ``CommandError``,
    exit code 1) naming the account; no user and no ``governance.added`` event is recorded."""
    User.objects.create_user("alice")
    before = AuditEvent.objects.filter(event_type="governance.added").count()
    monkeypatch.setenv("DJANGO_SUPERUSER_USERNAME", "aIice")
    monkeypatch.setenv("DJANGO_SUPERUSER_EMAIL", "x@example.com")
    with pytest.raises(CommandError, match="reads as the existing account 'alice'"):
        call_command("createsuperuser", "--noinput", verbosity=0)
    assert not User.objects.filter(username="aIice").exists()
    assert AuditEvent.objects.filter(event_type="governance.added").count() == before
