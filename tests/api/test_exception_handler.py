"""toolhub's errors answer, in every view, the status their class declares (``toolhub_exception_handler``)."""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from agents_app.models import AgentRun
from agents_app.services import AgentPermissionError, RunInputError, RunStateError
from toolhub.exceptions import (
    AlreadyDecidedError,
    EditedArgumentsError,
    ModelError,
    NotInTenantError,
    ToolhubError,
)
from toolhub.sagas.services import NothingToCompensateError


class _Raises(APIView):
    not_found_model = AgentRun
    error: Exception = ToolhubError("unset")

    def get(self, request: Request) -> Response:
        raise self.error


def _answer(error: Exception, user: User) -> Response:
    request = APIRequestFactory().get("/x/")
    force_authenticate(request, user)
    return _Raises.as_view(error=error)(request)


@pytest.mark.parametrize(
    ("error", "status", "body"),
    [
        (ToolhubError("plain"), 400, {"detail": "plain"}),
        (RunInputError("bad input"), 400, {"detail": "bad input"}),
        (RunStateError("not now"), 409, {"detail": "not now"}),
        (AgentPermissionError("not yours"), 403, {"detail": "not yours"}),
        (AlreadyDecidedError("decided"), 409, {"detail": "decided"}),
        (EditedArgumentsError("too deep"), 400, {"detail": "too deep", "arguments": ["too deep"]}),
        (NothingToCompensateError("nothing"), 409, {"detail": "nothing"}),
        (ModelError("endpoint down"), 502, {"detail": "endpoint down"}),
        (
            NotInTenantError("No such record among your tenants."),
            404,
            {"detail": "No AgentRun matches the given query."},
        ),
        (ValidationError({"x": ["bad"]}), 400, {"x": ["bad"]}),
    ],
)
def test_each_error_answers_its_declared_status_and_body(
    error: Exception, status: int, body: dict, alice: User
) -> None:
    response = _answer(error, alice)

    assert (response.status_code, response.data) == (status, body)


def test_another_tenants_row_answers_exactly_like_a_missing_one(
    alice_client: object, operator_client: object, alice: User
) -> None:
    # the handler's 404 for NotInTenantError is the very answer get_object_or_404 gives for a missing run
    missing = alice_client.get("/api/v1/runs/00000000-0000-0000-0000-000000000000/")  # type: ignore[attr-defined]
    assert missing.status_code == 404
    assert _answer(NotInTenantError("x"), alice).data == missing.json()


def test_an_unexpected_error_is_not_swallowed(alice: User) -> None:
    with pytest.raises(ZeroDivisionError):
        _answer(ZeroDivisionError("bug"), alice)


@pytest.mark.django_db
def test_a_url_no_api_route_matches_answers_json_and_the_admin_keeps_its_page(alice_client: Any, client: Any) -> None:
    """The path converter refuses ``not-a-uuid`` before DRF sees the request: Django's own 404 page answers it."""
    for path in ("/api/v1/runs/not-a-uuid/", "/api/v1/no-such-endpoint/"):
        response = alice_client.get(path)
        assert response.status_code == 404
        assert response["Content-Type"] == "application/json"
        assert response.json() == {"detail": "Not found."}

    page = client.get("/admin/no-such-page/")
    assert page.status_code in (302, 404) and "application/json" not in page["Content-Type"]
    assert client.get("/no-such-page/")["Content-Type"].startswith("text/html")


def test_a_server_error_under_the_api_answers_json(rf: Any) -> None:
    from toolhub.api.error_pages import server_error_page

    api = server_error_page(rf.get("/api/v1/calls/"))
    page = server_error_page(rf.get("/admin/"))

    assert api.status_code == page.status_code == 500
    assert json.loads(api.content) == {"error": "Server Error (500)"}
    assert page["Content-Type"].startswith("text/html")
