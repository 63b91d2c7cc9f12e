"""The MCP server, swept by construction: nothing of acme reaches globex's people, the tenantless or the deactivated.

The surface comes from the server itself, not from a list: the capabilities it declares at ``initialize`` and the
tools it lists to a user granted nothing that are no code tool (its own: status, cancel, find, describe). Each
capability and each of the server's own tools must have a probe here (``CAPABILITY_PROBES``, ``STABLE_PROBES``), or
the sweep fails naming it. acme holds calls (held, awaiting an external result, done, with an artifact), a code tool
granted to acme through a tool group, one granted to acme by name and an accepted remote MCP tool (credential and
grant for acme only). Over the official SDK client against the live ASGI app, globex's member, operator and
auditor, a user with no tenant and alice after leaving acme list, find (near-miss queries too), describe and call
every acme tool, and status and cancel every acme call: nothing of acme shows, every answer for acme's name or id
is the answer for a missing one, nothing changes. The refused calls they made of acme's tools answer every server
tool taking a ``call_id`` (read from the listed schemas) as their calls of missing tools do (staff read the true
refusal, by design). A deactivated member of acme is refused (401) before any method. The platform user (no
tenant, ``toolhub.cross_tenant``) sees calls of every tenant by design, so for them the catalogue alone is swept:
acme's grants are not theirs without naming acme. ``X-Toolhub-Tenant`` naming acme, acme twice, acme with globex
and a retired tenant answer as a missing tenant does; ``_meta`` naming a tenant, user, run or idempotency key
never moves a call into acme.
"""

import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.mcp.conftest import live_asgi, token, with_client  # noqa: F401 - fixtures
from tests.security_review.test_probe_2026_12_03_g import EvilServer, accept_offered, evil  # noqa: F401
from tests.tenancy.conftest import AcmeData, make_user
from toolhub.mcp_client.models import RemoteMcpServer
from toolhub.models import Grant, GrantEffect, Tenant, TenantMembership, ToolCall, ToolGroup
from toolhub.tenancy import has_tenant_wide_role
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

GROUP_TOOL = "acme_payroll_export"
NAMED_TOOL = "acme_vault_open"
REMOTE_TOOL = "probeg__lookup"
ACME_TOOLS = (GROUP_TOOL, NAMED_TOOL, REMOTE_TOOL)
#: A tool globex is granted (so ``_meta`` reaches a made call).
OPEN_TOOL = "sweep_echo"
MISSING_ID = "00000000-0000-4000-8000-000000000000"
#: Queries a searcher might try to surface acme's tools: words, near-misses, prefixes.
QUERIES = (
    "payroll",
    "export payroll",
    "acme payroll export",
    "acme_payroll_exprot",
    "vault",
    "open the vault",
    "acme_vault_opne",
    "lookup",
    "probeg",
    "probeg__lookpu",
    "acme",
    "customer lookup",
    "export",
)
NEAR_MISSES = ("acme_payroll_exprot", "acme_payrol_export", "acme_vault_opne", "probeg__lookpu", "probeg_lookup")
ACCEPT = "application/json, text/event-stream"
#: Spellings of a name a lenient lookup might still resolve (each compared with the same spelling of a missing name).
SPELLINGS: tuple[Callable[[str], str], ...] = (
    lambda name: name,
    str.upper,
    lambda name: f" {name} ",
    lambda name: name.replace("_", "-"),
    lambda name: f"{name}\u200b",
)
#: Arguments that a check running before authorization (validation, tenant arguments, size) might answer differently.
ARGUMENTS: tuple[dict[str, Any], ...] = (
    {"who": "w"},
    {},
    {"who": 5},
    {"bogus": 1},
    {"tenant": "acme"},
    {"who": "w" * 70_000},
)


def _tools() -> list[Tool]:
    schema = {"type": "object", "properties": {"who": {"type": "string"}}}
    return [
        Tool.create(GROUP_TOOL, "Export acme's payroll for one employee.", schema, lambda arguments: "payroll"),
        Tool.create(NAMED_TOOL, "Open acme's secret vault.", schema, lambda arguments: "vault"),
        Tool.create(OPEN_TOOL, "Echo a word back.", schema, lambda arguments: "echo"),
    ]


