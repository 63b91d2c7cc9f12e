"""Approvals: operators approve, edit or reject calls that policy holds back."""

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from approvals import checks, receivers  # noqa: F401 - registers its check, connects to the core's signals
        from approvals.dashboard import approval_latency_figures
        from approvals.rules import database_rule_verdict
        from toolhub.dashboard import dashboard_figure
        from toolhub.governance import governance_watch
        from toolhub.policy import register_approval_rule_source

        register_approval_rule_source(database_rule_verdict)
        dashboard_figure(approval_latency_figures)
        # Rules are cached with the rest of governance: a changed rule applies to the next call.
        governance_watch("approvals_approvalrule")
