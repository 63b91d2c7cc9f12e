r"""Review dy: a row's own name in the console's titles, breadcrumbs, questions, recent actions and messages.

Findings:
1. Django's templates draw a row's name from ``str(obj)`` (``original``, ``object``, ``title``, ``subtitle``) on every
   change, history and delete page: the ``<title>``, the breadcrumb, the heading and the delete question drew a
   bidirectional control (U+202E) or a zero-width space as written, so ``report\u202egnp.exe`` read as another
   name, where the lists and read-only fields write it out (``toolhub.visible``). ``ToolhubAdminSite.admin_view``
   now hands every page's ``title``/``subtitle`` through ``visible_text`` and its row as ``DrawnRow`` (its
   attributes the row's, its text written out): ``toolhub.admin_drawn``.
2. The index's "Recent actions" drew ``LogEntry.object_repr`` as written, and the console's messages ("The tool
   group “…” was deleted successfully.", ``message_user`` after a save, delete or action) drew the name as
   written: ``templates/admin/index.html`` and ``base_site.html`` draw them through ``visible`` /
   ``visible_markup`` (safe HTML stays safe: the escapes are ASCII).
   What is stored is unchanged: the row's name and the log entry's ``object_repr`` stay as typed.

Checked and holds:
- Autocomplete (select2's JSON ``text`` is ``str(obj)``): no console admin declares ``autocomplete_fields``, so
  Django's view refuses every field (403) and no name is served there.
- A form's inputs keep the value as typed (a save must not rewrite the name): only the drawn text changes.
- The history page's rows draw the user and the change message (field names), not the row's name.
- A row's own attributes still reach its templates through ``DrawnRow`` (the approval desk's ``original.status``
  and ``original.round``, the object tools' and breadcrumbs' ``original.pk`` / ``object.pk``); a lazy or safe
  ``title`` (the code's) is left as it is.
- Names typed in the console are slugs for tool groups, agents and tenants (``SlugField``: no such character gets
  in through a form); one reaches the pages through code (``@tool(group=...)``), the API or a migration.

Noted, not changed (the same kind, elsewhere than the page's own row; each its own mechanism in Django):
- A foreign key's cell in a list (the agents' "tenant" column): ``items_for_result`` draws the related row with
  ``str()`` without ``display_for_field``, so ``toolhub.admin_visible`` does not reach it.
- A form's select options (``ModelChoiceField.label_from_instance``: a grant's tool group and tenant) and a list
  filter's choices (``admin/filter.html``) draw ``str(row)`` as written; so does a popup's response
  (``popup_response_data``) and the list checkbox's ``aria-label`` (read aloud, not drawn).
"""

import re

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType

from agents_app.models import Agent
from tests.helpers import console
from toolhub.models import Tenant, ToolGroup

pytestmark = pytest.mark.django_db

RLO = "\u202e"
ZWSP = "\u200b"
NAME = f"report{RLO}gnp.exe{ZWSP}"
SHOWN = "report\\u202egnp.exe\\u200b"


def _drawn(page: str) -> str:
    """The page without its form inputs, which must keep the value as typed."""
    page = re.sub(r"<input[^>]*>", "", page)
    return re.sub(r"<textarea[^>]*>.*?</textarea>", "", page, flags=re.S)


def _part(page: str, pattern: str) -> str:
    found = re.search(pattern, page, re.S)
    assert found, page[:800]
    return found.group(1)


def _assert_written_out(page: str, *, titled: bool = True) -> None:
    drawn = _drawn(page)
    assert RLO not in drawn and ZWSP not in drawn
    if titled:  # a delete page's title is "Delete"
        assert SHOWN in _part(page, r"<title>(.*?)</title>")
    assert SHOWN in _part(page, r'<div class="breadcrumbs">(.*?)</div>')


