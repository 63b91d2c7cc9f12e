"""Review 2026-12-05 (eb): a regression review of the last changes (API tokens named by a handle, key shown once;
webhook errors' quoted URL pieces; ``paused_run_claim``'s standing check; ``expire_request`` moving only once).

Findings (each fails on 65cae49, passes after the fix):

1. ``toolhub.url_secrets.url_quotes_redacted`` called ``urldefrag(url)`` outside its ``try``: a ``WEBHOOK_URL``
   that does not parse (``http://[::1/hook#frag``: an unclosed IPv6 bracket, or a bad bracketed host) with a
   fragment raised ``ValueError`` out of ``approvals.webhooks._post``, so the attempt's outcome was never recorded
   (the worker's task failed; the delivery sat claimed until its lease ran out, then failed the same way). Now the
   URL is parsed once, in the ``try``; one that does not parse is redacted whole, as ``url_redacted`` has it.
2. The token pages answered Django's popups, which name a row by its primary key's column: a token's is its key.
   ``/admin/authtoken/tokenproxy/?_popup=1`` (and ``&_to_field=key``, allowed since it is the primary key) put every
   token's key in its row's ``data-popup-opener``; a change or delete POST with ``_popup`` answered the key in the
   popup response (``new_value`` / ``value``). Nothing refers to a token, so no page opens one in a popup:
   ``ApiTokenAdmin`` now refuses ``_popup`` and ``_to_field`` on its list, add/change and delete pages (400).
3. ``approvals.unanswered.approval_withdraw``, the twin of ``expire_request`` (fixed by review ea), still sent
   ``approval_cancelled`` and queued its webhook, and answered "withdrawn", when its call had left
   ``pending_approval`` (the call's move, with its ``approval.cancelled`` event, did not happen). Now it announces
   and answers only the move of the call (``tool_call_refuse``'s result), as ``expire_request`` does.
4. The token list was filtered by any lookup on the token's own columns (Django's admin allows every local one):
   ``?key__startswith=a`` (and ``?pk__startswith=``: ``pk`` is the key, and the admin's lookup walk, which knows no
   field ``pk``, let it through) listed whose key starts so, reading any live key back a character at a time, for
   whoever may view the token list. Review dv's "search is by username only" held for ``?q=`` alone. Now
   ``ApiTokenAdmin.hidden_lookups`` names ``key`` and ``GuardedLookups`` walks ``pk`` as the primary key field.

Checked and holds:
- the one-time key page (``ApiTokenAdmin.response_add``): "Save and continue editing" and "Save and add another"
  answer the key page (200, no ``Location``, no 500), the key once in it; no model has a foreign key to a token, so
  no "+" on any page opens a token popup (the user page's only token link is the sidebar's "Add"); a reload (the
  same POST again) answers the form's error (the user already holds a token), not the key, and a GET of the add
  page is an empty form;
- migration ``toolhub.0036`` run forward from 0035 with existing ``LogEntry`` rows (proxy and concrete token rows,
  and a user row) on PostgreSQL and SQLite: token rows redacted, the user's untouched; backwards is a no-op;
- the token list makes the same number of queries for 20 tokens as for 23 (the ``user`` column makes Django's
  changelist ``select_related``; the handle and ``TokenChangeList.url_for_result`` read the cached user);
- ``token_handle`` of an unsaved token (no user, no ``created``): "API token of nobody"; the governance trail's label
  (``str(obj)`` through the proxy) is read before the row goes (``pre_delete``), so a cascade from a user's deletion
  still finds the user; no admin template or admin code names a token by ``.key`` but the one-time page;
- ``url_quotes_redacted`` with a URL with no scheme (``example.com/hook?k=ab1``: ``unknown url type`` quotes it
  redacted), an IPv6 host with user info (``http://u:pw@[::1]:8080/x?k=ab1``), a fragment (redacted), a bad port;
- ``expire_request``'s callers: ``approvals_expire_due`` counts requests expired (the request moves under its lock
  whether or not its call did), and a late decision on an expired request still raises "This approval request
  expired; nothing was changed." (``_decide`` reads the request's status, set by ``decided_row``, not the result);
- ``paused_run_claim``'s standing check refuses inside the claim's transaction, before anything changed.

Noted by the review and fixed after it: ``token_handle`` of a stale token object whose user was deleted since
raised ``User.DoesNotExist``; it names the user's id instead.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token

from approvals import signals
from approvals.models import WebhookDelivery
from approvals.webhooks import _post
from tests.helpers import RequestCall, shown_key
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.url_secrets import url_quotes_redacted
from toolhub.waiting import tool_call_withdraw

pytestmark = pytest.mark.django_db

TOKENS = "/admin/authtoken/tokenproxy/"


@pytest.fixture
def console(db: None) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root-eb", "root@example.com", "pw-root-eb-1234"))
    return client


@pytest.mark.parametrize("url", ["http://[::1/hook?k=ab1#frag", "http://u:pw@[zz]/hook?k=ab1#frag"])
def test_an_unparseable_webhook_url_with_a_fragment_fails_the_attempt_without_raising(settings: Any, url: str) -> None:
    """Found: ``url_quotes_redacted`` parsed the URL (``urldefrag``) outside its ``try``, so an unparseable
    ``WEBHOOK_URL`` with a fragment raised ``ValueError`` out of ``_post`` and the attempt's outcome was never recorded.
    Expect: a failed attempt with an error holding none of the URL's secret parts."""
    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "WEBHOOK_URL": url}
    delivery = WebhookDelivery(event="approval.requested", payload={}, next_attempt_at=timezone.now())

    ok, error = _post(delivery, timeout=2)

    assert not ok
    assert error
    assert "ab1" not in error and "frag" not in error
    assert url_quotes_redacted(f"bad url {url!r}", url) == "bad url '[redacted]'"


