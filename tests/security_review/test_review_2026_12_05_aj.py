r"""Review of 2026-12-05 (aj): the shared stale-edit forms (``toolhub.admin_editable``), the display of invisible
characters (``toolhub.visible`` / ``admin_visible``) and the callers of ``toolhub.governance_trail``.

Each test fails on the reviewed code (main at 6b7a75b) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. ``ShownValuesKept`` validated the form as posted but saved untouched fields as stored: when a field's stored
   value differed from the one the page showed (a colleague's change, or a hidden ``initial-`` copy forged to equal
   the posted value), ``clean()`` and the model's checks read the posted value while the row kept the stored one. A
   tenant's developer turned their own allow of ``add`` into an allow of the built-in ``list_directory`` by posting
   ``effect=deny`` with a forged ``initial-effect=deny``: the tenant check read a deny, the save kept the allow.
   Now an untouched field that changed since it was shown is validated as stored, so every check reads the row
   that will be saved.

Checked and found holding (no test here): see the report.
"""

from typing import Any

import pytest

from tests.builtins.conftest import builtins, root  # noqa: F401 - fixtures
from tests.helpers import console
from tests.tenancy.conftest import make_user, roles  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


@pytest.mark.usefixtures("builtins")
def test_a_forged_shown_value_cannot_make_the_grant_check_read_a_value_that_is_not_saved(
    tenant: Any,
    roles: Any,  # noqa: F811 - the fixture imported above
) -> None:
    """Found: the grant page's tenant check (built-in tools are the platform's to allow) read the posted
    ``effect=deny`` while the save kept the stored ``allow`` (``initial-effect=deny`` forged, so "untouched"): an
    allow of ``add`` became an allow of ``list_directory``. Expect: the check reads the effect that is saved, the
    change is refused and the grant is unchanged."""
    from toolhub.models import Grant, GrantEffect

    developer = make_user("acme-dev-aj", tenant=tenant, staff=True, groups=(roles["developers"],))
    allow = Grant.objects.create(tenant=tenant, tool_name="add", effect=GrantEffect.ALLOW, set_by_platform=False)
    shown = {"effect": "deny", "note": "", "tool_group": "", "tool_name": "add", "tenant": tenant.pk}
    posted = {**shown, **{f"initial-{name}": value for name, value in shown.items()}, "tool_name": "list_directory"}
    response = console(developer).post(f"/admin/toolhub/grant/{allow.pk}/change/", posted)
    allow.refresh_from_db()
    assert (allow.effect, allow.tool_name) == (GrantEffect.ALLOW, "add"), response.status_code
    assert response.status_code == 200
    assert "only the platform grants them" in response.content.decode()
