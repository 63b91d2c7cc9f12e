"""Review 2026-12-05 (dv): an API token's key, the credential itself, shown in the console after it was created.

DRF's ``Token.__str__`` is its key and DRF's token page lists ``key``; Django's admin names a row by ``str()``
everywhere (the change, history and delete pages' titles and breadcrumbs, the success messages, the delete pages'
related rows, and ``LogEntry.object_repr``, which "Recent actions" and the history pages show for years). So the
key of every token reached whoever read the console long after it was handed out.

Findings (each fails on b2f57b3, passes after the fix):

1. The token list showed every key (``key`` in ``list_display``).
2. The change and history pages of a token named it by its key (title, breadcrumbs).
3. ``LogEntry.object_repr`` of a token added or deleted in the admin was its key: the admin index's "Recent
   actions" showed it to every staff member with a log of their own, and the history page's title.
4. The delete confirmation of a token, and of its user (the cascade's related rows, ``admin_deletion``), named the
   token by its key, and so did the "was deleted" message.
5. Rows written before the fix: a data migration redacts ``object_repr`` (and ``object_id`` of concrete token rows,
   whose pk is the key) of the token content types.
6. (noted by the review, fixed after it) A token's change page let its holder be changed: the same live key then
   signed in as another user. The holder is read-only once the token is made.

Fix: a token is named by a handle that is no part of the secret (``toolhub.api.tokens.token_handle``: its user and
when it was created, no prefix of the key: one token per user makes the user enough to tell tokens apart, and a
prefix would put part of a live credential in records kept for years); the name is installed as ``Token.__str__``
once, so every page, message and log entry that names a token by ``str()`` gets the handle. The full key is
shown exactly once: on the page answering the "add" form (never stored in a message, not cacheable).

Checked and holds: the governance trail's events for a token (added, deleted, by the admin or
``drf_create_token``) hold neither the key nor its text (``governance_append`` redacts the label and id);
``drf_create_token`` prints the key (its purpose) and writes no ``LogEntry``; the token list's search is by
username only (DRF's ``search_fields``), so a key is never matched by a prefix; no model has a foreign key to a
token, so no autocomplete or raw-id widget names one; tenant-scoped staff never reach the token pages at all.
"""

import re
from io import StringIO

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from rest_framework.authtoken.models import Token

from tests.helpers import shown_key
from toolhub.api.keys import api_key_issue, key_digest
from toolhub.models import AuditEvent

pytestmark = pytest.mark.django_db

TOKENS = "/admin/authtoken/tokenproxy/"


@pytest.fixture
def root(db: None) -> User:
    return User.objects.create_superuser("root-dv", "root@example.com", "pw-root-dv-1234")


@pytest.fixture
def console(root: User) -> Client:
    client = Client()
    client.force_login(root)
    return client


def _log_text() -> str:
    return " ".join(f"{entry.object_id} {entry.object_repr} {entry.change_message}" for entry in LogEntry.objects.all())


def _trail_text() -> str:
    return " ".join(event.data for event in AuditEvent.objects.all())


def test_token_list_and_pages_do_not_show_the_key(console: Client, alice: User) -> None:
    """Found: the token list, change page and history page showed the key. Expect: the user's handle only."""
    token = Token.objects.create(user=alice)

    pages = [
        console.get(TOKENS),
        console.get(f"{TOKENS}{alice.pk}/change/"),
        console.get(f"{TOKENS}{alice.pk}/history/"),
        console.get(f"{TOKENS}?q={token.key[:6]}"),
    ]

    for page in pages:
        assert page.status_code == 200
        assert token.key not in page.content.decode()
        assert token.key[:8] not in page.content.decode()
    assert "alice" in pages[1].content.decode()
    assert "alice" not in pages[3].content.decode()  # no search by (part of) the key


def test_adding_a_token_shows_the_key_once_and_records_it_nowhere(console: Client, alice: User) -> None:
    """Found: LogEntry.object_repr of an added token was its key, shown in "Recent actions" and the history.
    Expect: the key on the page answering the add form only, never again, not in LogEntry nor in the trail."""
    created = console.post(f"{TOKENS}add/", {"user": alice.pk})
    key, stored = shown_key(created), Token.objects.get(user=alice).key

    assert created.status_code == 200
    assert key in created.content.decode() and stored not in created.content.decode()
    assert "no-store" in created.headers.get("Cache-Control", "")
    assert LogEntry.objects.filter(object_repr__contains="alice").exists()
    later = [console.get("/admin/"), console.get(TOKENS), console.get(f"{TOKENS}{alice.pk}/history/")]
    for value in (key, stored):
        assert value not in _log_text()
        for page in later:
            assert value not in page.content.decode()
        assert value not in _trail_text()