def test_the_token_pages_answer_no_popup_with_keys(console: Client, alice: User) -> None:
    """Found: Django's popups name a row by its primary key's column, and a token's is its key: the token list with
    ``?_popup=1`` (or ``&_to_field=key``) put every key in its rows' ``data-popup-opener``, and a change or delete
    POST with ``_popup`` answered the key in its popup response. Expect: a popup of a token page refused (400), no key
    in it, nothing deleted; the pages themselves still answer."""
    key = Token.objects.create(user=alice).key  # the stored value, the primary key a popup would name
    change, delete = f"{TOKENS}{alice.pk}/change/", f"{TOKENS}{alice.pk}/delete/"

    answers = [
        console.get(f"{TOKENS}?_popup=1"),
        console.get(f"{TOKENS}?_popup=1&_to_field=key"),
        console.get(f"{TOKENS}?_to_field=key"),
        console.get(f"{change}?_popup=1"),
        console.post(change, {"_popup": "1"}),
        console.post(change, {"_popup": "1", "_to_field": "key"}),
        console.post(delete, {"_popup": "1", "post": "yes"}),
        console.post(f"{TOKENS}add/?_popup=1", {"user": alice.pk, "_popup": "1"}),
    ]

    for answer in answers:
        assert answer.status_code == 400
        assert key not in answer.content.decode()
    assert Token.objects.get(user=alice).key == key
    assert console.get(TOKENS).status_code == 200 and console.get(change).status_code == 200


@pytest.mark.parametrize("button", ["_continue", "_addanother"])
def test_every_add_button_answers_the_key_page_once(console: Client, alice: User, button: str) -> None:
    """Holds: "Save and continue editing" and "Save and add another" answer the one-time page, not a redirect.

    Expect: 200, no redirect, the key once, never-cache; the same POST again answers the form's error, not the key.
    """
    created = console.post(f"{TOKENS}add/", {"user": alice.pk, button: "1"})
    key = shown_key(created)

    assert created.status_code == 200
    assert "Location" not in created.headers
    assert created.content.decode().count(key) == 1
    assert "no-store" in created.headers.get("Cache-Control", "")
    again = console.post(f"{TOKENS}add/", {"user": alice.pk, button: "1"})
    assert again.status_code == 200
    assert key not in again.content.decode()
    assert Token.objects.filter(user=alice).count() == 1


