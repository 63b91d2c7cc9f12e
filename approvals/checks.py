"""``approvals.W001``: an enabled approval rule that can no longer match (``approvals.rule_checks``).

A rule saved before the code changed (a tool removed, a parameter renamed) is reported here and marked in the
rules' list; one naming its tool and a parameter it lost holds that tool's calls meanwhile (``rule_matches``).
"""

from typing import Any

from django.core.checks import CheckMessage, Tags, register

from toolhub.references import reference_warnings, saved_rows

__all__ = ["check_approval_rules"]


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
