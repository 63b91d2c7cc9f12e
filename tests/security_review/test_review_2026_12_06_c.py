"""Review of 2026-12-06 (c): an adversarial regression review of ``toolhub.wire`` (the bound on bytes read from model
endpoints and remote MCP servers) and ``toolhub.login_guard`` (the per-pair hold around each password check).

Each test fails on the reviewed code (main at c76a846) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. The remote MCP client's bound counted each HTTP response on its own, while one use of a server reads many:
   ``_listed`` follows ``nextCursor`` up to 100 pages and keeps every page's tools in memory, so a server paging
   its listing read and kept 100 x 64 x ``MAX_EXTERNAL_RESULT_BYTES`` (6.4 GB at the default) where one answer's
   bound was meant. The async hooks now share one count between all the answers of the client they are given to
   (``remote._run`` makes one client per use): the listing, the call and the SDK's GET stream together.

Checked and holding (no test here):

- wire: gzip and deflate bombs are cut by the bytes they decode to (httpx2's decoders drain in 1 MiB pieces, so
  no single piece is decoded whole); ``br`` and ``zstd`` are not installed, httpx2 does not ask for them, and a
  body so labelled is passed on raw (counted as read). A chunked body without ``Content-Length`` and a
  ``Content-Length`` that lies high are cut as read; one that lies low is h11's protocol error. ``iter_raw`` and
  ``iter_bytes`` both read the replaced stream (the ``Content-Encoding`` header is taken away once decoded here).
- redirects: the model client does not follow them (``follow_redirects=False``; a 3xx fails the turn); the MCP
  SDK follows same-origin 307/308 only (``stream_within_origin``), each hop through ``send`` and so the hook.
- retries: the SDK's one retry of a whole answer is a new response with a new count (2 x the bound at most).
- other outbound clients: ``provider_client`` is the only OpenAI client; the MCP client is made only in
  ``remote._run``; webhooks (``approvals.webhooks``, urllib) read no answer body beyond the status. Nothing else
  in toolhub/, agents_app/ or approvals/ opens an HTTP connection.
- login_guard: the pair's hold is keyed by (typed name, client address), so a guesser holds only their own
  address's pair, and only while one attempt's password is hashed and its failure recorded (the body is read
  before the hold); ``login_busy`` is raised before anything is compared, so it says nothing about the password.
  The PostgreSQL lock is transaction-level (``pg_advisory_xact_lock``): it goes with the commit or rollback, never
  back to a pooled connection; 55P03 and 57014 are the refusal, any other error propagates. The only password
  checks are the admin login and password change, both through ``authenticate_serialized``; API tokens and MCP
  bearer tokens compare no password, and no DRF login view (``rest_framework.urls``) or ``BasicAuthentication``
  is installed.
"""

from typing import Any

import mcp_types as types
import pytest
from mcp.server import Server

from tests.mcpclient.fake_server import FakeCrm, serving
from toolhub.mcp_client.remote import RemoteServerError, remote_tools


class PagingCrm(FakeCrm):
    """A server that lists its tools a page at a time, each page just under one answer's bound, ``pages`` pages
    (``None``: for ever)."""

    def __init__(self, page_bytes: int, pages: int | None = None) -> None:
        super().__init__()
        self.page_bytes = page_bytes
        self.pages = pages
        self.pages_served = 0

    def server(self) -> Server[Any]:
        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            page = int((params.cursor if params is not None else None) or 0)
            self.pages_served += 1
            tool = {"name": f"t{page}", "description": "p" * self.page_bytes, "inputSchema": {"type": "object"}}
            more = self.pages is None or page + 1 < self.pages
            return types.ListToolsResult.model_validate(
                {"tools": [tool], **({"nextCursor": str(page + 1)} if more else {})}
            )

        return Server("paging-crm", on_list_tools=list_tools)


def test_a_listing_paged_into_many_answers_is_bounded_as_one_use(settings: Any) -> None:
    """Found: each response was counted on its own: a server paging its listing (100 pages, each under the bound)
    had 100 x 64 x ``MAX_EXTERNAL_RESULT_BYTES`` read and kept in memory (50 x the bound here).

    Expect: the fetch fails once the answers of this use together pass the bound, naming the setting, and stops
    asking for pages.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_EXTERNAL_RESULT_BYTES": 1_000}  # 64,000 bytes read at most
    fake = PagingCrm(page_bytes=32_000)
    with serving(fake) as url, pytest.raises(RemoteServerError) as failed:
        remote_tools(url, name="crm", headers={}, timeout=60)

    assert "MAX_EXTERNAL_RESULT_BYTES" in str(failed.value) and url not in str(failed.value)
    assert fake.pages_served <= 3


def test_a_paged_listing_within_the_bound_is_read_whole(settings: Any) -> None:
    """Found: (the fix's other side) a listing's pages together under the bound must still be read.

    Expect: every page's tool is listed, up to the 100 pages ``_listed`` follows (a listing longer than that is
    refused whole: ``tests/mcpclient/test_remote_mcp.py``).
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_EXTERNAL_RESULT_BYTES": 1_000}
    fake = PagingCrm(page_bytes=10, pages=100)
    with serving(fake) as url:
        listed = remote_tools(url, name="crm", headers={}, timeout=60)

    assert [tool["name"] for tool in listed] == [f"t{page}" for page in range(100)]
