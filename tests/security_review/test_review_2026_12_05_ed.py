r"""Review ed: a related row's name where the console draws it beside another row (lists, selects, filters, popups).

Findings (each drew ``str(row)`` or a row's text as written, so ``report\u202egnp.exe`` read as another name where
the row's own pages write it out, review dy):
1. A foreign key's cell in a list (the agents' "tenant" column): Django's ``items_for_result`` formats the related
   row itself with ``format_html``, not through ``display_for_field``.
2. A form's select options (a grant's tool group and tenant): ``ModelChoiceIterator.choice`` labels each option
   ``label_from_instance(row)``.
3. A list filter's choices (a grant's tool group and tenant filters, the audit console's tenant filter):
   ``admin/filter.html`` draws ``choice.display`` as written.
4. A popup's response (``popup_response_data``): its ``obj`` is the text the opener's select then shows.
5. The list checkbox's ``aria-label`` ("Select this object for an action - …"), read aloud by a screen reader.
6. A read-only foreign key on a change page (an agent's "created by"): ``AdminReadonlyField.get_admin_url`` formats
   the related row with ``format_html``.
7. A read-only method's text on a change page (a tool group's "Members from the code", tool names): Django draws
   it with ``linebreaksbr``, not ``display_for_value`` (so would a read-only many-to-many's joined names).
8. The row named beside a raw id box (a tenant membership's user): ``ForeignKeyRawIdWidget.label_and_url_for_value``.
Fixed in one place each: ``toolhub.admin_visible.install`` (1, 2, 5-8: the admin's row formatting in its list tags
and read-only helpers, their ``linebreaksbr``, the options' labels, the raw id label, the checkbox),
``toolhub.admin_drawn.drawn_context`` (4: every page's context) and an override of ``admin/filter.html`` through the
``visible`` filter (3). Only the drawn text changes: an option's value, a raw id box's value, a filter's query and
a popup's ``value`` stay the row's key; the rows stay as stored.

Checked and holds:
- A filter choice's link keeps the stored value (percent-encoded in the query), so filtering still matches the row.
- The input filters (``input_filter.html``) draw a typed value back into an input, which must keep it as typed.
- ``ModelChoiceIterator.choice`` is patched for every form; the console is the only place forms are drawn (the API
  is DRF, JSON), and only the label changes, never the option's value.
- The delete pages' nested rows are ``toolhub.admin_deletion``'s (review dy's predecessor), not changed here.
"""

import html as html_lib
import json
import re

import pytest
from django.contrib.auth.models import User

from agents_app.models import Agent
from tests.helpers import console
from toolhub.models import Grant, Tenant, TenantMembership, ToolDefinition, ToolGroup

pytestmark = pytest.mark.django_db

RLO = "\u202e"
ZWSP = "\u200b"
NAME = f"report{RLO}gnp.exe{ZWSP}"
SHOWN = "report\\u202egnp.exe\\u200b"


def _drawn(page: str) -> str:
    """The page without its form inputs and links' queries, which keep the value as stored."""
    page = re.sub(r"<input[^>]*>", "", page)
    return re.sub(r'href="[^"]*"', "", page)


def _assert_written_out(part: str) -> None:
    assert RLO not in _drawn(part) and ZWSP not in _drawn(part), part[:800]
    assert SHOWN in part, part[:800]


def test_a_foreign_keys_list_cell_writes_out_the_related_name(superuser: User) -> None:
    """Found: the agents list's "tenant" column drew the tenant's slug with the bidi override and zero-width space
    as written (``items_for_result`` formats the related row with ``str()``). Expect: written out."""
    tenant = Tenant.objects.create(slug=NAME, name="Reporting")
    Agent.objects.create(name="plain-agent", tenant=tenant)

    page = console(superuser).get("/admin/agents_app/agent/").content.decode()

    cell = re.search(r'<td class="field-tenant[^"]*">(.*?)</td>', page, re.S)
    assert cell, page[:800]
    _assert_written_out(cell.group(1))
    _assert_written_out(page)


def test_a_forms_select_options_write_out_the_related_names(superuser: User) -> None:
    """Found: a grant's add page offered the tool group and the tenant as options labelled with the controls as
    written. Expect: the labels written out; each option's value stays the row's key."""
    group = ToolGroup.objects.create(name=NAME)
    tenant = Tenant.objects.create(slug=NAME, name="Reporting")

    page = console(superuser).get("/admin/toolhub/grant/add/").content.decode()

    _assert_written_out(page)
    assert f'<option value="{group.pk}">{SHOWN}</option>' in page
    assert f'<option value="{tenant.pk}">{SHOWN}</option>' in page


