"""django-axes' pages (login failures, lockouts, logins) for people who cross the tenant boundary only.

A login attempt names a username and an address but no tenant, so tenant-scoped staff never see these pages
(:class:`CrossTenantOnly`). Deleting an attempt unlocks its (username, address) pair; that deletion is a governance
audit event on the platform's chain, naming the typed name only when it is an account's (it may be a password typed
in the wrong field), as the ``axes_reset*`` commands' (``toolhub.governed_commands``) are.

The logins and failures themselves are the record of who signed in or tried to, from where: read-only here, so no
one erases a break-in's trace from the console (``manage.py axes_reset_logs`` and
``axes_reset_failure_logs`` prune old ones from the shell).
"""

from axes.admin import AccessAttemptAdmin, AccessFailureLogAdmin, AccessLogAdmin
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin

from toolhub.admin_governance_audit import GovernanceAudited
from toolhub.admin_helpers import CrossTenantOnly, ReadOnlyMixin


@admin.register(AccessAttempt)
class LoginAttemptAdmin(GovernanceAudited, CrossTenantOnly, AccessAttemptAdmin):
    audit_tenant_fields = ()
    # Axes keeps the request's data (the typed password with it) when configured to; the typed name may be a
    # password typed in the wrong field: kept only when it is an account's (as the lockout event does).
    audit_excluded_fields = ("password", "post_data", "get_data")
    audit_account_fields = ("username",)


@admin.register(AccessLog)
class LoginLogAdmin(ReadOnlyMixin, CrossTenantOnly, AccessLogAdmin):
    pass


@admin.register(AccessFailureLog)
class LoginFailureLogAdmin(ReadOnlyMixin, CrossTenantOnly, AccessFailureLogAdmin):
    pass