@pytest.fixture
def world(
    settings: Any,
    acme: AcmeData,
    tenant: Tenant,
    evil: tuple[EvilServer, RemoteMcpServer],  # noqa: F811
) -> Iterator[AcmeData]:
    """acme's calls, and three tools only acme may use (default access: deny)."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    accept_offered(evil[1])
    with registry.temporarily(*_tools()):
        group = ToolGroup.objects.create(name="acme-finance", extra_tools=[GROUP_TOOL])
        Grant.objects.create(tool_group=group, tenant=tenant, effect=GrantEffect.ALLOW)
        Grant.objects.create(tool_name=NAMED_TOOL, tenant=tenant, effect=GrantEffect.ALLOW)
        Grant.objects.create(tool_name=REMOTE_TOOL, tenant=tenant, effect=GrantEffect.ALLOW)
        yield acme


def acme_call_ids(acme: AcmeData) -> list[str]:
    ids = {str(pk) for pk in ToolCall.objects.filter(tenant="acme").values_list("id", flat=True)}
    assert str(acme.external_call.id) in ids and str(acme.approval.call_id) in ids
    return sorted(ids)


def markers(acme: AcmeData) -> list[str]:
    """What must never reach a caller outside acme: acme's tool names, call ids, user and tenant."""
    return [*ACME_TOOLS, *acme_call_ids(acme), "alice", "acme"]


def dump(answer: Any) -> str:
    if isinstance(answer, MCPError):
        return f"MCPError {answer.code}: {answer}"
    return json.dumps(answer.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True)


async def ask(coro: Awaitable[Any]) -> Any:
    try:
        return await coro
    except MCPError as refused:
        return refused


def _swap(text: str, name: str) -> str:
    """``text`` with the name the caller sent (as sent, and as a message or JSON may escape it) replaced by X."""
    core = name.strip().replace("\u200b", "")
    return text.replace(name, "X").replace(core, "X")


# --- probes of the server's own tools: (acme's arguments, the same for something missing, the value swapped) ---


def _by_call_id(extra: dict[str, Any]) -> Callable[[AcmeData], list[tuple[dict[str, Any], dict[str, Any], str]]]:
    def probe(acme: AcmeData) -> list[tuple[dict[str, Any], dict[str, Any], str]]:
        return [({"call_id": pk, **extra}, {"call_id": MISSING_ID, **extra}, pk) for pk in acme_call_ids(acme)]

    return probe


def _by_name(acme: AcmeData) -> list[tuple[dict[str, Any], dict[str, Any], str]]:
    return [({"name": name}, {"name": name[:-1] + "Q"}, name) for name in ACME_TOOLS]


STABLE_PROBES: dict[str, Callable[[AcmeData], list[tuple[dict[str, Any], dict[str, Any], str]]]] = {
    "toolhub_call_status": _by_call_id({"wait": 0}),
    "toolhub_cancel_call": _by_call_id({"reason": "sweep"}),
    "toolhub_describe_tool": _by_name,
    "toolhub_find_tools": lambda acme: [],  # searched with QUERIES below: no acme value to swap
}


async def _no_listing(client: Client) -> list[Any]:
    return []


async def _resources(client: Client) -> list[Any]:
    return [await ask(client.list_resources()), await ask(client.list_resource_templates())]


async def _prompts(client: Client) -> list[Any]:
    return [await ask(client.list_prompts())]


#: Each capability the server may declare, and what it lists to the caller (swept for acme's markers).
CAPABILITY_PROBES: dict[str, Callable[[Client], Awaitable[list[Any]]]] = {
    "tools": _no_listing,  # swept tool by tool below
    "resources": _resources,
    "prompts": _prompts,
    "completions": _no_listing,  # nothing to complete without prompts or resource templates
    "logging": _no_listing,
    "experimental": _no_listing,
    "extensions": _no_listing,
}


def server_surface(base: str, user: User) -> tuple[list[str], list[str]]:
    """The capabilities the server declares and its own tools: what it lists to someone granted nothing (default
    access is deny) that is no code tool."""
    code = {tool.name for tool in registry.code_tools()}

    async def body(client: Client) -> tuple[list[str], list[str]]:
        declared = client.server_capabilities.model_dump(exclude_none=True)
        listed = (await client.list_tools()).tools
        return sorted(declared), sorted(tool.name for tool in listed if tool.name not in code)

    surface: tuple[list[str], list[str]] = with_client(base, token(user), body)
    return surface