@pytest.mark.parametrize("page", ["change", "history", "delete"])
def test_a_tool_groups_own_name_is_written_out_on_its_pages(superuser: User, page: str) -> None:
    """Found: a tool group's change, history and delete pages drew its name (title, breadcrumb, heading, the delete
    question) with the bidi override and zero-width space as written. Expect: written out, everywhere but inputs."""
    group = ToolGroup.objects.create(name=NAME)

    html = console(superuser).get(f"/admin/toolhub/toolgroup/{group.pk}/{page}/").content.decode()

    _assert_written_out(html, titled=page != "delete")
    if page == "delete":
        assert f'delete the tool group "{SHOWN}"?' in html
    else:
        assert SHOWN in _part(html, r"<h[12]>([^<]*report[^<]*)</h[12]>")
    group.refresh_from_db()
    assert group.name == NAME  # stored as typed


def test_an_agents_and_a_tenants_name_is_written_out_on_their_change_pages(superuser: User) -> None:
    """Found: an agent's and a tenant's change page drew their names with the controls as written. Expect: written
    out in the title, breadcrumb and heading; the agent's name input keeps the value as typed."""
    agent = Agent.objects.create(name=NAME)
    client = console(superuser)
    agent_page = client.get(f"/admin/agents_app/agent/{agent.pk}/change/").content.decode()
    agent.delete()  # the tenant's name would be an option of the agent's tenant select
    tenant = Tenant.objects.create(slug=NAME, name="Reporting")

    tenant_page = client.get(f"/admin/toolhub/tenant/{tenant.pk}/change/").content.decode()

    _assert_written_out(agent_page)
    _assert_written_out(tenant_page)
    assert f"<h2>{SHOWN}</h2>" in agent_page and f"<h2>{SHOWN}</h2>" in tenant_page


def test_recent_actions_write_out_a_logged_name(superuser: User) -> None:
    """Found: the index's "Recent actions" drew a log entry's ``object_repr`` as written. Expect: written out; the
    entry still stores the name as typed."""
    group = ToolGroup.objects.create(name=NAME)
    entry = LogEntry.objects.create(
        user=superuser,
        content_type=ContentType.objects.get_for_model(ToolGroup),
        object_id=str(group.pk),
        object_repr=NAME,
        action_flag=ADDITION,
    )

    html = console(superuser).get("/admin/").content.decode()

    recent = _part(html, r'<div class="module" id="recent-actions-module">(.*?)</div>')
    assert RLO not in recent and ZWSP not in recent and SHOWN in recent
    entry.refresh_from_db()
    assert entry.object_repr == NAME


def test_the_deleted_message_writes_out_the_name(superuser: User) -> None:
    """Found: after deleting a tool group, the message "The tool group “…” was deleted successfully." drew the name
    as written. Expect: written out; the deletion's log entry keeps the name as typed."""
    group = ToolGroup.objects.create(name=NAME)

    response = console(superuser).post(f"/admin/toolhub/toolgroup/{group.pk}/delete/", {"post": "yes"}, follow=True)

    html = response.content.decode()
    messages = _part(html, r'<ul class="messagelist">(.*?)</ul>')
    assert RLO not in messages and ZWSP not in messages and f"“{SHOWN}”" in messages
    assert not ToolGroup.objects.filter(pk=group.pk).exists()
    assert LogEntry.objects.get(object_id=str(group.pk), content_type__model="toolgroup").object_repr == NAME


def test_the_changed_message_writes_out_the_name_and_keeps_its_link(superuser: User) -> None:
    """Found: after saving a tenant, the message "The tenant “…” was changed successfully." (safe HTML, its link
    built by ``format_html``) drew the name as written. Expect: written out, the link still a link."""
    tenant = Tenant.objects.create(slug=NAME, name="Reporting")
    client = console(superuser)
    form = client.get(f"/admin/toolhub/tenant/{tenant.pk}/change/").context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None}
    data.update({"name": "Reporting 2", "_save": "Save"})

    response = client.post(f"/admin/toolhub/tenant/{tenant.pk}/change/", data, follow=True)

    html = response.content.decode()
    messages = _part(html, r'<ul class="messagelist">(.*?)</ul>')
    assert RLO not in messages and ZWSP not in messages
    assert re.search(rf'<a href="[^"]+">{re.escape(SHOWN)}</a>', messages), messages
    tenant.refresh_from_db()
    assert (tenant.slug, tenant.name) == (NAME, "Reporting 2")
