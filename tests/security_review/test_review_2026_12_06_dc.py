"""Review of 2026-12-06 (dc): review cq (middleware order, ``path_info`` under ``--root-path``) and what it left.

Findings (each fails on 9dc5af6, passes with the fix):

1. Under ``--root-path`` a governed call's 202 answered ``Location: /api/v1/calls/<id>/`` (written out in
   ``toolhub.api.governed``): the prefix left out, a client following it reached another app or a 404. It is now
   ``reverse("call-detail")``, below the script prefix like every other link Django builds.
2. The root's redirect (``/`` to ``/admin/``, ``toolhub.urls``) and ``LOGIN_URL`` (``/admin/login/``) were written out
   too: under the prefix ``/`` redirected out of it. Both are now named URLs (``admin:index``, ``admin:login``),
   which Django reverses below the script prefix.
3. An approval e-mail's link was ``CONSOLE_URL`` + ``reverse(...)``: ``reverse`` holds the script prefix when the
   e-mail is written in a request (the embedded mode's eager task, under ``--root-path``) and not in a worker, so no
   ``CONSOLE_URL`` gave a right link in both: with the prefix in it the request's link doubled it
   (``/toolhub/toolhub/admin/...``), without it the worker's left it out. ``CONSOLE_URL`` is the console's address as
   people reach it, prefix included, and the link is it + the page's path below the script prefix
   (``toolhub.site_paths.console_link``), the same in a request and in a worker.
4. Under ``--root-path`` the OpenAPI document named no ``servers`` and its paths are ``/api/v1/...``: OpenAPI's default
   server ``/`` is the host's root, so the API docs' "Try it out" and generated clients called outside the prefix.
   A postprocessing hook names the script prefix as the (relative) server, only below a prefix
   (``toolhub.api.schema_servers``).

Checked and holding (probes run; a test below where said):

- cq's move of ``XFrameOptionsMiddleware`` and ``CSPMiddleware`` right inside ``SecurityMiddleware``: no view of
  toolhub, approvals, agents_app or demo uses ``csp_exempt``/``csp_update``/``csp_replace``/``xframe_options_*``
  (grep), so no decorator's mark is read differently; both middleware only add a header the answer lacks, so a
  download keeps its own ``sandbox`` policy (test below), the Swagger split view and its ``?script`` file get the
  site's policy and ``DENY`` (test below), and a 403 of the CSRF check, a 302 of the admin's login guard and a
  lockout page (axes, still innermost; read, not run) get them as before. No header is set twice: both are set only
  when absent, and ``PrivateAnswersMiddleware`` touches only ``Cache-Control``/``Expires`` (test below, 302 and 403).
- ``toolhub.response_headers.answer_headers`` (the stand-in for ``/mcp`` and the body bound) runs the same three
  header middleware: their order among themselves is unchanged by cq (each sets different headers).
- Other links Django builds already follow the script prefix: the artifact ``url`` in call answers (``reverse``),
  the dashboard's figure urls (``reverse``), the admin's own links and redirects, ``form_page``'s fallback, the
  console's stylesheet (``static()``, ``STATIC_URL`` relative), the API docs' script's schema address (test below).
  MCP serves no resources with URIs and its results carry no artifact link; webhook payloads carry no link.

Not fixed: the session and CSRF cookies keep the path ``/`` under a prefix (sent to other apps of the same host):
the prefix is known only per request (``--root-path``), and the same origin can read them anyway; a deployment that
shares a host sets ``SESSION_COOKIE_PATH``/``CSRF_COOKIE_PATH`` (no setting of toolhub reads one from the environment).
"""

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.core import mail
from django.test import Client
from django.urls import set_script_prefix

from approvals.models import ApprovalRequest
from approvals.notifications import approval_email_approvers
from tests.api.conftest import client_for
from tests.mcp.conftest import serve_asgi, token
from toolhub.models import CallStatus, ToolCall, ToolCallArtifact

#: The mount prefix a proxy strips and passes as ``--root-path`` (README): Django's ``SCRIPT_NAME``.
PREFIX = "/toolhub"


@pytest.fixture
def prefixed_asgi() -> Iterator[str]:
    """toolhub under uvicorn with ``--root-path /toolhub``: the base URL a proxy that strips the prefix forwards to."""
    yield from serve_asgi(root_path=PREFIX)


def _hold_below_the_prefix(base: str, alice: User) -> httpx2.Response:
    """POST a call of a high-risk tool to the server under the prefix, as alice (held: 202)."""
    response = httpx2.post(
        f"{base}/api/v1/calls/",
        json={"tool": "risky_effect", "arguments": {"note": "x"}},
        headers={"Authorization": f"Token {token(alice)}"},
    )
    assert response.status_code == 202, response.content
    return response


@pytest.mark.django_db(transaction=True)
def test_a_held_calls_location_holds_the_root_path(prefixed_asgi: str, alice: User) -> None:
    """Found: under ``--root-path`` a held call's 202 answered ``Location: /api/v1/calls/<id>/``, the prefix left
    out (written out in ``toolhub.api.governed``). Expect: ``/toolhub/api/v1/calls/<id>/``."""
    # when
    response = _hold_below_the_prefix(prefixed_asgi, alice)
    # then
    assert response.headers["Location"] == f"{PREFIX}/api/v1/calls/{response.json()['id']}/"


