"""``manage.py load_demo``: demo users, a tenant, accounts and agents, safe to run again.

The demo's users are recognised by their ``USERNAME@example.com`` address: a person of a real database who
happens to be called ``alice`` or ``operator`` is never adopted (made a member of acme, an operator, given the
demo's permissions), nor stood beside by a demo user reading as them (``Admin``, ``ɑdmin`` beside the demo's
``admin``); the load is refused naming them, and changes nothing. The people, memberships and grants
it adds or changes are recorded as the admin records them (``governance.added`` / ``changed``).
"""

import getpass
import secrets
from decimal import Decimal
from typing import Any

from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.core.management import call_command
from django.core.management.base import CommandError, CommandParser
from django.db import transaction
from django.db.models import Model

from agents_app.models import SCRIPTED_PROVIDER_NAME, Agent, ModelProvider, ProviderKind
from demo.models import Account
from toolhub.confusable_names import reads_as_existing
from toolhub.disclosure.capabilities import capability_permissions_ensure
from toolhub.governance_trail import USER_TENANTS, Recorded, governance_append, governance_recorded, governance_tenants
from toolhub.models import Grant, GrantEffect, Tenant, TenantMembership, ToolGroup
from toolhub.operator_command import OperatorCommand

DEMO_PASSWORD_NOTE = (
    "Demo users (passwords are for local demos only): admin/admin, operator/operator, operator2/operator2, "
    "auditor/auditor, developer/developer, alice/alice."
)

#: One staff user per role (two operators, for requests that need two approvers); username -> role group.
ROLE_USERS = {"operator": "operators", "operator2": "operators", "auditor": "auditors", "developer": "developers"}
RANDOM_PASSWORD_NOTE = (
    "DEBUG is off, so the demo users got random passwords instead of the weak demo ones (admin/admin, ...). "
    "They are shown this once and stored only as hashes: "
)

ORDER_SCRIPT = [
    {
        "content": "",
        "tool_calls": [{"name": "create_order", "arguments": {"product": "Laptop", "amount": "5000"}}],
    },
    {"content": "Done. The order tool answered: {last_tool_result}"},
]

TRANSFER_SCRIPT = [
    {
        "content": "",
        "tool_calls": [
            {"name": "get_balance", "arguments": {"account_id": "ACC-1"}},
            {"name": "calculate", "arguments": {"a": 1000, "op": "/", "b": 4}},
        ],
    },
    {"content": "", "tool_calls": [{"name": "debit", "arguments": {"account_id": "ACC-1", "amount": "250"}}]},
    {
        "content": "",
        "tool_calls": [{"name": "credit", "arguments": {"account_id": "ACC-2", "amount": "250"}}],
    },
    {"content": "Moved 250 from ACC-1 to ACC-2: {last_tool_result}"},
]

ROLLBACK_SCRIPT = [
    {"content": "", "tool_calls": [{"name": "debit", "arguments": {"account_id": "ACC-1", "amount": "100"}}]},
    {"content": "", "tool_calls": [{"name": "credit", "arguments": {"account_id": "ACC-FROZEN", "amount": "100"}}]},
    {"content": "The transfer could not be completed and was rolled back: {last_tool_result}"},
]

#: The scripted demo agents, reset to these settings on every load.
SCRIPTED_AGENTS = {
    "order-demo": {
        "description": "Scripted: creates an order of 5000, which needs an operator's approval.",
        "script": ORDER_SCRIPT,
        "system_prompt": "You place orders for the user.",
        "tools": ["create_order", "get_order"],
    },
    "transfer-demo": {
        "description": "Scripted: checks a balance and moves money between two accounts.",
        "script": TRANSFER_SCRIPT,
        "system_prompt": "You move money between accounts.",
        "tools": ["get_balance", "calculate", "debit", "credit"],
    },
    "rollback-demo": {
        "description": "Scripted saga: debits ACC-1, fails to credit a frozen account, and is rolled back.",
        "script": ROLLBACK_SCRIPT,
        "system_prompt": "You move money between accounts.",
        "tools": ["debit", "credit"],
        "compensate_on_error": True,
    },
}


