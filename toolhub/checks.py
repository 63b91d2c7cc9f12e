"""System checks over the registered tools, reported by ``manage.py check`` at startup (and the audit key's).

=============  ==========================================================================
toolhub.E001   a tool's parameters have no JSON Schema (an unsupported type)
toolhub.E002   ``compensate_with`` names a tool that is not registered
toolhub.E003   two tool names differ only in case or in ``-``/``_`` (duplicates to a model)
toolhub.E004   a ``strict=True`` tool has a schema strict mode cannot express
toolhub.E005   a registered context type is a parameter the model fills in (it would set the context)
toolhub.E006   ``compensate_with`` is neither a tool's name, a ``Tool`` nor an ``@tool`` function (or is itself)
toolhub.E007   a ``needs_approval`` rule cannot be called as ``rule(arguments, ctx)`` (or is async: never awaited)
toolhub.W001   a tool does not declare its risk level (it is treated as low)
toolhub.W002   a preset secret is set neither in the settings nor in the environment
toolhub.W003   a ``FromContext`` parameter's class is not a registered context type (its calls fail)
toolhub.W004   ``--deploy``: the audit key is unset, shorter than 32 characters or the ``SECRET_KEY``
toolhub.W005   a parameter the model fills in is named like a context key toolhub sets (``user_id``, ``ctx``, ...)
toolhub.W006   ``--database``: a saved grant or tool group names a tool the code no longer has
toolhub.W007   ``--database``: a saved model provider or remote MCP credential names a variable now refused
toolhub.W008   ``--database``: an application role may change the audit trail through a role it is a member of
toolhub.W009   ``--database``: a role an earlier ``toolhub_db_roles`` set up lacks its mark (``migrate`` skips it)
toolhub.W010   ``--deploy``: ``ALLOWED_HOSTS`` holds ``*`` (any Host header is believed)
toolhub.W011   ``--deploy``: a ``CSRF_TRUSTED_ORIGINS`` origin is plain ``http://``
toolhub.W012   ``--deploy``: the demo app is installed with DEBUG off (``TOOLHUB_DEMO=1``)
toolhub.W013   ``--deploy``: Celery tasks run eagerly with DEBUG off (no ``CELERY_BROKER_URL``): no workers, no beat
toolhub.W014   ``--deploy``: ``TRANSACTION_POOLER`` is on and neither role nor server sets the bounds (``db_pooler``)
=============  ==========================================================================

Compensations are checked in ``toolhub.sagas.checks`` (``toolhub.E101``-``E103``, ``W101``: a mapping that cannot
be satisfied or called, a sensitive value copied, a compensation not idempotent), saved approval rules and the
webhook's signing secret in ``approvals.checks`` (``approvals.W001``, with ``--database``; ``approvals.W002``,
``--deploy``), the built-in tools in ``toolhub.builtins.checks``.

Exact duplicate names never get this far: the registry refuses the second tool at startup.
"""

import inspect
import os
from typing import Any
from urllib.parse import urlsplit

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import DatabaseError, transaction
from django.db.models import Model, Q

from toolhub.conf import toolhub_settings
from toolhub.credential_env import credential_env_problem, credential_env_validator
from toolhub.exceptions import ToolDefinitionError
from toolhub.references import reference_warnings, saved_rows
from toolhub.tools.context import context_key_named
from toolhub.tools.context_types import is_context_type
from toolhub.tools.definition import Tool
from toolhub.tools.definition_rules import confusable_key, is_async_callable
from toolhub.tools.linear_patterns import backtracking_patterns, backtracking_refusal
from toolhub.tools.presets import Secret
from toolhub.tools.registry import registry
from toolhub.tools.typechecks import context_type_exposures


