"""Review of 2026-12-05 (bx): identifiers used for authorization and display, spelled two ways.

Each test fails on the reviewed code (main at 1a7a2e2) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A remote MCP server listing ``Lookup_Customer`` or ``lookup-customer`` beside ``lookup_customer`` got a local
   tool for each (``crm__Lookup_Customer``, ``crm__lookup-customer``): names the startup check ``toolhub.E003``
   refuses for code tools because models (and operators accepting them) confuse them. ``_free_local_name``
   compared exact names only. Fixed: one ``confusable_key`` (``toolhub.tools.definition_rules``) is what the
   check and the remote fetch both compare; a remote tool confusable with a registered or fetched one is skipped.
2. A remote MCP server named like a tool group it does not own (a code group such as ``orders``) joined that
   group: ``_ensure_group`` took the existing row, so every allow grant, approver restriction and capability of
   ``orders`` covered the server's tools once accepted, without anyone granting them. Fixed: the server's name
   is refused (``RemoteMcpServer.clean``) and its fetch refused (``remote_server_sync``) while a group of that
   name belongs to something else (``toolhub.mcp_client.definitions.server_name_problem``).
3. A saga id ``.`` or ``..`` was accepted (201), but HTTP clients remove dot segments from a path (RFC 3986:
   httpx, urllib3, browsers), so ``/api/v1/sagas/../`` never reached the saga. Fixed in ``saga_id_problem``,
   the one check every door that names a saga asks (``/`` was refused there before).
4. A tenant ``ACME`` was saved beside ``acme`` (and a retired ``globex-old`` came back as ``GLOBEX-OLD``): slugs
   that read alike on the desk, in the trail and the exports, and on a case-insensitive disk one workspace
   directory. Fixed in ``Tenant._refuse_another_identity`` (form and save, ``iexact``: ``UPPER()`` on
   PostgreSQL, ``LIKE`` on SQLite; slugs are ASCII), tested on both backends.

Checked and found holding (no test here): tool names (code, ``NAME_PATTERN``: ASCII letter first, ASCII letters,
digits, ``_``/``-``, 64 at most), tool group, agent, tenant and remote server names are ``SlugField`` (ASCII, no
spaces, so no NFC/NFD, full-width, homoglyph, zero-width or bidi spellings) and every lookup of them is an exact
``=`` or ``__in``, case-sensitive and binary alike on SQLite and PostgreSQL (no ``__startswith``/``__contains``
on an identifier but the sweeper's ``worker:`` actor prefix, which no username can hold: ``:`` is not a username
character); grants, approval rules and ``ArgumentPolicy`` match tool names with ``==``/``fnmatchcase``; a model's
unknown, 10,000-character or invisible-character tool name is refused as unknown and stored cut to the column
(``storable_text(name[:200])``), its call id cut to 100; idempotency keys are stripped and bounded (255), saga ids
bounded (100) and refused with ``/``; request bodies with NUL or lone surrogates are refused by the JSON parser.
Not fixed (reported by earlier reviews, not repeated): ``Grant.agent_name`` is free text.
"""

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from tests.mcpclient.fake_server import FakeCrm, serving
from tests.security_review.conftest import client_for
from toolhub.exceptions import ToolError
from toolhub.mcp_client.models import RemoteMcpServer, RemoteMcpTool
from toolhub.mcp_client.services import remote_server_sync
from toolhub.models import Tenant, ToolGroup
from toolhub.sagas.models import Saga


@pytest.fixture
def crm() -> Iterator[tuple[FakeCrm, str]]:
    fake = FakeCrm()
    with serving(fake) as url:
        yield fake, url


def _server(url: str, name: str = "crm") -> RemoteMcpServer:
    return RemoteMcpServer.objects.create(name=name, url=url, risk="low", select_regex=".*")


@pytest.mark.django_db
def test_remote_tools_differing_only_in_case_or_separator_get_no_local_name(
    crm: tuple[FakeCrm, str], tenant: Tenant
) -> None:
    """Found: a server listing ``Lookup_Customer`` and ``lookup-customer`` beside ``lookup_customer`` got three local
    tools that differ only in case or ``-``/``_`` (what ``toolhub.E003`` refuses for code tools).
    Expect: only the first keeps a local name; the confusable twins are skipped."""
    crm[0].extra_tools = [
        {"name": "Lookup_Customer", "description": "A twin.", "inputSchema": {"type": "object"}},
        {"name": "lookup-customer", "description": "Another.", "inputSchema": {"type": "object"}},
    ]
    counts = remote_server_sync(server=_server(crm[1]), actor="operator:operator")

    assert counts["skipped"] == 2
    assert set(RemoteMcpTool.objects.values_list("tool_name", flat=True)) == {
        "crm__lookup_customer",
        "crm__delete_everything",
    }