def test_deleting_a_token_names_it_without_the_key(console: Client, alice: User) -> None:
    """Found: the delete confirmation, the "was deleted" message and LogEntry named the token by its key.
    Expect: the handle everywhere, the key nowhere."""
    key = api_key_issue(alice)
    stored = Token.objects.get(user=alice).key

    confirm = console.get(f"{TOKENS}{alice.pk}/delete/")
    deleted = console.post(f"{TOKENS}{alice.pk}/delete/", {"post": "yes"}, follow=True)

    assert confirm.status_code == 200 and deleted.status_code == 200
    assert not Token.objects.filter(user=alice).exists()
    for value in (key, stored):
        assert value not in confirm.content.decode()
        assert value not in deleted.content.decode()
        assert value not in _log_text()
        assert value not in _trail_text()


def test_deleting_a_user_lists_their_token_without_the_key(console: Client, alice: User) -> None:
    """Found: the user's delete page listed the cascade's token as "Token: <key>" (admin_deletion's label).
    Expect: the token named by its handle."""
    key = api_key_issue(alice)
    stored = Token.objects.get(user=alice).key

    confirm = console.get(f"/admin/auth/user/{alice.pk}/delete/")

    assert confirm.status_code == 200
    assert key not in confirm.content.decode() and stored not in confirm.content.decode()
    assert re.search(r"Token: [^<]*alice", confirm.content.decode())


def test_drf_create_token_prints_the_key_and_nothing_else_records_it(alice: User) -> None:
    """Found (holds): the command's output is the one place the key is meant for.
    Expect: the key printed; no LogEntry, no event holds it."""
    out = StringIO()
    call_command("drf_create_token", "alice", stdout=out)
    stored = Token.objects.get(user=alice).key
    printed = re.fullmatch(r"Generated token (\w+) for user alice\n", out.getvalue())

    assert printed is not None and key_digest(printed.group(1)) == stored
    for value in (printed.group(1), stored):
        assert value not in _log_text()
        assert value not in _trail_text()


def test_log_entries_written_before_the_fix_are_redacted() -> None:
    """Found: LogEntry rows written before the fix hold the key. Expect: the migration redacts them."""
    from importlib import import_module

    from django.apps import apps as global_apps
    from django.contrib.contenttypes.models import ContentType

    user = User.objects.create_user("bob-dv")
    token = Token.objects.create(user=user)
    proxy = ContentType.objects.get(app_label="authtoken", model="tokenproxy")
    concrete = ContentType.objects.get(app_label="authtoken", model="token")
    LogEntry.objects.create(user=user, content_type=proxy, object_id=str(user.pk), object_repr=token.key, action_flag=1)
    LogEntry.objects.create(user=user, content_type=concrete, object_id=token.key, object_repr=token.key, action_flag=3)
    kept = LogEntry.objects.create(
        user=user,
        content_type=ContentType.objects.get_for_model(User),
        object_id=str(user.pk),
        object_repr="bob-dv",
        action_flag=2,
    )

    import_module("toolhub.migrations.0036_redact_token_log_entries").redact_token_log_entries(global_apps, None)

    assert token.key not in _log_text()
    assert LogEntry.objects.get(pk=kept.pk).object_repr == "bob-dv"
    assert LogEntry.objects.filter(content_type=proxy, object_id=str(user.pk)).exists()


def test_a_tokens_holder_cannot_be_changed_on_its_page(console: Client, alice: User) -> None:
    """Found (review dv's note): the token's change page let its user be changed, so alice's live key then signed
    in as bob without a new token being made. Expect: the holder is read-only once made; a POST naming another
    user leaves the key with alice, and bob is handed a token of his own only by creating one."""
    bob = User.objects.create_user("bob-dv", password="pw-bob-dv-1234")
    key = api_key_issue(alice)

    page = console.get(f"{TOKENS}{alice.pk}/change/")
    console.post(f"{TOKENS}{alice.pk}/change/", {"user": bob.pk})

    assert page.status_code == 200
    assert 'name="user"' not in page.content.decode()
    assert Token.objects.get(key=key_digest(key)).user_id == alice.pk
    assert not Token.objects.filter(user=bob).exists()