def test_the_token_list_makes_no_query_per_token(console: Client) -> None:
    """Holds: the handle names a token by its user; the list reads every user in its one query.

    Expect: as many queries for 23 tokens as for 20."""
    for index in range(20):
        Token.objects.create(user=User.objects.create_user(f"eb-{index}"))
    with CaptureQueriesContext(connection) as first:
        assert console.get(TOKENS).status_code == 200
    for index in range(3):
        Token.objects.create(user=User.objects.create_user(f"eb-more-{index}"))
    with CaptureQueriesContext(connection) as second:
        assert console.get(TOKENS).status_code == 200

    assert len(second.captured_queries) == len(first.captured_queries)


def test_a_withdrawal_whose_call_did_not_move_is_neither_announced_nor_reported_done(
    request_call: RequestCall, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: ``approval_withdraw`` (the twin of ``expire_request``, fixed by review ea) sent ``approval_cancelled``
    (and queued its webhook) and answered "withdrawn" even when the call had already left ``pending_approval``.
    Expect: nothing announced, ``tool_call_withdraw`` answers False, the call keeps its state."""
    # given a held call whose request is pending while the call already settled otherwise
    call = request_call("risky_effect", {"note": "x"}, user=alice, tenant="acme")
    ToolCall.objects.filter(pk=call.pk).update(status=CallStatus.CANCELLED)
    received: list[Any] = []

    def listener(**kwargs: Any) -> None:
        received.append(kwargs)

    signals.approval_cancelled.connect(listener)
    try:
        # when it is withdrawn (the caller still reads it as held)
        with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
            withdrawn = tool_call_withdraw(call=call, actor="alice", reason="changed my mind")
    finally:
        signals.approval_cancelled.disconnect(listener)

    # then nothing says it was withdrawn
    assert withdrawn is False
    assert received == []
    assert not WebhookDelivery.objects.filter(event="approval.cancelled").exists()
    assert not AuditEvent.objects.filter(call_id=call.pk, event_type="approval.cancelled").exists()
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.CANCELLED


@pytest.mark.parametrize("lookup", ["key__startswith", "pk__startswith", "key", "key__gte", "pk__lte", "key__regex"])
def test_the_token_list_is_not_filtered_by_the_key(console: Client, alice: User, lookup: str) -> None:
    """Found: Django's admin filters a list by any lookup on the model's own columns: ``?key__startswith=a`` (or
    ``?pk__startswith=``, the key too) listed whose token's key starts so, reading any key back a character at a
    time, to whoever may view the token list. Expect: refused (400), nobody listed; other filters still work."""
    key = Token.objects.create(user=alice).key  # the stored value, which the lookup would read back
    value = {"key": key}.get(lookup, key[:1])

    answer = console.get(TOKENS, {lookup: value})

    assert answer.status_code == 400
    assert "alice" not in answer.content.decode()
    assert "alice" in console.get(TOKENS, {"created__gte": "2000-01-01"}).content.decode()


def test_a_token_whose_user_is_gone_is_still_named() -> None:
    """Found (review eb's note): naming a token read its user, so a token object whose user row was deleted since
    (a stale copy) raised ``User.DoesNotExist`` from ``str()``, where a page or a log line names it. Expect: it is
    named by the user's id, never by its key, and naming it raises nothing."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    user = User.objects.create_user("gone-eb", password="pw-gone-eb-1234")
    key = Token.objects.create(user=user).key
    stale = Token.objects.get(key=key)
    User.objects.filter(pk=user.pk).delete()

    name = str(stale)

    assert key not in name
    assert f"#{user.pk}" in name