@pytest.mark.django_db
def test_a_remote_server_cannot_take_the_name_of_a_code_tool_group(crm: tuple[FakeCrm, str], tenant: Tenant) -> None:
    """Found: a remote server named ``orders`` (the demo's code group) joined that group: its tools were covered
    by every grant of ``orders``.
    Expect: the name is refused by the model's check and the fetch records no tool in that group."""
    server = RemoteMcpServer(name="orders", url=crm[1], risk="low", select_regex=".*")
    with pytest.raises(ValidationError) as refused:
        server.full_clean()
    assert "name" in refused.value.message_dict

    server.save()  # saved by some other door (a shell, a fixture)
    with pytest.raises(ToolError, match="orders"):
        remote_server_sync(server=server, actor="operator:operator")
    assert not RemoteMcpTool.objects.exists()


@pytest.mark.django_db
def test_a_remote_server_keeps_its_own_group(crm: tuple[FakeCrm, str], tenant: Tenant) -> None:
    """Found: (guard for the fix above) a server's own group, made by its first fetch, must not block the next.
    Expect: the second fetch and the model's check accept the group the server made."""
    server = _server(crm[1])
    remote_server_sync(server=server, actor="operator:operator")
    server.full_clean()
    remote_server_sync(server=server, actor="operator:operator")
    assert ToolGroup.objects.get(name="crm").provider == "mcp:crm"


@pytest.mark.parametrize("saga_id", [".", ".."])
def test_a_saga_id_that_is_a_dot_segment_is_refused(saga_id: str, alice: User) -> None:
    """Found: ``POST /api/v1/sagas/ {"saga_id": ".."}`` answered 201, but HTTP clients remove dot segments from a
    path before sending it (RFC 3986 5.2.4: httpx, urllib3, browsers): ``/api/v1/sagas/../`` goes out as
    ``/api/v1/``, so the saga's owner could never read it nor roll it back, as with the ``/`` refused before.
    Expect: 400, no saga opened."""
    assert httpx.URL(f"http://toolhub.test/api/v1/sagas/{quote(saga_id, safe='')}/").path != f"/api/v1/sagas/{saga_id}/"
    answer = client_for(alice).post("/api/v1/sagas/", {"saga_id": saga_id}, format="json")
    assert answer.status_code == 400, answer.content
    assert not Saga.objects.filter(key=saga_id).exists()


@pytest.mark.django_db
def test_a_tenant_slug_differing_only_in_case_from_another_is_refused(tenant: Tenant) -> None:
    """Found: beside tenant ``acme``, a tenant ``ACME`` passed ``full_clean`` and was saved: two tenants that read
    alike on the desk, in the audit trail and the exports, and whose built-in workspaces
    (``WORKSPACE_ROOT/<slug>``) are one directory on a case-insensitive volume (macOS, Windows, their bind mounts).
    Expect: a slug equal to another tenant's or a retired one's but for case is refused, by the form and on save."""
    twin = Tenant(slug="ACME", name="Acme again")
    with pytest.raises(ValidationError) as refused:
        twin.full_clean()
    assert "slug" in refused.value.message_dict
    with pytest.raises(ValidationError):
        twin.save()
    assert list(Tenant.objects.filter(slug__iexact="acme").values_list("slug", flat=True)) == ["acme"]


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_tenant_slug_differing_only_in_case_is_refused_on_postgresql_too(tenant: Tenant) -> None:
    """Found: (as above, on PostgreSQL, whose ``iexact`` is ``UPPER() = UPPER()`` where SQLite's is ``LIKE``)
    ``Acme`` was saved beside ``acme``, and a retired slug came back as ``GLOBEX``.
    Expect: both refused on save; the retired check compares case-insensitively too."""
    with pytest.raises(ValidationError):
        Tenant(slug="Acme", name="Acme again").save()
    Tenant.objects.create(slug="globex-old", name="Globex").delete()
    with pytest.raises(ValidationError):
        Tenant(slug="GLOBEX-OLD", name="Globex again").save()
    assert not Tenant.objects.filter(slug__in=["Acme", "GLOBEX-OLD"]).exists()
