"""Review 2026-12-07 (zb): this morning's small fixes: review t's checked JSON form fields (``toolhub.admin_json``) and
``storable_text(within=)``, review x's account tables (``toolhub.account_tables``, ``toolhub.E008``) and review q's
insert trigger (``toolhub.api.token_binding``).

Each finding's test fails on the code as found (main at 856166f) and says what was found and what is expected.

Findings:

1. (PostgreSQL) A tool's artifact named with a NUL (``ToolResult.artifact(data, name="report\\x00.csv")``: a name taken
   from a remote system, an archive's member) never had its outcome recorded: ``outcomes._artifact_of`` kept the name
   (and the media type) as the tool gave them, scrubbed of secrets but never made storable, and PostgreSQL refused the
   ``ToolCallArtifact`` row ("text fields cannot contain NUL", in ``execution._finish``): in eager mode the request
   raised, on a worker the call stayed ``running`` until its lease ran out; a NUL in the media type (written unquoted
   into the summary the model reads) failed the call "cannot be serialized to JSON". A name
   ``ToolResult(kind="artifact", ...)`` built by hand is not cut to the column's 200 characters either, and a secret's
   marker (``[secret]``) may lengthen it past them. Both are now ``storable_text(..., within=<the column's
   max_length>)``, the length read from ``ToolCallArtifact``'s fields: escaped, then cut to the column.
   ``test_an_artifact_named_with_a_nul_is_stored``.
2. (PostgreSQL) The governance stamp's triggers wrote the columns of ``UPDATE OF`` unquoted
   (``account_governance_tables`` names the user model's ``is_superuser``/``is_active`` columns, ``db_column``
   included): PostgreSQL folds an unquoted name to lower case, so a user model whose flag sits in a column such as
   ``IsActive`` (a legacy table) made ``governance_triggers_install`` raise ("column isactive ... does not exist"):
   ``migrate`` stopped in its ``post_migrate`` and no account table was watched. ``governance_triggers_install``
   now quotes each column of an ``UPDATE OF`` event with the connection's ``quote_name`` (any app's
   ``governance_watch`` events too). ``test_a_user_models_flag_in_a_mixed_case_column_is_watched``.
3. A dump listing a key's binding before its token (``dumpdata toolhub.apitokenbinding authtoken.token``, the
   labels in that order, or two fixture files loaded so) restored the key: ``loaddata`` wrote the ended binding
   (``!deactivated``, or the fingerprint of a password a reset by ``update`` replaced), then the token's raw save
   (``token_binding._token_saved``, ``created``) bound it afresh to the account's password as stored, over the one
   just loaded, and the key answered 200 again. A token loaded (``raw``) now keeps a binding already there
   (``ignore_conflicts``); one loaded with none is bound afresh as before.
   ``test_a_dump_listing_the_binding_first_loads_the_key_ended``.

Checked and holding:

- Every registered admin (the console's and the apps') mixes ``CheckedJSONFields`` in; every JSON column a form of
  it edits (the change form, the changelist's ``list_editable`` form, and each inline's formset) is a
  ``CheckedJSONFormField``; the inlines with JSON columns (sagas' compensations, approval decisions) are read-only
  and their formsets carry no JSON field (``test_holding_every_admin_forms_json_field_is_checked``). No console
  form declares ``forms.JSONField`` itself (grep); the admin actions' intermediate forms (comment, cancel-runs,
  accept-offered) hold no JSON field; the approval desk's edit (``approvals.forms.ApproveForm``) reads its JSON box
  through ``parse_arguments`` and its generated JSON fields through ``json_loads_checked`` (``MAX_NESTING - 1``,
  storable), its enum fields only among their choices. A refused value is shown back as posted
  (``InvalidJSONInput``), escaped by the widget's template (``</textarea><script>`` in refused text and in a valid
  value the form refuses: ``test_holding_a_refused_json_value_is_shown_back_escaped``) and bounded by
  ``DATA_UPLOAD_MAX_MEMORY_SIZE``; a NUL in any posted field is refused before any view
  (``StorableAddressMiddleware``, review t).
- ``storable_text``'s other callers cut after escaping (``waiting``, ``call_arguments``, ``mcp_client.services``,
  ``subagents``, webhooks), or cut before escaping into JSON with no column length (progress messages,
  ``builtins.refusals``'s ``repr``, which escapes NUL and surrogates itself), or into a ``TextField`` (the
  pipeline's ``_raw_text``). An agent's name, a reason or comment and a tenant's slug come from forms and
  serializers whose ``CharField``/``SlugField`` refuse NUL; a remote MCP tool's name and definition are stored
  through ``storable_value``; a remote name that does not fit the local name is given no local name.
- Review q's insert trigger (and review a's update trigger) on both databases: a whole ``dumpdata`` lists
  ``authtoken`` before ``toolhub`` (``INSTALLED_APPS``), so the token loads first and its binding over it. The suite's
  flush on PostgreSQL runs under ``session_replication_role = replica``
  (no trigger fires while tables are emptied) and a flush emits ``post_migrate``, which installs the binding
  triggers again on both databases (``_install_binding_triggers``).
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django import forms
from django.contrib import admin
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import Group, Permission, User
from django.core import serializers
from django.core.management import call_command
from django.db import connection, models
from django.test import RequestFactory
from django.test.utils import isolate_apps
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agents_app.models import Agent
from tests.helpers import console, principal_for
from tests.security_review.test_review_2026_12_07_t import _form
from toolhub import tool
from toolhub.admin_json import CheckedJSONFields, CheckedJSONFormField
from toolhub.api.keys import api_key_issue
from toolhub.governance import governance_triggers_install
from toolhub.models import ApiTokenBinding, CallStatus, Tenant, ToolCall, ToolCallArtifact
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.storable import storable_text
from toolhub.tools.context import ToolContext
from toolhub.tools.registry import registry
from toolhub.tools.results import ToolResult

pytestmark = pytest.mark.django_db


# --- 1. an artifact's name or media type holding a NUL -------------------------------------------------------------

#: A name of the column's length ending in a NUL, and one built by hand past the column.
ARTIFACT_NAMES = {"report": "r" * 199 + "\x00", "by_hand": "n" * 240 + "\x00.csv"}


@tool(risk="low")
def zb_export(which: str) -> Any:
    """An export named as a remote system named it."""
    name = ARTIFACT_NAMES[which]
    if which == "by_hand":
        return ToolResult(kind="artifact", value=b"rows", name=name, media_type="text/csv\x00", summary="")
    return ToolResult.artifact(b"rows", name=name, media_type="text/csv")


@pytest.mark.postgres
@pytest.mark.parametrize("which", sorted(ARTIFACT_NAMES))
def test_an_artifact_named_with_a_nul_is_stored(
    alice: User, which: str, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: an artifact whose name (or media type) held a NUL was written as the tool gave it: PostgreSQL refused
    the row, so the call's outcome was never recorded (the request raised ``DataError``; on a worker the call stayed
    running); a name built by hand was not cut to the column.
    Expect: the call succeeds with its artifact stored, the name and media type escaped and cut to their columns."""
    with registry.temporarily(zb_export), django_capture_on_commit_callbacks(execute=True):
        call = tool_call_request(
            request=CallRequest(
                tool_name="zb_export",
                arguments={"which": which},
                principal=principal_for(alice, tenant="acme"),
                context=ToolContext(tenant="acme"),
            )
        )
    row = ToolCall.objects.get(pk=call.pk)
    assert row.status == CallStatus.SUCCEEDED, (row.status, row.error)
    artifact = ToolCallArtifact.objects.get(call=row)
    assert artifact.name == storable_text(ARTIFACT_NAMES[which], within=200)
    assert "\x00" not in artifact.name + artifact.media_type and len(artifact.name) <= 200
    assert artifact.media_type.startswith("text/csv") and bytes(artifact.content) == b"rows"