def test_list_filter_choices_write_out_the_related_names(superuser: User) -> None:
    """Found: the grants list's tool group and tenant filters and the audit console's tenant filter drew the names
    as written (``admin/filter.html``). Expect: written out; the link still filters on the stored value."""
    tenant = Tenant.objects.create(slug=NAME, name="Reporting")
    Grant.objects.create(tool_group=ToolGroup.objects.create(name=NAME), tenant=tenant)  # filters offer found values
    client = console(superuser)

    for url in ("/admin/toolhub/grant/", "/admin/toolhub/auditevent/"):
        page = client.get(url).content.decode()
        filters = re.search(r'<nav id="changelist-filter"[^>]*>(.*)</nav>', page, re.S)
        assert filters, page[:800]
        _assert_written_out(filters.group(1))
        assert filters.group(1).count(SHOWN) == (2 if "grant" in url else 1)
        _assert_written_out(page)


def test_a_popups_response_writes_out_the_name_it_hands_the_opener(superuser: User) -> None:
    """Found: saving a tenant in a popup (the "change" link beside a select) answered the opener with the tenant's
    slug as written (``popup_response_data``'s ``obj``), which its select then shows. Expect: written out; the
    ``value`` stays the key."""
    tenant = Tenant.objects.create(slug=NAME, name="Reporting")
    client = console(superuser)
    url = f"/admin/toolhub/tenant/{tenant.pk}/change/?_popup=1"
    form = client.get(url).context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None}
    data.update({"name": "Reporting 2", "_popup": "1", "_save": "Save"})

    page = client.post(url, data).content.decode()

    found = re.search(r'data-popup-response="([^"]*)"', page)
    assert found, page[:800]
    response = json.loads(html_lib.unescape(found.group(1)))
    assert response["obj"] == SHOWN and response["value"] == str(tenant.pk)
    tenant.refresh_from_db()
    assert (tenant.slug, tenant.name) == (NAME, "Reporting 2")


def test_the_list_checkbox_aria_label_writes_out_the_name(superuser: User) -> None:
    """Found: each list row's checkbox was labelled "Select this object for an action - …" with the name as
    written, read aloud as another one. Expect: written out; the checkbox's value stays the row's key."""
    agent = Agent.objects.create(name=NAME)

    page = console(superuser).get("/admin/agents_app/agent/").content.decode()

    checkbox = re.search(r'<input type="checkbox" name="_selected_action"[^>]*>', page)
    assert checkbox, page[:800]
    assert f'aria-label="Select this object for an action - {SHOWN}"' in checkbox.group(0)
    assert f'value="{agent.pk}"' in checkbox.group(0)
    assert RLO not in checkbox.group(0) and ZWSP not in checkbox.group(0)


def test_a_read_only_foreign_key_writes_out_the_related_name(superuser: User) -> None:
    """Found: an agent's change page drew its read-only "created by" (a link to the user) with the user's name as
    written (``AdminReadonlyField.get_admin_url`` formats the related row with ``str()``). Expect: written out."""
    author = User.objects.create_user(NAME)
    agent = Agent.objects.create(name="plain-agent", created_by=author)

    page = console(superuser).get(f"/admin/agents_app/agent/{agent.pk}/change/").content.decode()

    field = re.search(r'<div class="readonly">(<a href="[^"]*">[^<]*</a>)</div>', page)
    assert field, page[:800]
    _assert_written_out(field.group(1))
    author.refresh_from_db()
    assert author.username == NAME


def test_a_read_only_computed_field_writes_out_the_names_it_lists(superuser: User) -> None:
    """Found: a tool group's read-only "Members from the code" (a method's text, not a model field: Django draws it
    with ``linebreaksbr``, not ``display_for_value``) drew a tool's name with the controls as written. Expect:
    written out; the tool's name stays as stored."""
    group = ToolGroup.objects.create(name="reports")
    tool = ToolDefinition.objects.create(name=NAME, group="reports")

    page = console(superuser).get(f"/admin/toolhub/toolgroup/{group.pk}/change/").content.decode()

    field = re.search(r'<div class="form-row field-code_members">(.*?)</div>\s*</div>', page, re.S)
    assert field, page[:800]
    _assert_written_out(field.group(1))
    tool.refresh_from_db()
    assert tool.name == NAME


def test_a_raw_id_boxs_label_writes_out_the_related_name(superuser: User) -> None:
    """Found: a tenant membership's change page named its user beside the raw id box (``ForeignKeyRawIdWidget``'s
    label, ``str(row)``) with the controls as written. Expect: written out; the box keeps the user's key."""
    member = User.objects.create_user(NAME)
    membership = TenantMembership.objects.create(user=member, tenant=Tenant.objects.create(slug="reports", name="R"))

    page = console(superuser).get(f"/admin/toolhub/tenantmembership/{membership.pk}/change/").content.decode()

    label = re.search(r'(<input type="text" name="user" value="[^"]*"[^>]*>.*?</strong>)', page, re.S)
    assert label, page[:800]
    assert f'value="{member.pk}"' in label.group(1)
    _assert_written_out(label.group(1))