class Command(OperatorCommand):
    help = (
        "Load demo users, a tenant, ledger accounts and agents (idempotent). The weak demo passwords "
        "(admin/admin, ...) are set only with DEBUG on or --demo-passwords; otherwise new demo users get "
        "random passwords, printed once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--demo-passwords",
            action="store_true",
            help="Give the demo users their weak demo passwords (admin/admin, ...) even with DEBUG off.",
        )

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        weak = django_settings.DEBUG or options["demo_passwords"]
        strangers = _not_demo_users(["admin", *ROLE_USERS, "alice"])
        if strangers:
            raise CommandError(
                f"Users named {', '.join(strangers)} exist and are not demo users (their address is not "
                "USERNAME@example.com): load_demo would give them the demo's tenant, roles and permissions, or add a "
                "demo user whose name reads as theirs. Nothing was loaded; run it on a database of its own."
            )
        self.random_passwords: dict[str, str] = {}
        self.actor = f"command:{getpass.getuser()}"
        self.users_before: dict[str, Recorded | None] = {}
        tenant = self._recorded(Tenant, {"slug": "acme"}, {"name": "ACME Corp"}, fields=(), lookups=("slug",))

        admin = self._demo_user("admin", weak=weak, is_staff=True, is_superuser=True)
        # The roles (operators, auditors, developers) with exactly their permissions.
        call_command("toolhub_roles", verbosity=0)
        staff = []
        for username, role in ROLE_USERS.items():
            user = self._demo_user(username, weak=weak, is_staff=True)
            user.groups.add(Group.objects.get(name=role))
            staff.append(user)
        alice = self._demo_user("alice", weak=weak)
        for user in (admin, *staff, alice):
            self._recorded(TenantMembership, {"user": user, "tenant": tenant})

        groups = {
            "utilities": ("Clock and calculator.", []),
            "orders": ("Look up and place orders.", ["money_movement"]),
            "ledger": ("Balances, debits and credits.", ["money_movement"]),
        }
        for name, (description, capabilities) in groups.items():
            group = self._recorded(
                ToolGroup,
                {"name": name},
                {"description": description, "provider": "demo", "capabilities": capabilities},
                update=True,
                fields=(),
            )
            self._recorded(Grant, {"effect": GrantEffect.ALLOW, "tool_group": group, "tenant": tenant})
            # A group's capabilities are permissions its tools' callers must hold: the demo's users hold them.
            for permission in capability_permissions_ensure(capabilities):
                for user in (alice, *(user for user in staff if ROLE_USERS[user.username] == "operators")):
                    user.user_permissions.add(permission)

        for account_id, balance, frozen in (
            ("ACC-1", "1000.00", False),
            ("ACC-2", "500.00", False),
            ("ACC-FROZEN", "0", True),
        ):
            Account.objects.get_or_create(
                account_id=account_id,
                defaults={
                    "owner": "ACME",
                    "tenant": tenant.slug,
                    "balance": Decimal(balance),
                    "frozen": frozen,
                },
            )

        # Model endpoints are the administrators': agents only name a provider.
        scripted = self._recorded(
            ModelProvider,
            {"name": SCRIPTED_PROVIDER_NAME},
            {"kind": ProviderKind.SCRIPTED, "tenant": None, "enabled": True},
            update=True,
        )
        # An example of a real endpoint (Ollama). Disabled until an administrator enables it in the admin
        # and sets OLLAMA_API_KEY (any value for Ollama) in the web and worker environment.
        local = self._recorded(
            ModelProvider,
            {"name": "openai-local"},
            {
                "kind": ProviderKind.OPENAI,
                "base_url": "http://127.0.0.1:11434/v1",
                "model_name": "llama3.1",
                "credential_env": "OLLAMA_API_KEY",
                "deadline_seconds": 120.0,
                "enabled": False,
                # Ollama compiles tool schemas into a grammar: no $ref, no anyOf
                "schema_profile": "compact",
            },
        )
        for name in [*SCRIPTED_AGENTS, "assistant"]:
            # Databases from before agents had tenants hold the demo agents as global ones: move them to acme.
            if not Agent.objects.filter(name=name, tenant=tenant).exists():
                Agent.objects.filter(name=name, tenant__isnull=True).update(tenant=tenant)
        for name, settings in SCRIPTED_AGENTS.items():
            self._recorded(Agent, {"name": name, "tenant": tenant}, {"provider": scripted, **settings}, update=True)
        self._recorded(
            Agent,
            {"name": "assistant", "tenant": tenant},
            {
                "description": "A real model through the openai-local provider (Ollama; an administrator enables it).",
                "provider": local,
                "system_prompt": "You are a careful assistant for ACME's orders and ledger. Use the tools.",
                "tools": [
                    "current_time",
                    "days_between",
                    "calculate",
                    "get_order",
                    "create_order",
                    "get_balance",
                    "debit",
                    "credit",
                ],
            },
        )
        for user in (admin, *staff, alice):
            before = self.users_before[user.get_username()]
            tenants = governance_tenants(user, fields=(), lookups=USER_TENANTS)
            governance_append(user, "changed" if before else "added", actor=self.actor, tenants=tenants, before=before)
        self.stdout.write(self.style.SUCCESS(f"Demo data loaded. {self._password_note(weak)}"))

    def _recorded(
        self,
        model: type[Model],
        lookup: dict[str, Any],
        defaults: dict[str, Any] | None = None,
        *,
        update: bool = False,
        fields: tuple[str, ...] = ("tenant",),
        lookups: tuple[str, ...] = (),
    ) -> Any:
        """``get_or_create`` (``update_or_create`` with ``update``), recorded as the admin records the same change.

        ``fields`` and ``lookups`` name the row's tenants as the model's admin does (``GovernanceAudited``).
        """
        obj = model._default_manager.filter(**lookup).first()
        if obj is not None and not update:
            return obj
        before = None
        if obj is None:
            obj = model._default_manager.create(**lookup, **(defaults or {}))
        else:
            before = governance_recorded(obj, tenants=governance_tenants(obj, fields=fields, lookups=lookups))
            for name, value in (defaults or {}).items():
                setattr(obj, name, value)
            obj.save()
        tenants = governance_tenants(obj, fields=fields, lookups=lookups)
        governance_append(obj, "changed" if before else "added", actor=self.actor, tenants=tenants, before=before)
        return obj

    def _demo_user(self, username: str, *, weak: bool, **flags: bool) -> AbstractBaseUser:
        """The demo user ``username``; created with the weak demo password only when ``weak``.

        Without ``weak``, a new user gets a random password, and an existing one still holding the
        weak demo password (from an earlier demo load) gets a random one too; others are left alone.
        """
        users = get_user_model()
        user = users.objects.filter(username=username).first()
        self.users_before[username] = (
            governance_recorded(user, tenants=governance_tenants(user, fields=(), lookups=USER_TENANTS))
            if user
            else None
        )
        if user is None:
            user = users(username=username, email=_demo_email(username), **flags)
        elif weak or not user.check_password(username):
            return user
        if weak:
            user.set_password(username)
        else:
            self.random_passwords[username] = secrets.token_urlsafe(16)
            user.set_password(self.random_passwords[username])
        user.save()
        return user

    def _password_note(self, weak: bool) -> str:
        if weak:
            return DEMO_PASSWORD_NOTE
        if not self.random_passwords:
            return "DEBUG is off: the demo users kept their passwords (none is a weak demo password)."
        shown = ", ".join(f"{name}/{password}" for name, password in self.random_passwords.items())
        return RANDOM_PASSWORD_NOTE + shown + "."


def _demo_email(username: str) -> str:
    return f"{username}@example.com"


def _not_demo_users(usernames: list[str]) -> list[str]:
    """The names of existing users the demo did not make that are, or read as, one of ``usernames`` (sorted).

    A demo ``admin`` beside a real ``Admin`` or ``ɑdmin`` would read as that person on the desk and in the trail
    (``toolhub.confusable_names``), as a name chosen on the user pages may not.
    """
    users = get_user_model().objects
    held = dict(users.filter(username__in=usernames).values_list("username", "email"))
    strangers = {name for name, email in held.items() if email.lower() != _demo_email(name)}
    for name in usernames:
        own = users.filter(username=name).values_list("pk", flat=True).first()
        alike = reads_as_existing(name, other_than=own)
        if alike is not None and alike not in usernames:
            strangers.add(alike)
    return sorted(strangers)