def sweep_person(base: str, user: User, acme: AcmeData, *, calls_too: bool) -> list[str]:
    """Everything ``user`` gets from the server that names acme; ``calls_too``: also acme's calls by id."""
    capabilities, own_tools = server_surface_cache[base]
    leaks: list[str] = []
    found_markers = [*ACME_TOOLS] if not calls_too else markers(acme)
    skipped = () if calls_too else ("toolhub_call_status", "toolhub_cancel_call")
    probes = {name: STABLE_PROBES[name](acme) for name in own_tools if name not in skipped}

    def check(what: str, answer: Any, sent: tuple[str, ...] = ()) -> None:
        text = dump(answer)
        for value in sent:
            text = text.replace(value, "SENT")
        leaks.extend(f"{what}: {marker!r} in {text[:300]}" for marker in found_markers if marker in text)

    by_call_id: list[str] = []

    async def body(client: Client) -> None:
        listing = await client.list_tools()
        check("tools/list", listing)
        by_call_id.extend(t.name for t in listing.tools if t.name in own_tools and "call_id" in str(t.input_schema))
        for capability in capabilities:
            for listing in await CAPABILITY_PROBES[capability](client):
                check(capability, listing)
        for name, cases in probes.items():
            for theirs_args, missing_args, value in cases:
                theirs = dump(await ask(client.call_tool(name, theirs_args)))
                missing = dump(await ask(client.call_tool(name, missing_args)))
                if theirs.replace(value, "X") != missing.replace(
                    missing_args.get("call_id") or missing_args["name"], "X"
                ):
                    leaks.append(f"{name}({theirs_args}) answers {theirs[:300]} but for a missing one {missing[:300]}")
        for query in QUERIES:
            check(
                f"find {query!r}",
                await ask(client.call_tool("toolhub_find_tools", {"query": query, "max_results": 10})),
                (query,),
            )
        for tool_name in ACME_TOOLS:
            for spell in SPELLINGS:
                name, missing_name = spell(tool_name), spell(tool_name[:-1] + "Q")
                for arguments in ARGUMENTS:
                    theirs = dump(await ask(client.call_tool(name, arguments)))
                    missing = dump(await ask(client.call_tool(missing_name, arguments)))
                    if _swap(theirs, name) != _swap(missing, missing_name):
                        leaks.append(f"tools/call {name!r} {arguments}: {theirs[:300]} but missing: {missing[:300]}")
                theirs = dump(await ask(client.call_tool("toolhub_describe_tool", {"name": name})))
                missing = dump(await ask(client.call_tool("toolhub_describe_tool", {"name": missing_name})))
                if _swap(theirs, name) != _swap(missing, missing_name):
                    leaks.append(f"describe {name!r}: {theirs[:300]} but missing: {missing[:300]}")
        for near in NEAR_MISSES:
            check(f"tools/call {near!r}", await ask(client.call_tool(near, {"who": "w"})), (near,))
            check(f"describe {near!r}", await ask(client.call_tool("toolhub_describe_tool", {"name": near})), (near,))

    with_client(base, token(user), body)
    if calls_too and not has_tenant_wide_role(user):
        leaks.extend(own_refused_calls(base, user, by_call_id))
    return leaks


def own_refused_calls(base: str, user: User, by_call_id: list[str]) -> list[str]:
    """The caller's own calls of acme's tools (refused) answer every tool taking a call id as missing tools' do.

    Staff with a tenant-wide role (operators, auditors, the platform) read their tenant's rows as stored, the true
    refusal, by design (``toolhub.caller_view``); the catalogue is no secret to them. Asked of everyone else.
    """
    mine = dict(ToolCall.objects.filter(user=user).order_by("-created_at").values_list("tool_name", "id"))
    pairs = [(str(mine[name]), str(mine[name[:-1] + "Q"])) for name in ACME_TOOLS]
    leaks: list[str] = []

    async def body(client: Client) -> None:
        for tool in by_call_id:
            for theirs_id, missing_id in pairs:
                theirs = dump(await ask(client.call_tool(tool, {"call_id": theirs_id})))
                missing = dump(await ask(client.call_tool(tool, {"call_id": missing_id})))
                theirs, missing = theirs.replace(theirs_id, "ID"), missing.replace(missing_id, "ID")
                for acme_name in ACME_TOOLS:
                    theirs = theirs.replace(acme_name, "NAME")
                    missing = missing.replace(acme_name[:-1] + "Q", "NAME")
                if theirs != missing:
                    leaks.append(
                        f"{tool} of one's own call of acme's tool: {theirs[:300]} but missing: {missing[:300]}"
                    )

    with_client(base, token(user), body)
    return leaks


