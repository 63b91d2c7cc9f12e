"""The fake remote MCP server, running for one test."""

from collections.abc import Iterator

import pytest

from tests.mcpclient.fake_server import FakeCrm, serving


@pytest.fixture
def crm() -> Iterator[tuple[FakeCrm, str]]:
    fake = FakeCrm()
    with serving(fake) as url:
        yield fake, url