@register("toolhub")
def check_tools(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every tool must have a buildable schema, a declared risk and a real compensation target."""
    problems: list[CheckMessage] = []
    tools = registry.code_tools()  # remote tools are checked when an administrator accepts them
    for tool in tools:
        try:
            tool.json_schema  # noqa: B018 - building it is the check
        except ToolDefinitionError as exc:
            problems.append(
                Error(
                    str(exc),
                    hint="Use types pydantic validates from JSON (primitives, models, dataclasses, TypedDict, ...).",
                    obj=tool.name,
                    id="toolhub.E001",
                )
            )
            continue
        patterns = [found for schema in tool.inputs.core_schemas() for found in backtracking_patterns(schema)]
        refusal = backtracking_refusal(tool.name, patterns)
        if refusal:
            problems.append(Error(f"{refusal}; its calls are refused.", obj=tool.name, id="toolhub.E001"))
            continue
        try:
            compensate_with = tool.compensate_with
        except ToolDefinitionError as exc:
            problems.append(
                Error(
                    str(exc),
                    hint="Pass compensate_with= the compensating tool's name, its Tool, or its @tool function; "
                    "or decorate the compensation with @<tool>.compensation.",
                    obj=tool.name,
                    id="toolhub.E006",
                )
            )
            compensate_with = None
        if compensate_with and compensate_with not in registry:
            problems.append(
                Error(
                    f"Tool {tool.name!r} is compensated by {compensate_with!r}, which is not a registered tool.",
                    hint="Define the compensating tool in a tools.py, or fix the name in compensate_with=.",
                    obj=tool.name,
                    id="toolhub.E002",
                )
            )
        if callable(tool.needs_approval) and not _callable_with(tool.needs_approval, 2):
            problems.append(
                Error(
                    f"Tool {tool.name!r}: its needs_approval rule cannot be called as rule(arguments, ctx)"
                    + (
                        " and return its answer: it is async, so it returns a coroutine, never awaited, and every "
                        "call is held as if it matched."
                        if is_async_callable(tool.needs_approval)
                        else "."
                    ),
                    hint="Give it two positional parameters (the validated arguments and the ToolContext), define it "
                    "with def (not async def), and make it return a reason (str) when the call needs approval, "
                    "else None.",
                    obj=tool.name,
                    id="toolhub.E007",
                )
            )
        if tool.strict:
            try:
                tool.strict_json_schema  # noqa: B018
            except ToolDefinitionError as exc:
                problems.append(
                    Error(
                        str(exc),
                        hint="Replace dict parameters by a pydantic model or TypedDict, or drop strict=True.",
                        obj=tool.name,
                        id="toolhub.E004",
                    )
                )
        if not tool.risk_declared:
            problems.append(
                Warning(
                    f"Tool {tool.name!r} does not declare a risk level; it is treated as low risk.",
                    hint="Pass risk= to @tool (low, medium, high or critical); high and critical need approval.",
                    obj=tool.name,
                    id="toolhub.W001",
                )
            )
        for parameter, preset in tool.presets.items():
            if isinstance(preset, Secret) and preset.resolve() is None:
                problems.append(
                    Warning(
                        f"Tool {tool.name!r}: secret {preset.name!r} (parameter {parameter!r}) is not set; "
                        "calls will fail until it is.",
                        hint=f"Set the Django setting or the environment variable {preset.name} where workers run.",
                        obj=tool.name,
                        id="toolhub.W002",
                    )
                )
    problems.extend(_confusable_names([tool.name for tool in tools]))
    problems.extend(context_injection_problems(tools))
    problems.extend(context_named_problems(tools))
    return problems


def context_named_problems(tools: list[Tool]) -> list[CheckMessage]:
    """A parameter the model fills in, named as what the boundary sets: read as the caller's, it is the model's.

    ``user_id: int`` (or ``ctx: dict``) is the model's choice, whatever the name says; the caller's own are read
    from the injected ``ToolContext``. Tenant arguments are left out: the pipeline refuses any but the caller's own.
    """
    return [
        Warning(
            f"Tool {tool.name!r}, parameter {spec.name!r}: the model fills it in, but its name says it is the "
            f"caller's context ({key!r}), which toolhub sets from the authenticated caller; nothing checks the "
            "model's value.",
            hint="To read the caller's, take ctx: ToolContext (ctx.user_id, ctx['agent'], ...); for a value the model "
            "chooses, name the parameter for what it is (e.g. 'customer_id').",
            obj=tool.name,
            id="toolhub.W005",
        )
        for tool in tools
        for spec in tool.parameters
        for key in [context_key_named(spec.name)]
        if key is not None
    ]


def context_injection_problems(tools: list[Tool]) -> list[CheckMessage]:
    """Context types reach tools only by injection, never as parameters the model fills in."""
    problems: list[CheckMessage] = []
    for tool in tools:
        for parameter, context_class in context_type_exposures(tool.parameters):
            name = context_class.__qualname__
            problems.append(
                Error(
                    f"Tool {tool.name!r}, parameter {parameter!r}: {name} is a registered context type, but the "
                    "model fills this parameter in, so it could set the context.",
                    hint=f"Annotate the parameter Annotated[{name}, FromContext] (a whole parameter, not nested).",
                    obj=tool.name,
                    id="toolhub.E005",
                )
            )
        for injected in tool.injected:
            if injected.kind == "context_object" and not is_context_type(injected.annotation):
                name = getattr(injected.annotation, "__qualname__", repr(injected.annotation))
                problems.append(
                    Warning(
                        f"Tool {tool.name!r}, parameter {injected.name!r}: {name} is marked FromContext but is not a "
                        "registered context type; its calls fail until it is.",
                        hint=f"Call register_context_type({name}) (e.g. as a class decorator) in the app's tools.py.",
                        obj=tool.name,
                        id="toolhub.W003",
                    )
                )
    return problems


def _callable_with(fn: Any, count: int) -> bool:
    """Whether ``fn(*count arguments)`` binds and gives its answer (an async function gives a coroutine)."""
    if is_async_callable(fn):
        return False
    try:
        inspect.signature(fn).bind(*([None] * count))
    except TypeError:
        return False
    except ValueError:
        return True  # builtins without a signature: trust them
    return True


def _confusable_names(names: list[str]) -> list[CheckMessage]:
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(confusable_key(name), []).append(name)
    return [
        Error(
            f"Tool names {', '.join(sorted(same))} differ only in case or '-'/'_'; models confuse them.",
            hint="Rename all but one of them (name= on @tool, or naming= on tools_from_instance).",
            obj=sorted(same)[0],
            id="toolhub.E003",
        )
        for same in groups.values()
        if len(same) > 1
    ]


@register("toolhub", Tags.database)
def check_governance_references(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Grants and groups saved before a tool left the code still name it: say so (``toolhub.references``).

    Read from the database, so only with ``--database`` (``manage.py check --database default``, ``migrate``).
    """
    if not databases:
        return []
    from toolhub.models import Grant, ToolGroup

    related = ("tool_group", "user", "group", "tenant", "agent_tenant")
    # By key: a Grant has no ordering, and the check's message (which rows it names, past the bound) must not
    # change from one run to the next.
    rows = saved_rows(
        lambda: [*Grant.objects.select_related(*related).order_by("pk"), *ToolGroup.objects.order_by("pk")]
    )
    return reference_warnings(
        ((row, row.reference_problems()) for row in rows),
        check_id="toolhub.W006",
        hint="Fix or delete the row in the admin (Grants, Tool groups); it was saved before the code changed.",
    )


def credential_models() -> list[tuple[type[Model], list[str]]]:
    """The models with a credential reference, and those fields: every field validated by ``credential_env``."""
    found = []
    for model in apps.get_models():
        if model._meta.proxy:
            continue  # its concrete model's rows, reported once
        fields = [field.name for field in model._meta.concrete_fields if credential_env_validator in field.validators]
        if fields:
            found.append((model, fields))
    return found


@register("toolhub", Tags.database)
def check_credential_references(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Rows saved before their variable was refused (a tool's ``Secret`` reads it since, a release refuses it).

    Such a row is not read (``credential_from_env``): its runs or calls fail "not configured", the reason only in
    the log. Read from the database, so only with ``--database`` (``manage.py check --database default``, ``migrate``):
    each variable named is judged once, and only the rows naming a refused one are read.
    """
    if not databases:
        return []
    rows = [found for model, fields in credential_models() for found in _refused_credential_rows(model, fields)]
    return reference_warnings(
        rows,
        check_id="toolhub.W007",
        hint='Its runs or calls fail "not configured" until then: set the endpoint\'s key in a variable of its own '
        "on the web and worker processes and name it on the row's admin page (Model providers, Remote MCP "
        "credentials).",
    )


def _refused_credential_rows(model: type[Model], fields: list[str]) -> list[tuple[Model, dict[str, str]]]:
    """``model``'s rows naming a refused variable in one of ``fields``, each with why (field: problem), by key."""
    refused: dict[str, dict[str, str]] = {}
    for field in fields:
        named = saved_rows(
            lambda field=field: model._default_manager.order_by().values_list(field, flat=True).distinct()
        )
        problems = {value: problem for value in named if value and (problem := credential_env_problem(value))}
        if problems:
            refused[field] = problems
    if not refused:
        return []
    naming = Q.create([(f"{field}__in", list(problems)) for field, problems in refused.items()], connector=Q.OR)
    found = saved_rows(lambda: model._default_manager.select_related().filter(naming).order_by("pk"))
    return [
        (
            row,
            {
                field: f"{value!r}: {problems[value]}"
                for field, problems in refused.items()
                if (value := getattr(row, field)) in problems
            },
        )
        for row in found
    ]


@register("toolhub", Tags.database)
def check_app_roles(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Whether the PostgreSQL application roles are still append-only on the audit trail, and all marked (``dbroles``).

    Read from the database, so only with ``--database`` (``manage.py check --database default``, ``migrate``).
    """
    from toolhub.dbroles import db_app_roles_exposed, db_app_roles_unmarked

    found: list[CheckMessage] = []
    for alias in databases or []:
        try:
            with transaction.atomic(using=alias):  # a savepoint: a refused read leaves the connection usable
                exposed_roles, unmarked_roles = db_app_roles_exposed(alias), db_app_roles_unmarked(alias)
        except DatabaseError as error:
            # ``migrate`` runs the checks first: a role that may not read the catalogs must still migrate.
            refused = str(
                getattr(getattr(error.__cause__, "diag", None), "message_primary", "") or type(error).__name__
            )
            found.append(
                Warning(
                    f"The application roles of database {alias!r} could not be checked: {refused[:200]}.",
                    hint=f"Run `manage.py check --database {alias}` as the owner of the tables (or a role that may "
                    "read pg_default_acl and role comments) to check them.",
                    id="toolhub.W008",
                )
            )
            continue
        found += [
            Warning(
                f"{exposed} (database {alias!r}).",
                hint="A membership granted after toolhub_db_roles lends the role its rights, and migrate narrows only "
                "grants on the audit tables: revoke the membership (or the rights) as the owner.",
                id="toolhub.W008",
            )
            for exposed in exposed_roles
        ]
        found += [
            Warning(
                f"Role {role!r} was set up by an earlier toolhub_db_roles (database {alias!r}) and lacks its mark: "
                "migrate no longer grants it the rights on tables a migration adds or re-creates.",
                hint=f"Run `manage.py toolhub_db_roles --role {role}` as the owner once. If a DBA set this role up "
                "(not toolhub), add toolhub.W009 to SILENCED_SYSTEM_CHECKS.",
                id="toolhub.W009",
            )
            for role in unmarked_roles
        ]
    return found


#: An HMAC key anyone may not guess: as long as Django asks of its SECRET_KEY (security.W009: 50).
MIN_AUDIT_KEY_LENGTH = 32


@register("toolhub", deploy=True)
def check_audit_key(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The key that signs checkpoints stands outside the database: without a strong one, nothing checks the trail.

    Unset, beat stores no checkpoint and ``verify_audit`` passes on a cut tail; a short or known one (the README's
    placeholder) lets whoever reads a checkpoint row sign their own; the ``SECRET_KEY`` serves other ends.
    """
    name = toolhub_settings().AUDIT_KEY_ENV
    key = os.environ.get(name, "").strip()  # as it is read (``toolhub.audit_keys.signing_key``)
    if not key:
        problem = "is not set: no audit checkpoint is ever signed, so a truncated trail goes unseen"
    elif len(key) < MIN_AUDIT_KEY_LENGTH:
        problem = f"is shorter than {MIN_AUDIT_KEY_LENGTH} characters: a checkpoint's signature can be forged"
    elif key == settings.SECRET_KEY:
        problem = "is the DJANGO_SECRET_KEY: one key for two ends"
    elif any(char.isspace() for char in key):
        problem = (
            "holds whitespace inside: it is refused (nothing is signed, exports leave unsigned), as a rotation could "
            f"never retire it in {toolhub_settings().AUDIT_RETIRED_KEYS_ENV}"
        )
    else:
        return []
    return [
        Warning(
            f"{name} {problem}.",
            hint=f"Set {name} to a long random value kept outside the database, e.g. the output of "
            "`python -c 'import secrets; print(secrets.token_urlsafe(48))'`, the same on beat and every worker.",
            id="toolhub.W004",
        )
    ]


#: How many offending values one message names (the rest are counted).
SHOWN_VALUES = 3


def _named(values: list[str]) -> str:
    shown = ", ".join(repr(value[:100]) for value in values[:SHOWN_VALUES])
    return shown + (f" and {len(values) - SHOWN_VALUES} more" if len(values) > SHOWN_VALUES else "")


def _spans_a_top_level_domain(pattern: str) -> bool:
    """Whether a subdomain pattern (``.com``, Django's for ALLOWED_HOSTS and a ``*`` origin's) takes a whole TLD.

    One label after the dot: ``.com`` matches every ``.com`` name. (A multi-label public suffix, ``.co.uk``, needs
    the public suffix list and is not named.)
    """
    domain = pattern.rpartition(":")[0] if pattern.count(":") == 1 else pattern
    return domain.startswith(".") and "." not in domain[1:].strip(".")


@register("toolhub", deploy=True)
def check_deployment_posture(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """What Django's own deploy checks leave open: any Host believed, a CSRF origin over http, the demo installed.

    ``*`` lets a forged Host header (``USE_X_FORWARDED_HOST``'s too) into the absolute links built from a request (the
    API's next pages); an ``http://`` origin trusts forms posted from a page anyone on the path can
    change; the demo app brings ``load_demo`` (its users and grants) and ``generate_calls`` (synthetic history in the
    audit trail) to a real database.
    """
    found: list[CheckMessage] = []
    spanning = [host for host in settings.ALLOWED_HOSTS if host.startswith(".") and _spans_a_top_level_domain(host)]
    if spanning:
        found.append(
            Warning(
                f"DJANGO_ALLOWED_HOSTS holds {_named(spanning)}: a Host header of any name in that whole top-level "
                "domain is believed, a forged one too.",
                hint="List the host names the site answers to, or a domain of your own (.example.com).",
                id="toolhub.W010",
            )
        )
    if "*" in settings.ALLOWED_HOSTS:
        found.append(
            Warning(
                "DJANGO_ALLOWED_HOSTS holds '*': any Host header is believed, and a forged one reaches the absolute "
                "links built from a request (the API's next pages).",
                hint="List the host names the site answers to, e.g. DJANGO_ALLOWED_HOSTS=toolhub.example.com.",
                id="toolhub.W010",
            )
        )
    plain = [origin for origin in settings.CSRF_TRUSTED_ORIGINS if origin.lower().startswith("http://")]
    if plain:
        found.append(
            Warning(
                f"DJANGO_CSRF_TRUSTED_ORIGINS trusts plain http origin(s) {_named(plain)}: a form posted from a page "
                "served over http, which anyone on the path can change, passes the CSRF check.",
                hint="Trust only the https:// origins the console is served from, e.g. "
                "DJANGO_CSRF_TRUSTED_ORIGINS=https://toolhub.example.com.",
                id="toolhub.W011",
            )
        )
    spanning = [
        origin
        for origin in settings.CSRF_TRUSTED_ORIGINS
        if "*" in origin and _spans_a_top_level_domain(urlsplit(origin).netloc.lstrip("*"))
    ]
    if spanning:
        found.append(
            Warning(
                f"DJANGO_CSRF_TRUSTED_ORIGINS trusts {_named(spanning)}: a form posted from any site of that whole "
                "top-level domain passes the CSRF check.",
                hint="Trust the console's own origin, or the subdomains of a domain of your own "
                "(https://*.example.com).",
                id="toolhub.W011",
            )
        )
    if not settings.DEBUG and apps.is_installed("demo"):
        found.append(
            Warning(
                "The demo app is installed with DEBUG off (TOOLHUB_DEMO=1): load_demo adds its users, roles and grants "
                "and generate_calls writes synthetic history into the audit trail of this database.",
                hint="Unset TOOLHUB_DEMO on a production server; on a throwaway demo, add toolhub.W012 to "
                "SILENCED_SYSTEM_CHECKS.",
                id="toolhub.W012",
            )
        )
    if not settings.DEBUG and getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False):
        found.append(
            Warning(
                "Celery tasks run eagerly, inside the process that sends them (CELERY_BROKER_URL unset, or "
                "CELERY_TASK_ALWAYS_EAGER on): tools run inside web requests without the workers' time limits, and "
                "no beat runs the sweepers, approval expiry or the audit checkpoints.",
                hint="Set CELERY_BROKER_URL (e.g. redis://redis.internal:6379/0) on every process, and run workers and "
                "exactly one beat (README, Production).",
                id="toolhub.W013",
            )
        )
    return found
