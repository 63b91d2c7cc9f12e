"""Review of 2026-12-05 (dr): usernames that read as an existing account's (``toolhub.confusable_names``).

Each test fails on the reviewed code (main at 48baf24) and states what was found and what is expected.

Findings:

1. The look-alike rule (``toolhub.visible.lookalike_problem``) read scripts only: a name in one script that reads
   as an existing account was accepted on the user pages, ``ɑlice`` (a Latin alpha), ``alıce`` (a dotless i),
   ``ali̇ce`` (an i with a combining dot above), ``aIice`` (a capital I), or a whole-script copy (``расе`` all
   Cyrillic beside ``pace``, ``ᎪᏞᎥᏟᎬ`` all Cherokee beside ``alice``). Such a name is now refused when its UTS #39
   skeleton (Unicode's confusables.txt, from the ``confusable-homoglyphs`` package) equals an existing account's,
   on the add and change pages and in ``createsuperuser``; the message names that account (only people who change
   accounts reach those forms, and they see every account).
2. ``createsuperuser`` (the governed command) applied no look-alike rule at all: ``alice\u3164`` (a Hangul filler)
   or ``\u0430lice`` were created from the command line. It now applies the user pages' rule.
3. The add page answered 500 for a name already taken in another case (``Alice`` beside ``alice``; on PostgreSQL
   also ``alıce``): Django's form records that error and returns ``None``, which the look-alike check then read.
   It now leaves such a name to Django's message.

Checked and holding:

- Ordinary names stay accepted with look-alike accounts present (``ユーキ``, ``佐々木``, ``oʻahu``, ``taro_田中``,
  ``zoë``, ``Ярослав``, ``김철수``, Arabic with its own digits); a real Russian name whose skeleton is ASCII
  (``Вера``, read ``Bepa``) is accepted until an account reading the same exists, and the rule goes both ways.
- An account keeps its own name and may be renamed to a look-alike of itself (it reads as no one else).
- The user add and change pages are ``CrossTenantChangesOnly``: tenant-scoped staff only read users, so the account
  named in the refusal is shown only to people who see every account.
"""

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from tests.helpers import console


def add(root: User, username: str) -> tuple[int, str]:
    response = console(root).post("/admin/auth/user/add/", {"username": username, "usable_password": "false"})
    return response.status_code, response.content.decode()


@pytest.fixture
def root() -> User:
    root = User.objects.create_superuser("root", "root@example.com", "Root-password-7c1e")
    User.objects.create_user("alice")
    User.objects.create_user("pace")
    return root


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("username", "reads_as"),
    [
        ("\u0251lice", "alice"),
        ("al\u0131ce", "alice"),
        ("ali\u0307ce", "alice"),
        ("aIice", "alice"),
        ("\u0440\u0430\u0441\u0435", "pace"),
        ("\u13aa\u13de\u13a5\u13df\u13ac", "alice"),
    ],
    ids=["latin-alpha", "dotless-i", "i-dot-above", "capital-i", "all-cyrillic", "all-cherokee"],
)
def test_a_name_reading_as_an_existing_account_is_refused_on_the_add_page(
    root: User, username: str, reads_as: str
) -> None:
    """Found: a one-script name reading as an existing account (``ɑlice``, ``alıce``, an all-Cyrillic ``расе``) was
    created. Expect: refused, the message naming the account it reads as; nothing created."""
    status, page = add(root, username)
    named = f"reads as the existing account &#x27;{reads_as}&#x27;" in page
    taken = username == "al\u0131ce" and "already exists" in page  # PostgreSQL's UPPER folds ı: Django's rule first
    assert status == 200 and (named or taken)
    assert not User.objects.filter(username=username).exists()


@pytest.mark.django_db
def test_renaming_to_another_accounts_look_alike_is_refused_and_to_ones_own_is_not(root: User) -> None:
    """Found: the change page accepted renaming ``bob`` to ``ɑlice`` beside ``alice``. Expect: refused, naming
    ``alice``; ``alice`` herself may take ``ɑlice`` (she reads as no one else)."""
    bob = User.objects.create_user("bob")
    alice = User.objects.get(username="alice")
    form = {"username": "\u0251lice", "date_joined_0": "2026-12-05", "date_joined_1": "10:00:00"}
    refused = console(root).post(f"/admin/auth/user/{bob.pk}/change/", form)
    assert refused.status_code == 200 and "reads as the existing account &#x27;alice&#x27;" in refused.content.decode()
    bob.refresh_from_db()
    assert bob.username == "bob"
    renamed = console(root).post(f"/admin/auth/user/{alice.pk}/change/", form)
    assert renamed.status_code == 302, renamed.content.decode()[:2000]
    alice.refresh_from_db()
    assert alice.username == "\u0251lice"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "username",
    ["ユーキ", "佐々木", "oʻahu", "taro_田中", "zoë", "Ярослав", "김철수", "\u0639\u0644\u064a\u0661\u0662", "Вера"],
)
def test_ordinary_names_stay_accepted_beside_look_alike_accounts(root: User, username: str) -> None:
    """Found: nothing (the rule must not refuse real names). Expect: each is created, ``Вера`` (read ``Bepa``) too,
    as no account reads the same; Arabic letters with Arabic-Indic digits (their own script's) too."""
    User.objects.create_user("yuki")
    User.objects.create_user("sasaki")
    status, page = add(root, username)
    assert status == 302, page[:2000]
    assert User.objects.filter(username=username).exists()


@pytest.mark.django_db
def test_a_whole_script_name_and_its_latin_reading_never_stand_side_by_side(root: User) -> None:
    """Found: ``Вера`` and ``Bepa`` could both be created. Expect: the second of them is refused, whichever it is."""
    assert add(root, "Вера")[0] == 302
    status, page = add(root, "Bepa")
    assert status == 200 and "reads as the existing account &#x27;Вера&#x27;" in page
    assert not User.objects.filter(username="Bepa").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("username", ["\u0251lice", "alice\u3164", "\u0430lice"], ids=["alpha", "filler", "mixed"])
def test_createsuperuser_refuses_a_look_alike_username(root: User, username: str) -> None:
    """Found: ``createsuperuser --noinput`` created ``ɑlice``, ``alice\u3164`` and ``\u0430lice`` beside ``alice``.
    Expect: refused with the user pages' reason; nothing created."""
    with pytest.raises(CommandError, match="Choose another username"):
        call_command("createsuperuser", "--noinput", username=username, email="x@example.com", verbosity=0)
    assert not User.objects.filter(username=username).exists()
    call_command("createsuperuser", "--noinput", username="carol", email="c@example.com", verbosity=0)
    assert User.objects.filter(username="carol", is_superuser=True).exists()


@pytest.mark.django_db
def test_a_name_taken_in_another_case_gets_djangos_message_not_a_server_error(root: User) -> None:
    """Found: ``Alice`` beside ``alice`` crashed the add page (500: the look-alike check read Django's ``None``).
    Expect: the form again (200) with Django's message; nothing created."""
    status, page = add(root, "Alice")
    assert status == 200 and "already exists" in page
    assert not User.objects.filter(username="Alice").exists()
