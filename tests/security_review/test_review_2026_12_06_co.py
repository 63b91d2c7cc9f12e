"""Review of 2026-12-06 (co): reviews by's and ch's ``/mcp`` answer path behind a TLS-terminating proxy.

Findings (fixed: the README's production ASGI command, ``toolhub.asgi``'s docstring):

1. The documented ASGI deployment (``uvicorn toolhub.asgi:application --workers 4`` behind the proxy) trusted
   ``X-Forwarded-Proto`` whatever ``DJANGO_SECURE_PROXY_SSL_HEADER`` said: uvicorn's proxy headers are on by default
   for a peer on 127.0.0.1 (a proxy on the same host) and rewrite the request's scheme before toolhub sees it. With
   the setting off, a client's ``X-Forwarded-Proto: https`` passed on over plain HTTP was not redirected, on ``/mcp``
   or on Django's pages: its token and the tool results crossed in clear. The command now passes
   ``--no-proxy-headers``: Django's settings are the one place saying which proxy header counts.
2. The same rewrote the client from ``X-Forwarded-For``: with ``DJANGO_TRUSTED_PROXY_COUNT=0`` ("the header is never
   read") a guesser picked the address its failed logins count under. Fixed by the same flag.

Checked and holding (live uvicorn started as the README says, the official MCP SDK client): with
``DJANGO_SECURE_PROXY_SSL_HEADER=X-Forwarded-Proto`` a request the proxy marks ``https`` is not redirected (the SDK
client lists tools), an unmarked one is redirected 301, ``/mcp`` and Django's pages alike; HSTS is added over HTTPS
(the proxy's mark) and not on the plain-HTTP redirect; a client's ``X-Forwarded-Proto`` before the proxy's counts
for ``/mcp`` as for the pages (Django reads the first value: the proxy must overwrite the header, as the README
says); ``SECURE_REDIRECT_EXEMPT`` patterns are matched on the whole path, root path included, without its leading
slash (Django's ``request.path``), for ``/mcp`` as for the pages; under ``--root-path`` the redirect's ``Location``
keeps the prefix for both. ``route_path`` drops only a whole prefix and WebSocket handshakes are refused
(``tests/mcp/test_mcp_root_path.py``, reviews bt and ck: their tests pass unchanged).
"""

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.core.asgi import get_asgi_application
from django.test import override_settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from uvicorn.main import main as uvicorn_command

import toolhub.asgi
from tests.mcp.conftest import serve_asgi, token

pytestmark = pytest.mark.django_db(transaction=True)

README = Path(__file__).resolve().parents[2] / "README.md"
PROXY_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
#: A page of Django's and ``/mcp``, answered side by side.
PAGE, MCP = "/api/v1/tools/", "/mcp"


def _documented_uvicorn_options() -> dict[str, Any]:
    """The uvicorn options of the README's production ASGI command that decide what a proxy's headers count for."""
    commands = [
        line for line in README.read_text().splitlines() if "`uvicorn toolhub.asgi:application --workers" in line
    ]
    assert len(commands) == 1, commands
    command = commands[0].split("`uvicorn ", 1)[1].split("`", 1)[0]
    params = uvicorn_command.make_context("uvicorn", shlex.split(command)).params
    return {name: params[name] for name in ("proxy_headers", "forwarded_allow_ips")}


@contextmanager
def _served(monkeypatch: pytest.MonkeyPatch, root_path: str = "", **settings: Any) -> Iterator[str]:
    """toolhub's ASGI app under uvicorn, started as the README says, with ``settings`` (Django's own handler made
    under them: its middleware reads them when made)."""
    with override_settings(**{"SECURE_SSL_REDIRECT": True, **settings}), monkeypatch.context() as patch:
        patch.setattr(toolhub.asgi, "django_application", get_asgi_application())
        served = serve_asgi(root_path=root_path, **_documented_uvicorn_options())
        try:
            yield next(served)
        finally:
            served.close()


def _post(base: str, path: str, headers: list[tuple[str, str]], key: str) -> httpx2.Response:
    """``path`` posted as an MCP client posts (a JSON-RPC message), with ``headers`` (a proxy's, a client's)."""
    sent = [
        ("Authorization", f"Bearer {key}"),
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
        *headers,
    ]
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    return httpx2.post(f"{base}{path}", headers=sent, content=body, follow_redirects=False)


def _answers(base: str, headers: list[tuple[str, str]], key: str) -> dict[str, tuple[int, str | None]]:
    """What ``/mcp`` and Django's page answer ``headers``: the status and the redirect's location."""
    answers = {path: _post(base, path, headers, key) for path in (MCP, PAGE)}
    return {path: (answer.status_code, answer.headers.get("location")) for path, answer in answers.items()}


def _tool_names(base: str, key: str, headers: dict[str, str]) -> list[str]:
    """The tools the official MCP client lists through a proxy adding ``headers``."""

    async def main() -> list[str]:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}", **headers}) as http:
            async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
                return sorted(tool.name for tool in (await client.list_tools()).tools)

    return anyio.run(main)


def test_a_spoofed_forwarded_proto_is_not_https_without_the_setting(
    monkeypatch: pytest.MonkeyPatch, alice: User
) -> None:
    """Found: run as the README said (uvicorn's proxy headers on, a proxy on 127.0.0.1), a client's
    ``X-Forwarded-Proto: https`` over plain HTTP made the request https with ``DJANGO_SECURE_PROXY_SSL_HEADER`` unset:
    ``/mcp`` ran the call and the pages answered, nothing redirected. Expect: without the setting the header counts
    for nothing, alone or after a proxy's own: ``/mcp`` and the pages are both redirected to HTTPS."""
    key = token(alice)
    with _served(monkeypatch, SECURE_PROXY_SSL_HEADER=None) as base:
        host = base.removeprefix("http://")
        for headers in (
            [("X-Forwarded-Proto", "https")],
            [("X-Forwarded-Proto", "http"), ("X-Forwarded-Proto", "https")],
        ):
            # when
            answers = _answers(base, headers, key)
            # then
            assert answers == {
                MCP: (301, f"https://{host}{MCP}"),
                PAGE: (301, f"https://{host}{PAGE}"),
            }, headers


