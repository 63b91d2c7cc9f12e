r"""Review 2026-12-06 a: escaping and tenancy of the console's written-out names (admin_drawn, admin_visible).

Findings (both in ``toolhub.admin_visible``'s wrappers of Django's own functions; no console model's ``__str__`` or
choice label reaches them today, so each is latent, a difference from the Django behaviour the wrappers stand in for):
1. The patched ``format_html`` (admin list tags, read-only helpers) handed a row on as ``visible_text(str(row))``: a
   row whose ``__str__`` answers safe HTML was drawn as markup in a list's foreign-key cell and a read-only foreign
   key's link, where Django's ``conditional_escape`` escapes any row (a row has no ``__html__``). Now escaped as Django
   escapes it, after being written out.
2. The patched ``linebreaksbr`` (read-only fields) tested ``SafeData`` before ``str()``: a lazy string of safe HTML
   (``lazy(..., SafeString)``) holding a non-ASCII character was escaped a second time, where Django's ``stringfilter``
   reads ``str(value)`` first and keeps it as markup. Now read as Django reads it.

Checked and holds (probes run against the code as found, not kept as tests):
- A row named ``<script>…</script>"><img src=x onerror=…>&lt;b&gt;{0}%s`` + U+202E (a tenant, tool group, user, agent,
  membership, grant, tool) is escaped exactly once on 161 console pages of every registered admin, as a superuser:
  index and its sidebar, changelists (plain, ``_popup=1``, ``_popup=1&_to_field=id``), add and change pages (and
  their popups), history and delete pages (and their popups), list filters, raw id labels, select options.
- Messages after a save (safe HTML, ``visible_markup``), a delete (plain text with ``%`` formatting) and a missing
  id typed in the URL (``<script>{0}%s``) are escaped once; braces and ``%s`` in a name are never read as a format.
- "Delete selected" (its confirmation's nested rows, summary and done message) and a delete popup's answer escape
  the name once.
- A popup's ``data-popup-response`` stays valid JSON after ``_popup_drawn`` (``obj`` written out, ``value`` the key).
- The patched functions leave a ``SafeString`` as it is, escape plain and lazy plain text as Django does, and
  ``install()`` run twice, and again after ``importlib.reload(toolhub.admin_visible)``, wraps nothing twice.
- Every registered admin mixes in ``ScopedDeletion``; globex's operator, developer and auditor crawling acme's rows'
  change popups, history and delete pages (and every changelist and add popup) see no acme-only row's name (only
  the global agents, which every tenant sees); the raw id box names no row outside ``choosable_queryset``.
- Autocomplete serves no name (no admin declares ``autocomplete_fields``; review dy).

Noted, not changed: ``DrawnRow.__str__`` writes ``str(row)`` out with ``visible_text``, which drops the safe mark of
a non-ASCII safe ``__str__`` (Django's templates trust it); no console model answers safe HTML, and escaping more is
the safe side. A lone ``\r`` in a read-only text is written out as ``\u000d`` where Django drew a line break, as
``toolhub.visible`` documents.
"""

import re
from unittest import mock

import pytest
from django.contrib.admin import helpers
from django.contrib.auth.models import User
from django.template import defaultfilters
from django.utils.functional import lazy
from django.utils.safestring import SafeString, mark_safe

from agents_app.models import Agent
from tests.helpers import console
from toolhub.models import Tenant

pytestmark = pytest.mark.django_db

MARKUP = '<img src=x onerror="alert(1)">'
ESCAPED = "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"


def test_a_row_whose_name_is_safe_html_is_escaped_in_list_cells_and_read_only_links(superuser: User) -> None:
    """Found: with a related row whose ``__str__`` answers safe HTML, the agents list's tenant cell and the agent's
    read-only "created by" link drew it as markup (the patched ``format_html`` passed ``visible_text(str(row))``,
    still safe, where Django's ``conditional_escape`` escapes any row). Expect: escaped, as Django draws them
    (templates, a select's options and a filter's choices trust such a name in Django too: unchanged here)."""
    author = User.objects.create_user("author")
    agent = Agent.objects.create(
        name="plain-agent", tenant=Tenant.objects.create(slug="reports", name="Reports"), created_by=author
    )
    client = console(superuser)

    with (
        mock.patch.object(Tenant, "__str__", lambda self: mark_safe(MARKUP)),  # noqa: S308 - the row under test
        mock.patch.object(User, "__str__", lambda self: mark_safe(MARKUP)),  # noqa: S308 - the row under test
    ):
        listed = client.get("/admin/agents_app/agent/").content.decode()
        changed = client.get(f"/admin/agents_app/agent/{agent.pk}/change/").content.decode()

    cell = re.search(r'<td class="field-tenant[^"]*">(.*?)</td>', listed, re.S)
    link = re.search(r'<div class="readonly">(<a href="/admin/auth/user/[^"]*">.*?</a>)</div>', changed, re.S)
    assert cell and link, (listed[:800], changed[:800])
    assert cell.group(1) == ESCAPED
    assert link.group(1).endswith(f">{ESCAPED}</a>")


def test_a_lazy_safe_text_in_a_read_only_field_is_not_escaped_twice() -> None:
    """Found: the patched ``linebreaksbr`` escaped a lazy string of safe HTML holding a non-ASCII character
    (``<em>réservé</em>`` drawn as ``&lt;em&gt;…``), where Django's filter reads ``str(value)``, safe, and keeps the
    markup. Expect: as Django's; lazy plain text is still written out and escaped."""
    safe = lazy(lambda: mark_safe("<em>réservé</em>"), SafeString)()  # noqa: S308 - the code's own markup
    plain = lazy(lambda: "<em>a\u202eb</em>", str)()
    original = helpers.linebreaksbr.__wrapped__  # type: ignore[attr-defined]

    assert original is defaultfilters.linebreaksbr
    assert helpers.linebreaksbr(safe) == original(safe) == "<em>réservé</em>"
    assert helpers.linebreaksbr(plain) == "&lt;em&gt;a\\u202eb&lt;/em&gt;"
