"""Which environment variables a credential reference (``credential_env``) may name, and reading one.

A model provider's or remote MCP server's credential is the value of a variable of the web and worker processes,
sent to an endpoint that the same people configure. Naming one of the platform's own secrets (``DJANGO_SECRET_KEY``,
``DATABASE_URL``, the checkpoint key ``TOOLHUB_AUDIT_KEY`` or the keys a rotation retired, a registered tool's
``Secret("STRIPE_KEY")`` preset) would send it to any host they choose: holding
``toolhub.cross_tenant`` is not reading the platform's environment. Such names are refused where they are typed
and again where the value is read (a row saved before, or by code), and ``TOOLHUB["CREDENTIAL_ENV_PREFIXES"]``
narrows the names further to the platform's own convention (e.g. ``["CRED_"]``: nothing else is read).
"""

import logging
import os

from django.core.exceptions import ValidationError

from toolhub.conf import toolhub_settings

__all__ = [
    "PLATFORM_ENV_NAMES",
    "PLATFORM_ENV_PREFIXES",
    "credential_env_problem",
    "credential_env_validator",
    "credential_from_env",
]

logger = logging.getLogger(__name__)

#: The beginnings of the names of the platform's own variables (its settings', its database's and broker's,
#: libpq's), never a credential an endpoint is sent.
PLATFORM_ENV_PREFIXES = ("DJANGO_", "DATABASE_", "CELERY_", "TOOLHUB_", "EMAIL_", "REDIS_", "POSTGRES", "PG")

#: Whole names (any case) of the platform's secrets that no prefix covers: the outbound proxy every HTTP client of
#: the platform reads (``http://user:password@proxy``: urllib for webhooks, httpx for models and MCP servers),
#: Django's conventional ``SECRET_KEY``, and the cloud identity the host's runtime gives the web and worker processes
#: (AWS keys and session tokens, the container credentials' token, an Azure service principal's secret): they sign
#: the platform's requests to its cloud and are never an endpoint's key (a vendor's own, ``AWS_BEARER_TOKEN_BEDROCK``
#: or ``AZURE_OPENAI_API_KEY``, is not here).
PLATFORM_ENV_NAMES = frozenset(
    {
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "SECRET_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "AZURE_CLIENT_SECRET",
        "AZURE_CLIENT_CERTIFICATE_PASSWORD",
    }
)


def credential_env_problem(name: str) -> str | None:
    """Why ``name`` may not be a credential's variable (one of the platform's, outside the allowed prefixes).

    The message says which rule refused it (the prefix, the name, the setting or the tool whose ``Secret`` reads it),
    not every rule: a provider reading ``OPENAI_API_KEY`` beside a tool whose preset reads it too is told that tool.
    """
    if not name:
        return None
    whose = _platform_owner(name.upper())
    if whose:
        return (
            f"This variable is one of the platform's own ({whose}): its value would be sent to the endpoint. Give the "
            "endpoint a variable of its own holding its key (the same key under another name if it is the same "
            "account) and name that one."
        )
    allowed = tuple(toolhub_settings().CREDENTIAL_ENV_PREFIXES)
    if allowed and not name.startswith(allowed):
        return f"A credential's variable name begins with {' or '.join(allowed)} here (the platform's setting)."
    return None


def _platform_owner(upper: str) -> str | None:
    """Which of the platform's rules claims the variable ``upper`` (its name in capitals), if one does."""
    prefix = next((prefix for prefix in PLATFORM_ENV_PREFIXES if upper.startswith(prefix)), None)
    if prefix:
        return f"names beginning with {prefix} are the platform's settings and services'"
    if upper in PLATFORM_ENV_NAMES:
        return f"{upper}: the outbound proxy's, Django's SECRET_KEY or the host's cloud credentials"
    current = toolhub_settings()
    # The variables the platform's settings name for its own secrets (every ``*_ENV`` setting: the checkpoint key,
    # the keys a rotation retired, the database password, the webhook's), whatever they are called here; read from
    # the settings themselves, so a new one is refused without a list to keep up to date.
    settings_names = {name: getattr(current, name) for name in type(current).model_fields if name.endswith("_ENV")}
    setting = next(
        (key for key, value in settings_names.items() if isinstance(value, str) and value and value.upper() == upper),
        None,
    )
    if setting:
        return f'TOOLHUB["{setting}"] names it'
    # Those its tools' ``Secret`` presets read: a tool's own key to its service, which no endpoint typed here gets.
    tools = _tools_reading(upper)
    if tools:
        shown = ", ".join(repr(name) for name in tools[:3]) + (f" and {len(tools) - 3} more" if len(tools) > 3 else "")
        return f"the Secret preset of the registered tool {shown} reads it"
    return None


def _tools_reading(upper: str) -> list[str]:
    """The registered tools (sorted) whose ``Secret`` presets read the variable ``upper``, compared in any case."""
    from toolhub.tools.presets import Secret
    from toolhub.tools.registry import registry

    return [
        tool.name
        for tool in registry.code_tools()
        if any(isinstance(preset, Secret) and preset.name.upper() == upper for preset in tool.presets.values())
    ]


def credential_env_validator(name: str) -> None:
    """The model fields' validator: :func:`credential_env_problem` as a form error."""
    if problem := credential_env_problem(name):
        raise ValidationError(problem, code="credential_env")


def credential_from_env(name: str) -> str:
    """The value of the credential variable ``name``; empty when unset or refused (the refusal goes to the log)."""
    if not name:
        return ""
    if problem := credential_env_problem(name):
        logger.error("credential variable %s refused, not read: %s", name, problem)
        return ""
    return os.environ.get(name, "")