# --- 2. a user model's flag in a column PostgreSQL does not read unquoted -----------------------------------------


@pytest.fixture
def legacy_account() -> Iterator[type[models.Model]]:
    """A project's own user model over a legacy table whose flags' columns are in mixed case."""
    with isolate_apps("tests.security_review"):

        class LegacyAccount(AbstractBaseUser):
            email = models.EmailField(unique=True)
            is_active = models.BooleanField(default=True, db_column="IsActive")
            is_superuser = models.BooleanField(default=False, db_column="IsSuperuser")
            groups = models.ManyToManyField(Group, related_name="+")
            user_permissions = models.ManyToManyField(Permission, related_name="+")
            USERNAME_FIELD = "email"

            class Meta:
                app_label = "security_review"
                db_table = "review_zb_account"

        yield LegacyAccount


def _rest_status(key: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return int(client.get("/api/v1/calls/").status_code)


def _stamp() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT stamp FROM toolhub_governanceversion WHERE id = 1")
        return int(cursor.fetchone()[0])


@pytest.mark.postgres
def test_a_user_models_flag_in_a_mixed_case_column_is_watched(
    legacy_account: type[models.Model], monkeypatch: Any
) -> None:
    """Found: ``UPDATE OF IsSuperuser, IsActive`` was written unquoted: PostgreSQL read ``isactive``, which is not a
    column, so installing the triggers raised (``migrate`` stopped after its migrations) and nothing was watched.
    Expect: the triggers install on the user model's table; a deactivation and a lost superuser bit written in SQL
    stamp a new governance version, a login's ``last_login`` does not."""
    monkeypatch.setattr("django.contrib.auth.get_user_model", lambda: legacy_account)
    with connection.schema_editor() as editor:  # rolled back with the test (PostgreSQL DDL is transactional)
        editor.create_model(legacy_account)
    assert "review_zb_account" in governance_triggers_install(connection)

    moved = []
    with connection.cursor() as cursor:
        cursor.execute(
            'INSERT INTO review_zb_account (id, password, email, "IsActive", "IsSuperuser") '
            "VALUES (9101, '', 'a@zb', true, true)"
        )
        for sql in (
            'UPDATE review_zb_account SET "IsActive" = false WHERE id = 9101',
            'UPDATE review_zb_account SET "IsSuperuser" = false WHERE id = 9101',
        ):
            before = _stamp()
            cursor.execute(sql)
            moved.append(_stamp() != before)
        before = _stamp()
        cursor.execute("UPDATE review_zb_account SET last_login = now() WHERE id = 9101")
    assert moved == [True, True]
    assert _stamp() == before


# --- holding: every JSON field of every admin form is checked ----------------------------------------------------


def _json_fields(form_class: Any) -> dict[str, forms.Field]:
    return {name: field for name, field in form_class.base_fields.items() if isinstance(field, forms.JSONField)}


def test_holding_every_admin_forms_json_field_is_checked(admin_user: User) -> None:
    """Found: nothing (holding): review t's field reaches every JSON column a console form edits.
    Expect: every registered admin mixes ``CheckedJSONFields`` in; its change form's, its changelist form's and each
    editable inline's JSON fields are all ``CheckedJSONFormField``; the editable JSON columns cover the ones review t
    names."""
    request = RequestFactory().get("/")
    request.user = admin_user
    seen: set[str] = set()
    for model, model_admin in admin.site._registry.items():
        assert isinstance(model_admin, CheckedJSONFields), model._meta.label
        forms_ = [model_admin.get_form(request)]
        if model_admin.list_editable:
            forms_.append(model_admin.get_changelist_form(request))
        for inline in model_admin.get_inline_instances(request):
            forms_.append(inline.get_formset(request).form)
        for form in forms_:
            for name, field in _json_fields(form).items():
                assert isinstance(field, CheckedJSONFormField), (model._meta.label, form, name)
                if not field.disabled:
                    seen.add(f"{model._meta.label}.{name}")
    assert {
        "agents_app.Agent.script",
        "agents_app.Agent.tools",
        "approvals.ApprovalRule.value",
        "toolhub.ToolGroup.extra_tools",
        "toolhub.RemoteMcpServer.select_names",
    } <= seen


def test_holding_a_refused_json_value_is_shown_back_escaped(globex_developer: User, other_tenant: Tenant) -> None:
    """Found: nothing (holding): a refused JSON value is shown back as posted, inside the page's textarea.
    Expect: the form again (200) with the refusal at its field; markup in the value (a ``</textarea>`` closing the
    box, a script) is escaped, never written raw; refused text and a valid value refused by the form's own check
    alike; no agent saved."""
    client = console(globex_developer)
    url = "/admin/agents_app/agent/add/"
    posted = {**_form(client, url), "name": "zb-agent", "tenant": str(other_tenant.pk), "tools": "[]", "script": "[]"}
    markup = "</textarea><script>alert(1)</script>"
    for field, text in (
        ("script", '[{"content": "' + markup + '", "n": ' + "9" * 5000 + "}]"),
        ("script", "[" * 3000 + '"' + markup + '"' + "]" * 3000),
        ("tools", json.dumps([markup])),
    ):
        answer = client.post(url, {**posted, field: text, "_save": "Save"})
        assert answer.status_code == 200, (field, answer.status_code)
        assert field in answer.context["adminform"].form.errors
        page = answer.content.decode()
        assert markup not in page and "&lt;/textarea&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert not Agent.objects.exists()


# --- 3. a dump listing a token's binding before the token -------------------------------------------------------


@pytest.mark.parametrize("ended_by", ["deactivation", "password reset"])
def test_a_dump_listing_the_binding_first_loads_the_key_ended(alice: User, tmp_path: Path, ended_by: str) -> None:
    """Found: ``dumpdata toolhub.apitokenbinding authtoken.token`` (the labels in that order) writes a key's binding
    before its token; ``loaddata`` wrote the ended binding, then the token's save (``_token_saved``) bound it afresh
    to the account's password as stored, over the binding just loaded: a key ended by a deactivation (reactivated by
    ``update``) or by a password reset written by ``update`` answered 200 again after the restore.
    Expect: the binding loaded with the token is kept whatever the order: the key stays refused (401)."""
    key = api_key_issue(alice)
    if ended_by == "deactivation":
        User.objects.filter(pk=alice.pk).update(is_active=False)
        User.objects.filter(pk=alice.pk).update(is_active=True)
    else:
        User.objects.filter(pk=alice.pk).update(password=make_password("reset-by-the-incident-team"))
    assert _rest_status(key) == 401
    token = Token.objects.get(user=alice)
    dump = tmp_path / "tokens.json"
    dump.write_text(serializers.serialize("json", [*ApiTokenBinding.objects.filter(token=token), token]))
    Token.objects.filter(user=alice).delete()
    call_command("loaddata", str(dump), verbosity=0)
    assert _rest_status(key) == 401
