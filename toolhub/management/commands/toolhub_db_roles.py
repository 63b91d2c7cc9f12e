"""``manage.py toolhub_db_roles``: as the owner, after ``migrate``, set up the role the application connects with."""

import os
from typing import Any

from django.core.management.base import CommandError

from toolhub.conf import toolhub_settings
from toolhub.dbroles import APPEND_ONLY_PRIVILEGES, DatabaseRoleError, db_app_role_ensure
from toolhub.operator_command import OperatorCommand


class Command(OperatorCommand):
    help = (
        "Create or update the PostgreSQL role the web and workers connect with: read/write on every table, "
        "but only SELECT/INSERT on the audit trail, never the owner. Run it as the owner after the first migrate."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--role", help="Role name (default: TOOLHUB['DB_APP_ROLE'], 'toolhub_app').")
        parser.add_argument(
            "--password-env",
            help="Environment variable holding the role's password (default: TOOLHUB['DB_APP_PASSWORD_ENV'], "
            "'TOOLHUB_DB_APP_PASSWORD'); when it is unset the password is left as it is.",
        )
        parser.add_argument("--database", default="default", help="Database alias (default: 'default').")

    def handle(self, *args: Any, **options: Any) -> None:
        role = options["role"] or toolhub_settings().DB_APP_ROLE
        password_env = options["password_env"] or toolhub_settings().DB_APP_PASSWORD_ENV
        try:
            report = db_app_role_ensure(
                role=role, password=os.environ.get(password_env) or None, using=options["database"]
            )
        except DatabaseRoleError as exc:
            raise CommandError(str(exc)) from exc
        for warning in report.warnings:
            self.stderr.write(self.style.WARNING(warning))
        action = "created" if report.created else "updated"
        password = (
            f"password from {password_env}" if report.password_set else f"password unchanged: {password_env} unset"
        )
        audit = ", ".join(f"{table}: {privileges}" for table, privileges in APPEND_ONLY_PRIVILEGES.items())
        self.stdout.write(
            self.style.SUCCESS(
                f"Role {report.role} {action} ({password}) in database {report.database}, schema {report.schema}, "
                f"owned by {report.owner}: read/write on every table; audit tables {audit}. Marked as toolhub's "
                "application role (its comment): every migrate grants it these rights again."
                + (
                    f" Set on the role in this database: {', '.join(report.bounds)}; a server connection the pooler"
                    " opened before keeps what it started with until the pooler replaces it (PgBouncer: RECONNECT)."
                    if report.bounds
                    else ""
                )
            )
        )
