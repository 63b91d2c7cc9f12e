"""Review of 96b1492 / 4477cd1 (kept remote definitions, held recorded verdicts, open schemas, exports, 0022/0024).

The problems it found, now fixed (each docstring says what broke): every query value of a server's URL is
a secret but a few setting names; a tool with a sensitive parameter withholds names it no longer has even
with an open schema.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.helpers import RequestCall
from tests.mcpclient.fake_server import FakeCrm
from toolhub import registry

pytestmark = pytest.mark.django_db

REVIEW_B_PIN = "4711-review-b"


# --- (c) an open hand-written schema: a renamed sensitive parameter's old value is shown again -----------------


def test_an_open_hand_written_schema_still_withholds_a_renamed_sensitive_parameter(
    request_call: RequestCall, alice: User
) -> None:
    """``selectors.withheld_names`` (toolhub/selectors.py:101-104) now returns only ``tool.sensitive`` whenever
    the tool's schema does not say ``additionalProperties: false``. That is not only a remote server's schema:
    every local tool built on a hand-written JSON Schema (``Tool.create(name, desc, {"type": "object",
    "properties": ...}, handler, sensitive=...)``, ``Tool.external(...)``) is open by JSON Schema's default.
    When such a tool renames its sensitive parameter (``pin`` -> ``door_pin``, the docstring's own example),
    every earlier call's ``pin`` is no longer withheld: the call page, the API, the approval desk/edit form and
    the export (which now goes through ``withheld_names`` too) show it in clear. Before 96b1492 it was withheld.

    Fix: admit a name beyond ``properties`` only for a call recorded under the tool's current version
    (``call.tool_version == tool.version``: the schema that admitted it is the one read now), or only for
    tools that never declare sensitive names (remote MCP tools); keep withholding names the current
    ``properties`` lack for calls of an earlier version."""
    from toolhub.exports import export_rows
    from toolhub.models import ToolCall
    from toolhub.selectors import displayed_arguments
    from toolhub.tools.definition import Tool

    def v1_schema() -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"door": {"type": "string"}, "pin": {"type": "string"}},
            "required": ["door", "pin"],
        }

    v2_schema = {
        "type": "object",
        "properties": {"door": {"type": "string"}, "door_pin": {"type": "string"}},
        "required": ["door", "door_pin"],
    }
    v1 = Tool.create("review_b_door", "Open a door.", v1_schema(), lambda a: "open", sensitive=("pin",), risk="low")
    v2 = Tool.create("review_b_door", "Open a door.", v2_schema, lambda a: "open", sensitive=("door_pin",), risk="low")
    with registry.temporarily(v1):
        call = request_call("review_b_door", {"door": "vault", "pin": REVIEW_B_PIN}, alice, tenant="acme")
        assert REVIEW_B_PIN not in str(displayed_arguments(call))
    with registry.temporarily(v2):
        shown = displayed_arguments(call)
        exported = list(export_rows(ToolCall.objects.filter(pk=call.pk)))
    assert REVIEW_B_PIN not in str(shown), shown
    assert REVIEW_B_PIN not in str(exported), exported


# --- (a) the URL's query values: a secret under a name the denylist misses is no longer replaced ---------------


@pytest.mark.parametrize("name", ["jwt", "pwd", "sid", "hmac", "apiKy"])
def test_a_url_secret_under_a_name_outside_the_credential_list_is_still_scrubbed(name: str) -> None:
    """``credential_scrubber`` (toolhub/mcp_client/services.py:73-74, ``_CREDENTIAL_NAME`` at :79) now scrubs
    only the values of query parameters whose *name* matches ``key|token|secret|sig|pass|auth|credential|
    session|code``. Until 96b1492 every query value of the server's URL was a secret. Hosted servers put
    keys under other names (``?jwt=``, ``?pwd=``, ``?sid=``, ``?hmac=``, a typo'd or vendor name): a server
    echoing such a value (in an error, a result or a listed definition) now has it stored in clear, shown in
    the admin's diff, audited on acceptance and sent to the model.

    Fix: invert the rule: scrub every query value except those of a short allowlist of names known to be
    harmless options (``format``, ``version``, ``transport``, ``lang``...), or except values that cannot be a
    secret (short, a plain word, a number)."""
    from toolhub.mcp_client.services import credential_scrubber

    secret = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXBheWxvYWQ.q9Xk2mZ"
    scrubber = credential_scrubber({}, f"https://mcp.example.com/mcp?{name}={secret}&format=json")
    assert secret not in scrubber.text(f"invalid credential {secret}")


@pytest.fixture
def crm() -> Any:
    from tests.mcpclient.fake_server import serving

    fake = FakeCrm()
    with serving(fake) as url:
        yield fake, url


def test_a_url_jwt_echoed_in_a_listed_definition_is_not_stored_in_clear(crm: tuple[FakeCrm, str]) -> None:
    """End to end for the test above: ``remote_server_sync`` keeps the listed definition through
    ``credential_scrubber(headers, server.url).value``; a server URL carrying ``?jwt=...`` whose server
    echoes it in a tool's description now has it stored in ``RemoteMcpTool.current_definition`` (admin, diff,
    audit on acceptance). It was replaced by ``[secret]`` before 96b1492."""
    from toolhub.mcp_client.models import RemoteMcpServer, RemoteMcpTool
    from toolhub.mcp_client.services import remote_server_sync

    fake, url = crm
    jwt = "eyJhbGciOiJIUzI1NiJ9.dGVuYW50LWFjbWU.Zx81kQ"
    fake.description = f"Look up a customer by id (authorised by {jwt})."
    server = RemoteMcpServer.objects.create(
        name="crm", url=f"{url}?jwt={jwt}", risk="low", select_names=["lookup_customer"]
    )
    remote_server_sync(server=server, actor="operator:platform")
    row = RemoteMcpTool.objects.get(tool_name="crm__lookup_customer")
    assert jwt not in str(row.current_definition), row.current_definition