server_surface_cache: dict[str, tuple[list[str], list[str]]] = {}


@pytest.fixture
def surface(live_asgi: str, world: AcmeData) -> str:  # noqa: F811
    """The server's declared surface, every part of it known to this sweep (else it fails naming the part)."""
    capabilities, own_tools = server_surface(live_asgi, make_user("granted-nothing"))
    unknown_capabilities = sorted(set(capabilities) - set(CAPABILITY_PROBES))
    assert not unknown_capabilities, (
        f"The MCP server now declares {unknown_capabilities}: add a probe to CAPABILITY_PROBES in {__name__} "
        "listing what it offers a caller, so the tenancy sweep covers it."
    )
    unknown_tools = sorted(set(own_tools) - set(STABLE_PROBES))
    assert not unknown_tools, (
        f"The MCP server now offers its own tools {unknown_tools}: add a probe to STABLE_PROBES in {__name__} "
        "giving arguments that name acme's rows and the same for missing ones."
    )
    assert set(own_tools) == set(STABLE_PROBES), own_tools  # a probe of a tool gone is stale
    server_surface_cache[live_asgi] = (capabilities, own_tools)
    return live_asgi


def acme_state() -> list[tuple[str, str]]:
    return sorted(
        (str(pk), status) for pk, status in ToolCall.objects.filter(tenant="acme").values_list("id", "status")
    )


def _former_member(alice: User) -> User:
    """alice after leaving acme: her calls there stay acme's, out of her reach."""
    TenantMembership.objects.filter(user=alice).delete()
    return alice


@pytest.mark.parametrize("person", ["globex_user", "globex_operator", "globex_auditor", "tenantless", "former_member"])
def test_nothing_of_acme_reaches_anyone_outside_it_over_mcp(
    surface: str,
    world: AcmeData,
    person: str,
    request: pytest.FixtureRequest,
    evil: Any,  # noqa: F811
) -> None:
    if person == "tenantless":
        user = make_user("nobody")
    elif person == "former_member":
        user = _former_member(request.getfixturevalue("alice"))
    else:
        user = request.getfixturevalue(person)
    before = acme_state()

    leaks = sweep_person(surface, user, world, calls_too=True)

    assert leaks == []
    assert acme_state() == before
    assert evil[0].calls == []


def test_the_platform_user_without_naming_acme_gets_none_of_acmes_tools(
    surface: str,
    world: AcmeData,
    platform_user: User,
    evil: Any,  # noqa: F811
) -> None:
    """By design the platform sees every tenant's calls; acme's grants hold for it only when it names acme."""
    before = acme_state()
    assert sweep_person(surface, platform_user, world, calls_too=False) == []
    assert acme_state() == before
    assert evil[0].calls == []


def _raw(
    base: str, user: User, method: str, params: dict[str, Any], headers: list[tuple[str, str]], key: str = ""
) -> httpx.Response:
    """``method`` sent to ``/mcp`` with ``user``'s token (``key``, when given, instead)."""
    return httpx.post(
        f"{base}/mcp",
        content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode(),
        headers=[
            ("Authorization", f"Bearer {key or token(user)}"),
            ("Accept", ACCEPT),
            ("Content-Type", "application/json"),
            ("MCP-Protocol-Version", "2025-06-18"),
            *headers,
        ],
        timeout=60,
    )


def _answer(response: httpx.Response, slug_values: tuple[str, ...]) -> str:
    text = response.text
    for value in slug_values:
        text = text.replace(repr(value), "'SLUG'")
    return f"{response.status_code} {' '.join(text.split())}"


METHODS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("tools/list", {}),
    ("tools/call", {"name": OPEN_TOOL, "arguments": {"who": "w"}}),
    ("tools/call", {"name": "toolhub_find_tools", "arguments": {"query": "payroll"}}),
    ("tools/call", {"name": "toolhub_call_status", "arguments": {"call_id": MISSING_ID}}),
)


