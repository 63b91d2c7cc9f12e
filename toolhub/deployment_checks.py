"""``manage.py check --deploy``: the audit key, and what Django's own deploy checks leave open.

``toolhub.W004``, ``W010``-``W013``, ``W015`` and ``W016``, listed in ``toolhub.checks`` (``W014`` is
``toolhub.db_pooler``'s).
"""

import os
from importlib import import_module
from typing import Any
from urllib.parse import urlsplit

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Warning, register
from django.utils.module_loading import import_string

from toolhub.conf import toolhub_settings

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
    """What Django's own deploy checks leave open: any Host believed, a CSRF origin over http, the demo, the sessions.

    ``*`` lets a forged Host header (``USE_X_FORWARDED_HOST``'s too) into the absolute links built from a request (the
    API's next pages); an ``http://`` origin trusts forms posted from a page anyone on the path can
    change; the demo app brings ``load_demo`` (its users and grants) and ``generate_calls`` (synthetic history in the
    audit trail) to a real database; console sessions kept or asked otherwise than toolhub promises (``W015``,
    ``W016``: :func:`_console_sessions`).
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
    found.extend(_console_sessions())  # W015, W016
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


#: The session engine toolhub's promises about console sessions rest on (``toolhub.settings``).
SESSION_ENGINE = "toolhub.session_store"


def _toolhub_sessions(engine: str) -> bool:
    """Whether ``engine`` (a ``SESSION_ENGINE``) stores sessions in ``toolhub.session_store``'s way (or is it)."""
    from toolhub.session_store import SessionStore

    try:
        store = getattr(import_module(engine), "SessionStore", None)
    except ImportError:
        return False  # Django answers the first request with the error; here it is another engine, warned of
    return isinstance(store, type) and issubclass(store, SessionStore)


#: The middleware that marks a console session's user with its session, and the one whose user it marks.
CREDENTIAL_MIDDLEWARE = "toolhub.credentials.SessionCredentialMiddleware"
AUTHENTICATION_MIDDLEWARE = "django.contrib.auth.middleware.AuthenticationMiddleware"


def _middleware_class(name: str) -> type | None:
    """The class a ``MIDDLEWARE`` entry names, or ``None`` when it is none (Django reports that one itself)."""
    try:
        found = import_string(name)
    except ImportError:
        return None
    return found if isinstance(found, type) else None


def _session_user_marked(middleware: list[str]) -> bool:
    """Whether the session's user the request ends up with is the one ``SessionCredentialMiddleware`` marked.

    By class, not by path: a subclass of either is one (a deployment's own authentication middleware sets
    ``request.user`` as Django's does), so a credential middleware must come after every authentication one.
    """
    from django.contrib.auth.middleware import AuthenticationMiddleware

    from toolhub.credentials import SessionCredentialMiddleware

    classes = [_middleware_class(name) for name in middleware]
    marking = [at for at, cls in enumerate(classes) if cls is not None and issubclass(cls, SessionCredentialMiddleware)]
    setting = [at for at, cls in enumerate(classes) if cls is not None and issubclass(cls, AuthenticationMiddleware)]
    return bool(marking) and (not setting or max(marking) > max(setting))


def _console_sessions() -> list[CheckMessage]:
    """Console sessions kept elsewhere than ``toolhub.session_store``, or never asked again, lose what it promises.

    Its table holds keys' digests, ``sessions_end`` ends an account's sessions from it (a password changed, the
    console taken away or given back, the account deleted) and the rights' re-read asks a session in the user's
    statement; under Django's own stores nothing ends a session but its expiry (one refused while its account was no
    staff signs in again once staff is given back), and its database stores keep every cookie in clear. Without
    ``SessionCredentialMiddleware`` after every ``AuthenticationMiddleware`` (subclasses of either too: one listed
    later sets ``request.user`` again, unmarked) a session's user carries no check, so an export or a wait through a
    session ended meanwhile goes on (``toolhub.credentials``).
    """
    found: list[CheckMessage] = []
    engine = str(settings.SESSION_ENGINE)
    if not _toolhub_sessions(engine):
        found.append(
            Warning(
                f"SESSION_ENGINE is {engine[:200]!r}: console sessions are not ended when their account's password "
                "changes, its console is taken away or given back, or it is deleted, and a database store keeps "
                "each cookie's key in clear.",
                hint=f"Set SESSION_ENGINE = {SESSION_ENGINE!r} (toolhub.settings' value), or a store subclassing "
                f"{SESSION_ENGINE}.SessionStore.",
                id="toolhub.W015",
            )
        )
    if not _session_user_marked(list(settings.MIDDLEWARE)):
        found.append(
            Warning(
                f"MIDDLEWARE does not hold {CREDENTIAL_MIDDLEWARE} after {AUTHENTICATION_MIDDLEWARE} and every "
                "subclass of it: a console session ended or expired while its request waited (an export, a ?wait=) "
                "is not asked again, and the request goes on answering its user.",
                hint=f"Put {CREDENTIAL_MIDDLEWARE!r} (or a subclass of it) right after the last authentication "
                f"middleware ({AUTHENTICATION_MIDDLEWARE!r} or your own subclass of it), as toolhub.settings does.",
                id="toolhub.W016",
            )
        )
    return found
