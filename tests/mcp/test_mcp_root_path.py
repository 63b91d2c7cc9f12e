"""toolhub mounted under a prefix (``uvicorn --root-path /toolhub`` behind a proxy): /mcp answers below it too."""

from collections.abc import Iterator

import httpx2
import pytest
from django.contrib.auth.models import User
from mcp import Client

from tests.mcp.conftest import serve_asgi, token, with_client
from toolhub.asgi import route_path

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def prefixed_asgi() -> Iterator[str]:
    """The server run with ``root_path="/toolhub"``; yields the base URL a proxy that strips the prefix forwards to."""
    yield from serve_asgi(root_path="/toolhub")


def test_mcp_answers_below_the_root_path(prefixed_asgi: str, alice: User) -> None:
    """Found: under ``--root-path`` uvicorn hands on ``/mcp`` as ``/toolhub/mcp``, which went to Django: a 404 for
    every client. Expect: the official MCP client lists tools through the proxy, and the API still answers."""

    async def names(client: Client) -> list[str]:
        return sorted(tool.name for tool in (await client.list_tools()).tools)

    listed = with_client(prefixed_asgi, token(alice), names)
    assert "toolhub_find_tools" in listed

    api = httpx2.get(f"{prefixed_asgi}/api/v1/tools/", headers={"Authorization": f"Token {token(alice)}"})
    assert api.status_code == 200


@pytest.mark.parametrize(
    ("path", "root_path", "expected"),
    [
        ("/mcp", "", "/mcp"),
        ("/toolhub/mcp", "/toolhub", "/mcp"),
        ("/toolhub", "/toolhub", ""),
        ("/toolhubx/mcp", "/toolhub", "/toolhubx/mcp"),
        ("/mcp", "/toolhub", "/mcp"),
    ],
)
def test_route_path_drops_only_a_whole_prefix(path: str, root_path: str, expected: str) -> None:
    """A prefix counts only as whole path segments: ``/toolhubx/mcp`` is not ``/mcp`` below ``/toolhub``."""
    assert route_path({"path": path, "root_path": root_path}) == expected
