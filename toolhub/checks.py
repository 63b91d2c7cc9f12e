"""System checks over the registered tools, reported by ``manage.py check`` at startup; every toolhub check's id.

The database's (``W006``-``W009``) are in ``toolhub.database_checks``, the deployment's (``W004``, ``W010``-``W013``,
``W015``-``W016``) in ``toolhub.deployment_checks``, the pooler's (``W014``) in ``toolhub.db_pooler``.

=============  ==========================================================================
toolhub.E001   a tool's parameters have no JSON Schema (an unsupported type)
toolhub.E002   ``compensate_with`` names a tool that is not registered
toolhub.E003   two tool names differ only in case or in ``-``/``_`` (duplicates to a model)
toolhub.E004   a ``strict=True`` tool has a schema strict mode cannot express
toolhub.E005   a registered context type is a parameter the model fills in (it would set the context)
toolhub.E006   ``compensate_with`` is neither a tool's name, a ``Tool`` nor an ``@tool`` function (or is itself)
toolhub.E007   a ``needs_approval`` rule cannot be called as ``rule(arguments, ctx)`` (or is async: never awaited)
toolhub.E008   ``AUTH_USER_MODEL`` lacks what authorization reads and watches (``is_active``, ``is_superuser``, ...)
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
toolhub.W015   ``--deploy``: ``SESSION_ENGINE`` is not ``toolhub.session_store`` (sessions not ended, keys in clear)
toolhub.W016   ``--deploy``: ``SessionCredentialMiddleware`` missing or before ``AuthenticationMiddleware``
=============  ==========================================================================

Compensations are checked in ``toolhub.sagas.checks`` (``toolhub.E101``-``E103``, ``W101``: a mapping that cannot
be satisfied or called, a sensitive value copied, a compensation not idempotent), saved approval rules and the
webhook's signing secret in ``approvals.checks`` (``approvals.W001``, with ``--database``; ``approvals.W002``,
``--deploy``), the built-in tools in ``toolhub.builtins.checks``.

Exact duplicate names never get this far: the registry refuses the second tool at startup.
"""

import inspect
from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.context import context_key_named
from toolhub.tools.context_types import is_context_type
from toolhub.tools.definition import Tool
from toolhub.tools.definition_rules import confusable_key, is_async_callable
from toolhub.tools.linear_patterns import backtracking_patterns, backtracking_refusal
from toolhub.tools.presets import Secret
from toolhub.tools.registry import registry
from toolhub.tools.typechecks import context_type_exposures

#: The longest user model label a message repeats (it comes from settings).
_LABEL_SHOWN = 80


@register("toolhub")
def check_user_model(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The user model must carry the rights toolhub reads and watches: active and superuser flags, groups, permissions.

    Authorization caches a user's flags, groups and permissions behind the governance stamp, and the stamp's
    triggers sit on the user model's own tables (``toolhub.account_tables``); a model without them would be read
    as nothing deactivates or demotes, so it is refused at startup rather than trusted.
    """
    from django.conf import settings

    from toolhub.account_tables import account_model_problems

    problems = account_model_problems()
    if not problems:
        return []
    label = str(settings.AUTH_USER_MODEL)[:_LABEL_SHOWN]
    return [
        Error(
            f"The user model {label!r} has {', '.join(problems)}: toolhub cannot read or watch its users' rights.",
            hint="Derive the user model from django.contrib.auth.models.AbstractUser (or AbstractBaseUser with "
            "PermissionsMixin and an is_active BooleanField).",
            id="toolhub.E008",
        )
    ]


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