def test_the_tenant_header_naming_acme_answers_as_a_missing_tenant(
    surface: str, world: AcmeData, globex_user: User, globex_operator: User, other_tenant: Tenant
) -> None:
    """acme, acme twice, acme with globex and a retired tenant: the answer of a tenant that does not exist."""
    Tenant.objects.create(slug="initech", name="Initech").delete()  # retired
    variants = {
        "acme": [("X-Toolhub-Tenant", "acme")],
        "acme twice": [("X-Toolhub-Tenant", "acme"), ("X-Toolhub-Tenant", "acme")],
        "globex then acme": [("X-Toolhub-Tenant", "globex"), ("X-Toolhub-Tenant", "acme")],
        "acme then globex": [("X-Toolhub-Tenant", "acme"), ("X-Toolhub-Tenant", "globex")],
        "retired": [("X-Toolhub-Tenant", "initech")],
    }
    before = acme_state()
    for user in (globex_user, globex_operator):
        for method, params in METHODS:
            missing = _answer(_raw(surface, user, method, params, [("X-Toolhub-Tenant", "nosuch")]), ("nosuch",))
            # The status tool reads the user's calls in all their tenants, the header aside: "no call among yours".
            assert "not a member" in missing or "toolhub_call_status" in str(params)
            for label, headers in variants.items():
                slugs = ("acme, acme", "globex, acme", "acme, globex", "acme", "initech")
                assert _answer(_raw(surface, user, method, params, headers), slugs) == missing, (label, method)
    assert acme_state() == before


def test_a_deactivated_member_of_acme_is_refused_before_any_method(
    surface: str, world: AcmeData, tenant: Tenant
) -> None:
    dave = make_user("dave", tenant=tenant)
    key = token(dave)
    dave.is_active = False
    dave.save()
    # The key dave held is revoked with the deactivation (toolhub.api.token_revocation); the sweep sends one an
    # administrator made for the inactive account since, which must be refused as well.
    assert token(dave) != key
    for method, params in METHODS:
        for response in (_raw(surface, dave, method, params, []), _raw(surface, dave, method, params, [], key)):
            assert response.status_code == 401 and "acme" not in response.text, response.text


@pytest.mark.parametrize(
    "meta",
    [
        {"tenant": "acme"},
        {"Tenant": "acme"},
        {"io.toolhub/tenant": "acme"},
        {"tenant_id": "acme"},
        {"user": "alice"},
        {"user_id": 1},
        {"username": "alice"},
        {"run_id": MISSING_ID},
        {"run": MISSING_ID},
        {"idempotency_key": "k-1"},
        {"Idempotency-Key": "k-1"},
        {"agent": "acme-orders"},
        {"agent_name": "acme-orders"},
    ],
)
def test_meta_never_moves_a_call_into_acme(
    surface: str, world: AcmeData, globex_user: User, other_tenant: Tenant, meta: dict[str, Any]
) -> None:
    """A call's ``_meta`` naming acme, alice, a run, an idempotency key or an agent: refused, or made as the caller."""
    Grant.objects.create(tool_name=OPEN_TOOL, tenant=other_tenant, effect=GrantEffect.ALLOW)
    before = set(ToolCall.objects.values_list("id", flat=True))

    async def body(client: Client) -> Any:
        return await ask(client.call_tool(OPEN_TOOL, {"who": "w"}, meta=meta))  # type: ignore[arg-type]  # any keys, as a client may send

    answer = with_client(surface, token(globex_user), body)
    made = list(ToolCall.objects.exclude(id__in=before))
    assert all(call.tenant == "globex" and call.user_id == globex_user.pk and call.run_id is None for call in made)
    assert all(not call.agent_name for call in made)
    if isinstance(answer, MCPError):
        assert "alice" not in str(answer) and not made
    else:
        assert len(made) == 1 and made[0].status == "succeeded" and "acme" not in dump(answer), dump(answer)


def test_notifications_naming_acmes_calls_change_nothing(surface: str, world: AcmeData, globex_operator: User) -> None:
    """``notifications/cancelled`` and ``notifications/progress`` naming acme's call ids are accepted and ignored."""
    before = acme_state()
    for pk in acme_call_ids(world):
        for method, params in (
            ("notifications/cancelled", {"requestId": pk, "reason": "sweep"}),
            ("notifications/progress", {"progressToken": pk, "progress": 1.0, "total": 1.0}),
        ):
            response = httpx.post(
                f"{surface}/mcp",
                content=json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode(),
                headers={
                    "Authorization": f"Bearer {token(globex_operator)}",
                    "Accept": ACCEPT,
                    "Content-Type": "application/json",
                    "MCP-Protocol-Version": "2025-06-18",
                },
                timeout=30,
            )
            assert response.status_code == 202 and "acme" not in response.text, (method, response.text)
    assert acme_state() == before
