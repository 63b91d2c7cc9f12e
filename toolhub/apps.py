"""The core app: autodiscovers tools, freezes the registry, keeps the catalogue in step."""

from typing import Any

from django.apps import AppConfig, apps
from django.apps.registry import Apps
from django.contrib.admin.apps import AdminConfig
from django.db.backends.signals import connection_created
from django.db.models.signals import post_migrate, pre_migrate

from toolhub.governance import governance_watch


class ToolhubAdminConfig(AdminConfig):
    """``django.contrib.admin`` (in INSTALLED_APPS in its place), its ``admin.site`` toolhub's (toolhub.admin_site)."""

    default_site = "toolhub.admin_site.ToolhubAdminSite"


class ToolhubConfig(AppConfig):
    name = "toolhub"
    verbose_name = "Tools and audit"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from toolhub import (
            checks,  # noqa: F401 - registers the system checks
            database_checks,  # noqa: F401 - registers the checks of saved rows and roles
            db_pooler,  # noqa: F401 - registers the pooler's deploy check (toolhub.W014)
            deployment_checks,  # noqa: F401 - registers the deploy checks (audit key, hosts, origins)
            login_guard,  # noqa: F401 - audits login lockouts
        )
        from toolhub.conf import toolhub_settings

        toolhub_settings()  # validated once, before anything reads it; a bad value fails startup, naming the key
        from toolhub.interceptors import configured_interceptors
        from toolhub.tools.registry import autodiscover, registry

        if not registry.frozen:
            from toolhub.disclosure.meta import META_TOOLS

            for meta_tool in META_TOOLS:  # the core's own tools: tool_search, reset_equipped_tools
                registry.register(meta_tool)
            from toolhub.mcp_client.provider import remote_tool_provider

            registry.add_provider(remote_tool_provider)  # remote MCP tools, accepted by administrators at run time
            autodiscover([config.name for config in apps.get_app_configs()])
        configured_interceptors()  # built once, beside the frozen registry; a bad entry fails startup
        from toolhub.admin_visible import install

        install()  # the admin draws invisible and bidi characters of stored text written out (``toolhub.visible``)
        from toolhub.api import tokens

        tokens.install()  # a token is named by whose it is, never by its key (the credential)
        from toolhub.api import token_revocation

        token_revocation.install()  # a new password or a deactivation deletes the account's API tokens
        from toolhub.api import token_use

        token_use.install()  # a token being deleted is locked before its use row goes (no stamp slips in between)
        from toolhub.api import token_binding

        token_binding.install()  # a token is bound to its user's password when made, refused under another
        from toolhub.db_pooler import connection_chunked_reads
        from toolhub.db_timeouts import connection_bounded, migrate_unbounded

        connection_created.connect(connection_bounded, dispatch_uid="toolhub.db_timeouts.connection_bounded")
        connection_created.connect(connection_chunked_reads, dispatch_uid="toolhub.db_pooler.connection_chunked_reads")
        pre_migrate.connect(migrate_unbounded, sender=self, dispatch_uid="toolhub.db_timeouts.migrate_unbounded")
        pre_migrate.connect(_binding_triggers_migrating, sender=self)
        post_migrate.connect(_sync_catalogue, sender=self)
        post_migrate.connect(_install_governance_triggers, sender=self)
        post_migrate.connect(_install_binding_triggers, sender=self)
        post_migrate.connect(_capability_permissions, sender=self)
        post_migrate.connect(_app_role_rights, sender=self)  # last: after whatever the handlers above create
        for table, events in GOVERNANCE_TABLES.items():
            governance_watch(table, events=events)


