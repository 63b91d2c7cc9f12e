"""Review of 2026-12-06 (bc): a review of reviews ay (console sessions on the API), av (file parts refused under
``/api/``), au (keyless checkpoint evidence) and the ``rowwrite.new_instance`` value defaults.

Findings:

1. Review av's refusal of file parts ran only where Django parses the form, for ``POST``: Django leaves ``PATCH``
   and ``PUT`` bodies unparsed, so DRF's multipart parser read them later and a ``PATCH /api/v1/agents/<id>/``
   with a file part was applied (200), against the README's "a multipart body with a file part answers 400".
   The API's multipart parser (``toolhub.api.parsers.FilelessMultiPartParser``) now refuses any file part, for
   every method, with the middleware's words.

Checked and holds (no test here):

- ``ConsoleSessionAuthentication``: ``admin.site`` is toolhub's site (``ToolhubAdminConfig``), whose
  ``has_permission`` is Django's (active and staff; no lockout or expiry consulted: axes counts login attempts, not
  sessions, as the console itself does); ``request._request.user`` is the session's lazy user DRF's own class reads;
  DRF's setter writes the anonymous user back to the Django request when refused; the token class comes first, so
  a valid token with a refused session authenticates and a bad token is a 401 with ``WWW-Authenticate: Token``;
  CSRF is still enforced by the parent for every accepted session (it runs before the console check, so a demoted
  session's unsafe request without a token is a 403 instead of 401: nothing passes); the OpenAPI schema still
  lists ``cookieAuth`` (``ConsoleSessionScheme``); no console JavaScript calls ``/api/`` (queue-refresh fetches its
  own admin page), the browser tests use the console only, the README's tour uses tokens; MCP takes tokens only,
  and tokens are administered apart (documented).
- File parts before authentication: the whole body is bounded first (declared ``Content-Length`` by the middleware,
  chunked bodies under ASGI by ``toolhub.asgi_body``) at ``DATA_UPLOAD_MAX_MEMORY_SIZE``, the same size as
  ``FILE_UPLOAD_MAX_MEMORY_SIZE`` (both Django's 2.5 MB), so a file part is held in memory, never spooled to disk;
  any temporary upload is closed (deleted) with the request. Admin forms have no file fields: a file part there is
  parsed within the bound and ignored.
- Keyless checkpoint evidence: the application role may only INSERT into ``audit_checkpoint`` and
  ``audit_verification`` (``APPEND_ONLY_PRIVILEGES``), so it can add a forged checkpoint or record (a false
  TAMPERED, as any forged audit row is) but cannot delete: hiding a deletion needs the owner, who could delete the
  witnesses too. Trusting the unsigned ``acknowledged`` marker without the key is documented and the run still
  reports UNVERIFIABLE beside it. ``_deleted_newest`` reads ``checkpoint_seq > newest`` through
  ``audit_verification_checkpoint`` (a range that is empty in the usual case).
- ``new_instance``'s value defaults: Django's ``Field._get_default`` returns the same default object each time too
  (``lambda: self.default``), so sharing is Django's behaviour; no model field has a non-callable unhashable
  default (checked over every installed model), and Django's ``fields.E010`` warns on a JSONField literal default
  (``check --deploy --fail-level WARNING`` is tested).
"""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart

from agents_app.models import Agent
from agents_app.services import agent_create
from tests.agents.conftest import make_developer
from tests.security_review.conftest import client_for
from toolhub.models import Tenant

pytestmark = pytest.mark.django_db


def test_a_file_part_in_a_patch_is_refused_as_in_a_post(tenant: Tenant) -> None:
    """Found: ``PATCH /api/v1/agents/<id>/`` as multipart with a file part beside a text field was applied (200):
    Django parses forms for POST only, so the middleware's refusal never saw it. Expect: 400 naming the file part,
    nothing changed, for every method."""
    developer = make_developer("dev-bc", tenant)
    agent = agent_create(name="bc-agent", tenant="acme", system_prompt="before", script=[{"content": "hi"}])
    client = client_for(developer)
    client.raise_request_exception = False
    body = encode_multipart(
        BOUNDARY,
        {"system_prompt": "after", "note": SimpleUploadedFile("p.json", b'{"a": 1}', content_type="application/json")},
    )

    response = client.patch(f"/api/v1/agents/{agent.pk}/", body, content_type=MULTIPART_CONTENT)

    assert response.status_code == 400, response.content[:300]
    assert "file part 'note'" in response.json()["detail"], response.content[:300]
    assert Agent.objects.get(pk=agent.pk).system_prompt == "before"
