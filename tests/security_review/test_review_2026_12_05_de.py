"""Review of 2026-12-05 (de): how credentials and URLs with secrets travel (url_redacted, credential_env).

Each test fails on the reviewed code (main at a677711) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. ``url_redacted`` / ``url_secret_parts`` missed a key in a path segment's matrix parameter
   (``/mcp;token=<key>``): it reached the governance trail whole, and the scrubber of remote MCP errors and logs
   did not know it. Percent-encoded user info (``p%40ss``) and a key in the fragment were not among the parts the
   scrubber replaces (a library may quote the decoded form; the log keeps the URL). Now matrix values (but a
   setting's), the fragment and each part's decoded form are secret parts, and matrix values are redacted.
2. ``credential_env`` could name any variable of the web and worker processes: whoever may edit a model provider
   or a remote MCP credential (superusers and holders of ``toolhub.cross_tenant``, not people who read the
   platform's environment) could name ``DJANGO_SECRET_KEY``, ``DATABASE_URL`` or the checkpoint key
   ``TOOLHUB_AUDIT_KEY`` with a base URL of their own, and the workers sent that value as the API key / bearer
   token. Now ``toolhub.credential_env`` refuses the platform's own variables where they are typed (a field
   validator) and again where the value is read (``credential_from_env``, for rows saved before), and
   ``TOOLHUB["CREDENTIAL_ENV_PREFIXES"]`` narrows names to the platform's convention.

Checked and found holding (no test here): tenant staff cannot add a remote MCP credential nor change its server,
tenant or variable (read-only), and see no provider or server page (``CrossTenantOnly``); the REST API refuses
``base_url``/``credential_env``/``api_key_env`` in an agent's model (400); a provider's base URL with user info, a
query or a fragment is refused (review o); remote MCP errors name the server, never its URL, and are scrubbed of
the credential before they reach the call, the model, ``last_error`` or the log (``RemoteServerError``,
``credential_scrubber``); the openai adapter's errors name only the exception's class and HTTP status; an adapter
bug is stored on the run by its type only; Celery tasks take ids only (no URL or key in a task's arguments);
uppercase schemes, IPv6 hosts and non-http schemes are redacted like any (``urlsplit``).
Not changed: a key-like path segment is recognised by a digit among 16+ token characters; a letter-only key in
a path (``/sk-abcdefghijklmnopqrst``) or a short one (``/k/abcd1234``) stays readable in the trail (a heuristic
that must keep path words readable; a provider's base URL should carry no key at all).
"""

import json

import pytest
from django.contrib.auth.models import User

from tests.helpers import console
from tests.security_review.conftest import server_form
from toolhub.models import AuditEvent
from toolhub.url_secrets import url_redacted, url_secret_parts

pytestmark = pytest.mark.django_db

KEY = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"


def test_a_key_in_a_matrix_parameter_is_redacted_and_scrubbed() -> None:
    """Found: ``https://mcp.example/mcp;token=<key>`` was recorded and logged whole, its key not a secret part.
    Expect: the value redacted (a setting's kept), and the key among the parts the scrubber replaces."""
    url = f"https://mcp.example/mcp;v=2;token={KEY}/tools"

    assert url_redacted(url) == "https://mcp.example/mcp;v=2;token=[redacted]/tools"
    assert KEY in url_secret_parts(url)
    assert "2" not in url_secret_parts(url)


def test_decoded_user_info_and_a_fragment_are_secret_parts() -> None:
    """Found: ``url_secret_parts`` gave ``p%40ss`` (not the ``p@ss`` a library sends and may quote) and no fragment
    (the log keeps the URL with its secret parts replaced, so a key after ``#`` stayed). Expect: both forms and
    the fragment."""
    parts = url_secret_parts(f"https://user:p%40ss@mcp.example/mcp#key={KEY}")

    assert {"p%40ss", "p@ss", f"key={KEY}"} <= set(parts)


def test_a_server_url_with_a_matrix_key_never_reaches_the_trail(superuser: User) -> None:
    """Found: a remote MCP server added with ``;token=<key>`` in its URL wrote the key into ``governance.added``.
    Expect: the URL recorded with ``token=[redacted]``, the key in no event."""
    added = console(superuser).post(
        "/admin/toolhub/remotemcpserver/add/", server_form(url=f"https://mcp.crm.example/mcp;token={KEY}")
    )

    assert added.status_code == 302, added.content[:3000]
    for event in AuditEvent.objects.all():
        assert KEY not in json.dumps(event.payload)