def test_behind_a_tls_proxy_mcp_and_pages_read_https_from_the_proxy_header(
    monkeypatch: pytest.MonkeyPatch, alice: User
) -> None:
    """Holds (no finding): with ``DJANGO_SECURE_PROXY_SSL_HEADER=X-Forwarded-Proto`` the official MCP client behind
    the proxy (which sets ``https``) lists its tools, not redirected; an unmarked request is redirected, ``/mcp`` as
    the pages; HSTS only over https; a client's header before the proxy's counts for ``/mcp`` as for the pages."""
    key = token(alice)
    with _served(monkeypatch, SECURE_PROXY_SSL_HEADER=PROXY_HEADER, SECURE_HSTS_SECONDS=3600) as base:
        host = base.removeprefix("http://")
        # when
        listed = _tool_names(base, key, {"X-Forwarded-Proto": "https"})
        secure = {path: _post(base, path, [("X-Forwarded-Proto", "https")], key) for path in (MCP, PAGE)}
        plain = {path: _post(base, path, [], key) for path in (MCP, PAGE)}
        appended = _answers(base, [("X-Forwarded-Proto", "https"), ("X-Forwarded-Proto", "http")], key)
        overwritten = _answers(base, [("X-Forwarded-Proto", "http")], key)
    # then
    assert "toolhub_find_tools" in listed
    for path in (MCP, PAGE):
        assert secure[path].status_code != 301, (path, secure[path].status_code)
        assert secure[path].headers["strict-transport-security"] == "max-age=3600", path
        assert plain[path].status_code == 301 and plain[path].headers["location"] == f"https://{host}{path}"
        assert "strict-transport-security" not in plain[path].headers, path
    # Django's rule: the first value counts, so the proxy must overwrite the header (the README says so)
    assert appended[MCP][0] != 301 and appended[PAGE][0] != 301
    assert overwritten == {MCP: (301, f"https://{host}{MCP}"), PAGE: (301, f"https://{host}{PAGE}")}


@pytest.mark.parametrize(
    ("exempt", "redirected"),
    [
        ([r"^toolhub/mcp$"], {PAGE}),
        ([r"^toolhub/api/"], {MCP}),
        ([r"mcp|tools"], set()),
        ([r"^mcp$"], {MCP, PAGE}),
        ([r"^/toolhub/mcp"], {MCP, PAGE}),
    ],
)
def test_redirect_exempt_patterns_match_mcp_as_django_matches_its_pages(
    monkeypatch: pytest.MonkeyPatch, alice: User, exempt: list[str], redirected: set[str]
) -> None:
    """Holds (no finding): ``SECURE_REDIRECT_EXEMPT`` is matched on the whole path, the root path included, without
    its leading slash (Django's ``request.path``), for ``/mcp`` as for Django's pages."""
    key = token(alice)
    with _served(monkeypatch, root_path="/toolhub", SECURE_REDIRECT_EXEMPT=exempt) as base:
        # when
        answers = _answers(base, [], key)
    # then
    assert {path for path, (status, _) in answers.items() if status == 301} == redirected


def test_under_a_root_path_the_redirect_keeps_the_prefix(monkeypatch: pytest.MonkeyPatch, alice: User) -> None:
    """Holds (no finding): under ``--root-path /toolhub`` plain HTTP to ``/mcp`` and to a page is redirected to the
    same path below the prefix over HTTPS, and the proxy's mark is read there too."""
    key = token(alice)
    with _served(monkeypatch, root_path="/toolhub", SECURE_PROXY_SSL_HEADER=PROXY_HEADER) as base:
        host = base.removeprefix("http://")
        # when
        plain = _answers(base, [], key)
        listed = _tool_names(base, key, {"X-Forwarded-Proto": "https"})
    # then
    assert plain == {MCP: (301, f"https://{host}/toolhub{MCP}"), PAGE: (301, f"https://{host}/toolhub{PAGE}")}
    assert "toolhub_find_tools" in listed


def test_a_client_forwarded_for_does_not_pick_the_lockout_address_without_trusted_proxies(
    monkeypatch: pytest.MonkeyPatch, operator: User
) -> None:
    """Found: run as the README said, uvicorn took a client's ``X-Forwarded-For`` from a peer on 127.0.0.1 as the
    connection's address, so with ``DJANGO_TRUSTED_PROXY_COUNT=0`` ("the header is never read") a guesser picked the
    address its failed logins count under. Expect: the failure counted under the peer's address."""
    with _served(monkeypatch, SECURE_SSL_REDIRECT=False, AXES_ENABLED=True, TRUSTED_PROXY_COUNT=0) as base:
        with httpx2.Client(base_url=base) as browser:
            form = browser.get("/admin/login/")
            csrf = form.text.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
            # when
            browser.post(
                "/admin/login/",
                data={"csrfmiddlewaretoken": csrf, "username": operator.username, "password": "a-wrong-guess"},
                headers={"X-Forwarded-For": "203.0.113.9"},
            )
    # then
    assert list(AccessAttempt.objects.values_list("ip_address", flat=True)) == ["127.0.0.1"]
