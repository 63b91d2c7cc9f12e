"""Review of 2026-12-05 (r): the newest commits (4fbcf26..f0f926d) for regressions, holes and cheap denial of service.

Each test fails on the reviewed code (main at f0f926d) and states what was found and what is expected.
"""

import pytest
from django.contrib.auth.models import User

from tests.security_review.conftest import client_for

pytestmark = pytest.mark.django_db


# --- cf17f77: StorableAddressMiddleware reads request.POST before any view ---------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "multipart/form-data; boundary=\x01bad",  # a boundary Django refuses
        "multipart/form-data",  # no boundary at all
    ],
)
def test_a_body_that_is_no_form_is_refused_in_the_apis_error_shape(carol: User, content_type: str) -> None:
    """A member (any API client) posts a malformed multipart body to ``POST /api/v1/calls/``.

    Found: ``toolhub/middleware.py`` ``address_problem`` now reads ``request.POST`` for every request, before DRF;
    Django's ``MultiPartParserError`` escapes the middleware and Django answers its HTML "Bad Request (400)" page.
    Until cf17f77 DRF's parser answered ``{"detail": "Multipart form parse error - ..."}`` (JSON), the error shape
    the OpenAPI document promises for every 400 under ``/api/`` (``toolhub.api.schema``, review n).
    Expect: 400 with ``{"detail": "Multipart form parse error - ..."}`` as before.
    """
    answer = client_for(carol).generic("POST", "/api/v1/calls/", b"not a form", content_type=content_type)

    assert answer.status_code == 400
    assert answer["Content-Type"] == "application/json"
    assert answer.json()["detail"].startswith("Multipart form parse error - ")