#: The core's tables that decide who may call what; a change to any of them stamps a new governance version.
#: With the accounts' tables (``toolhub.governance.governance_watched_tables``).
GOVERNANCE_TABLES = {
    "toolhub_tooldefinition": "INSERT OR UPDATE OR DELETE",
    "toolhub_toolgroup": "INSERT OR UPDATE OR DELETE",
    "toolhub_grant": "INSERT OR UPDATE OR DELETE",
    "toolhub_tenant": "INSERT OR UPDATE OR DELETE",
    # A deleted tenant's slug: nothing runs in it any more (toolhub.authorization._standing_refusal).
    "toolhub_retiredtenantslug": "INSERT OR UPDATE OR DELETE",
    # Who may still act in a tenant: memberships, and below the active flag (toolhub.authorization._standing_refusal).
    "toolhub_tenantmembership": "INSERT OR UPDATE OR DELETE",
    # The accounts' tables (users' superuser and active flags, groups, permissions, groups' permissions) are named
    # from AUTH_USER_MODEL's models where they are read: toolhub.account_tables.account_governance_tables.
    # Remote MCP tools (toolhub.mcp_client): accepted definitions, quarantines, servers and credentials.
    "toolhub_remotemcpserver": "INSERT OR UPDATE OR DELETE",
    "toolhub_remotemcptool": "INSERT OR UPDATE OR DELETE",
    "toolhub_remotemcpcredential": "INSERT OR UPDATE OR DELETE",
}


def _schema_current(migrated_apps: Apps | None, *models: str) -> bool:
    """Whether the migrated state holds these models with every column today's code reads.

    ``post_migrate`` also follows a migration back (``migrate toolhub 0001`` or ``zero`` during a failed
    upgrade): the state it passes (``apps``, the documented way to see the models as migrated) then lacks
    tables or columns the current models query, so there is nothing to keep in step until the next
    ``migrate`` forward runs the handler again.
    """
    for label in models:
        try:
            migrated = (migrated_apps or apps).get_model(label)
        except LookupError:
            return False
        columns = {field.column for field in migrated._meta.concrete_fields}
        if not {field.column for field in apps.get_model(label)._meta.concrete_fields} <= columns:
            return False
    return True


def _install_governance_triggers(using: str = "default", **kwargs: Any) -> None:
    from django.db import connections

    from toolhub.governance import governance_triggers_install

    governance_triggers_install(connections[using])


def _install_binding_triggers(using: str = "default", **kwargs: Any) -> None:
    """A deactivation by ``update`` or SQL ends the account's tokens (``toolhub.api.token_binding``)."""
    from django.db import connections

    from toolhub.api.token_binding import binding_triggers_install

    binding_triggers_install(connections[using])


def _binding_triggers_migrating(using: str = "default", **kwargs: Any) -> None:
    """SQLite: no binding trigger while migrations run (a table rebuild fails on it); ``post_migrate`` installs it."""
    from django.db import connections

    from toolhub.api.token_binding import binding_triggers_migrating

    binding_triggers_migrating(connections[using])


def _app_role_rights(using: str = "default", **kwargs: Any) -> None:
    """The application role's rights on the tables as migrated now: append-only on re-created audit tables too.

    Migrated back, the audit tables may lack columns the grants name; the next ``migrate`` forward grants.
    """
    audit = ("toolhub.AuditEvent", "toolhub.AuditCheckpoint", "toolhub.AuditChainHead", "toolhub.AuditVerification")
    if not _schema_current(kwargs.get("apps"), *audit):
        return
    from toolhub.dbroles import db_app_roles_refresh

    db_app_roles_refresh(using)


def _capability_permissions(**kwargs: Any) -> None:
    """Every capability a group names has its permission, also for groups saved before capabilities were enforced."""
    if not _schema_current(kwargs.get("apps"), "toolhub.ToolGroup", "auth.Permission", "contenttypes.ContentType"):
        return
    from toolhub.disclosure.capabilities import capability_name_problem, capability_permissions_ensure
    from toolhub.models import ToolGroup

    for capabilities in ToolGroup.objects.values_list("capabilities", flat=True):
        if capabilities and capability_name_problem(capabilities) is None:
            capability_permissions_ensure(capabilities)


def _sync_catalogue(**kwargs: Any) -> None:
    if not _schema_current(kwargs.get("apps"), "toolhub.ToolDefinition"):
        return
    from toolhub.catalogue import tool_catalogue_sync

    tool_catalogue_sync()