@pytest.mark.django_db(transaction=True)
def test_an_approval_emails_link_holds_the_root_path_once_in_a_request_and_in_a_worker(
    prefixed_asgi: str, alice: User, operator: User, settings: Any
) -> None:
    """Found: the approval e-mail written in the request (the embedded mode's eager task) under ``--root-path``
    linked to ``CONSOLE_URL`` (the console's address, prefix included) + ``reverse``'s path, which held the prefix
    again (``/toolhub/toolhub/admin/...``); a worker's has none, so no ``CONSOLE_URL`` was right for both. Expect:
    ``CONSOLE_URL`` + the page's path below the prefix, the same link written in the request and by a worker."""
    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "CONSOLE_URL": f"https://h.example{PREFIX}/"}
    # when
    _hold_below_the_prefix(prefixed_asgi, alice)
    approval = ApprovalRequest.objects.get()
    set_script_prefix("/")  # a worker's: no request
    written_by_worker = approval_email_approvers(request_id=approval.pk, event="approval.requested")
    # then
    page = f"https://h.example{PREFIX}/admin/approvals/approvalrequest/{approval.pk}/change/"
    assert written_by_worker == 1 and len(mail.outbox) == 2, [m.body for m in mail.outbox]
    assert [page in message.body for message in mail.outbox] == [True, True], [m.body for m in mail.outbox]


@pytest.mark.django_db(transaction=True)
def test_the_roots_redirect_and_the_login_url_stay_below_the_root_path(prefixed_asgi: str) -> None:
    """Found: ``/`` redirected to ``/admin/`` and ``LOGIN_URL`` was ``/admin/login/``, both written out: under
    ``--root-path`` they left the prefix. Expect: ``/toolhub/admin/`` and ``/toolhub/admin/login/``."""
    # when
    root = httpx2.get(f"{prefixed_asgi}/")
    set_script_prefix(f"{PREFIX}/")  # as the server's handler sets it for the request's thread
    try:
        to_login = redirect_to_login(f"{PREFIX}/admin/")
    finally:
        set_script_prefix("/")
    # then
    assert (root.status_code, root.headers["Location"]) == (302, f"{PREFIX}/admin/"), dict(root.headers)
    assert to_login["Location"].startswith(f"{PREFIX}/admin/login/?"), to_login["Location"]


@pytest.mark.django_db
def test_a_download_keeps_its_own_policy_and_the_docs_get_the_sites(operator: User, settings: Any) -> None:
    """Checked (cq's middleware order): a download's ``sandbox`` policy is kept, not replaced by the site's; the
    Swagger split view's page and its script carry the site's policy and ``DENY``; a login redirect (302) and a CSRF
    refusal (403) carry each header once."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    call = ToolCall.objects.create(tool_name="record_effect", status=CallStatus.SUCCEEDED, tenant="acme", user=operator)
    artifact = ToolCallArtifact.objects.create(
        call=call, name="a.html", media_type="text/html", size=8, sha256="0" * 64, content=b"<script>"
    )
    # when
    download = client.get(f"/api/v1/calls/{call.pk}/artifacts/{artifact.pk}/")
    docs = [client.get("/api/docs/"), client.get("/api/docs/?script=")]
    guarded = Client().get("/admin/")
    refused = client.post("/admin/logout/")
    # then
    assert download.status_code == 200, download.content[:200]
    assert download["Content-Security-Policy"] == "sandbox; default-src 'none'"
    for answer in [*docs, guarded, refused]:
        assert "frame-ancestors 'none'" in answer["Content-Security-Policy"], answer.status_code
        assert answer["X-Frame-Options"] == "DENY"
    assert (guarded.status_code, refused.status_code) == (302, 403)


@pytest.mark.django_db(transaction=True)
def test_the_openapi_schema_names_the_root_path_as_its_server(prefixed_asgi: str, alice: User) -> None:
    """Found: under ``--root-path`` the schema (``/toolhub/api/schema/``) named no ``servers`` and its paths are
    ``/api/v1/...``: OpenAPI's default server is ``/``, so the API docs' "Try it out" and clients generated from it
    called ``https://host/api/v1/...``, outside the prefix. Expect: the server ``/toolhub`` (relative, read against
    the schema's own address); none without a prefix, as before."""
    headers = {"Authorization": f"Token {token(alice)}"}
    # when
    below = httpx2.get(f"{prefixed_asgi}/api/schema/?format=json", headers=headers)
    at_root = client_for(alice).get("/api/schema/?format=json")
    docs = httpx2.get(f"{prefixed_asgi}/api/docs/?script=", headers=headers)
    # then
    assert below.status_code == at_root.status_code == 200
    assert below.json().get("servers") == [{"url": PREFIX}], below.json().get("servers")
    assert "/api/v1/calls/" in below.json()["paths"]
    assert "servers" not in at_root.json()
    assert f'"{PREFIX}/api/schema/"' in docs.text, docs.text[:300]  # the docs fetch the schema below it too
