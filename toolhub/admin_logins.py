"""django-axes' pages (login failures, lockouts, logins) for people who cross the tenant boundary only.

A login attempt names a username and an address but no tenant, so tenant-scoped staff never see these pages
(:class:`CrossTenantOnly`). Deleting an attempt unlocks its (username, address) pair; that deletion is a governance
audit event on the platform's chain. ``manage.py axes_reset_username <name>`` unlocks from the shell.
"""

from axes.admin import AccessAttemptAdmin, AccessFailureLogAdmin, AccessLogAdmin
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin

from toolhub.admin_governance_audit import GovernanceAudited
from toolhub.admin_helpers import CrossTenantOnly


@admin.register(AccessAttempt)
class LoginAttemptAdmin(GovernanceAudited, CrossTenantOnly, AccessAttemptAdmin):
    audit_tenant_fields = ()
    audit_excluded_fields = ("password", "post_data", "get_data")


@admin.register(AccessLog)
class LoginLogAdmin(CrossTenantOnly, AccessLogAdmin):
    pass


@admin.register(AccessFailureLog)
class LoginFailureLogAdmin(CrossTenantOnly, AccessFailureLogAdmin):
    pass
