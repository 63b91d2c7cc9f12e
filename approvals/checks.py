"""The approvals app's system checks.

``approvals.W001``: an enabled approval rule that can no longer match (``approvals.rule_checks``). A rule saved
before the code changed (a tool removed, a parameter renamed) is reported here and marked in the rules' list; one
naming its tool and a parameter it lost holds that tool's calls meanwhile (``rule_matches``).

``approvals.W002`` (``--deploy``): the approval webhook is set but its deliveries cannot be signed (no secret, or a
``whsec_`` one that is not base64), so a receiver cannot tell toolhub's deliveries from anyone's.
"""

import os
from typing import Any

from django.core.checks import CheckMessage, Tags, Warning, register

from toolhub.conf import toolhub_settings
from toolhub.references import reference_warnings, saved_rows

__all__ = ["check_approval_rules", "check_webhook_signing"]


@register("toolhub", Tags.database)
def check_approval_rules(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Read from the database, so only with ``--database`` (``manage.py check --database default``, ``migrate``)."""
    if not databases:
        return []
    from approvals.models import ApprovalRule
    from approvals.rule_checks import rule_problems

    rules = saved_rows(lambda: ApprovalRule.objects.filter(enabled=True).select_related("tool_group"))
    return reference_warnings(
        ((rule, rule_problems(rule)) for rule in rules),
        check_id="approvals.W001",
        hint="Fix the rule in the admin (Approvals > Approval rules), or disable it; it was saved before the code "
        "changed.",
    )


@register("toolhub", deploy=True)
def check_webhook_signing(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A webhook URL with no usable signing secret: deliveries go out unsigned (or fail); receivers must refuse them."""
    from approvals.webhooks import webhook_secret_key

    config = toolhub_settings()
    if not config.WEBHOOK_URL:
        return []
    name = config.WEBHOOK_SECRET_ENV
    secret = os.environ.get(name, "")
    problem = f"{name} is not set: every delivery goes out unsigned"
    if secret:
        try:
            webhook_secret_key(secret)
            return []
        except ValueError as exc:
            problem = f"{name} cannot be used: {exc}"
    return [
        Warning(
            f"TOOLHUB['WEBHOOK_URL'] is set but {problem}; a receiver cannot tell toolhub's deliveries from anyone's.",
            hint=f"Set {name} on every worker to the receiver's secret (Standard Webhooks: 'whsec_' and base64), "
            "e.g. 'whsec_' followed by the output of `python -c 'import secrets, base64; "
            "print(base64.b64encode(secrets.token_bytes(32)).decode())'`.",
            id="approvals.W002",
        )
    ]
