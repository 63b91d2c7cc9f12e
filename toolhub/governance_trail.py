"""Governance events (``governance.added`` / ``changed`` / ``deleted``): one shape whichever door made the change.

The admin's ``GovernanceAudited`` mixin and services that change governing rows (``agents_app.services``'s
agent writes, behind the REST API) both append through :func:`governance_append`, so an auditor reads the same
event, with the same values (:func:`governance_values`), for a change made on an admin page or through the API.
Secrets (``excluded`` fields: a password's hash, a token's key) never reach an event; a change to one is recorded
as ``{"changed": true}`` only, and a row's label or id that shows one is redacted. A URL column is recorded with
its secret parts written as ``[redacted]`` (``toolhub.url_secrets``: a hosted endpoint's key in its user info,
query or path); a change to those parts alone is recorded as ``{"changed": true}``. A name typed by someone not
logged in (``accounts`` fields: a login attempt's username) is kept only when it is an account's, since it may be a
password typed in the wrong field.
"""

import getpass
import hashlib
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.db import models, transaction
from django.db.models.signals import post_save, pre_delete, pre_save
from pydantic_core import to_jsonable_python

from toolhub.audit import audit_append
from toolhub.url_secrets import url_redacted
from toolhub.withheld_names import names_withheld

__all__ = [
    "DEFAULT_EXCLUDED",
    "GROUP_TENANTS",
    "USER_TENANTS",
    "account_named",
    "Binding",
    "Recorded",
    "command_actor",
    "os_user",
    "governance_append",
    "governance_recording",
    "governance_recorded",
    "governance_tenants",
    "governance_values",
]

#: Fields no event holds unless a model names its own: a password's hash, a token's key.
DEFAULT_EXCLUDED: tuple[str, ...] = ("password", "key")

#: A user's tenants are those they are a member of; a role's, those of the people holding it.
USER_TENANTS: tuple[str, ...] = ("tenant_memberships__tenant__slug",)
GROUP_TENANTS: tuple[str, ...] = ("user__tenant_memberships__tenant__slug",)


def _plain(value: Any) -> Any:
    """A value as the trail writes every payload: pydantic's JSON form (ISO 8601 dates), else its text."""
    return to_jsonable_python(value, fallback=str)


def _name(related: models.Model) -> str:
    """A related row as an auditor reads it: a permission as ``app_label.codename``, anything else as its text."""
    from django.contrib.auth.models import Permission

    if isinstance(related, Permission):
        return f"{related.content_type.app_label}.{related.codename}"
    return str(related)


def row_pk(obj: models.Model) -> Any:
    """The row's primary key as stored (a proxy may map ``pk`` to something else: DRF's token proxy, to the user)."""
    return getattr(obj, obj._meta.pk.attname)


def account_named(name: Any) -> bool:
    """Whether ``name`` is an account's username (a name that is not may be a password typed in the wrong field)."""
    from django.contrib.auth import get_user_model

    user_model = get_user_model()
    return bool(name) and user_model._default_manager.filter(**{user_model.USERNAME_FIELD: name}).exists()


def governance_values(obj: models.Model, excluded: Iterable[str] = (), accounts: Iterable[str] = ()) -> dict[str, Any]:
    """The row's own columns (foreign keys as their ids) and many-to-many fields (sorted names), as JSON keeps them.

    ``excluded`` names fields (secrets) left out; ``accounts`` names fields holding a typed username, kept only
    when it is an account's (else ``None``).
    """
    skip = set(excluded)
    names = set(accounts)
    values: dict[str, Any] = {}
    for field in obj._meta.concrete_fields:
        if field.primary_key or field.name in skip or field.attname in skip:
            continue
        value = field.value_from_object(obj)
        if isinstance(field, models.URLField) and isinstance(value, str):
            value = url_redacted(value)
        values[field.attname] = None if field.name in names and not account_named(value) else _plain(value)
    if row_pk(obj) is not None:
        for field in obj._meta.many_to_many:
            if field.name in skip:
                continue
            related = getattr(obj, field.name).all()
            if field.related_model is not None and field.related_model._meta.label_lower == "auth.permission":
                related = related.select_related("content_type")
            values[field.name] = sorted(_name(item) for item in related)
    return values


def _secret_digests(obj: models.Model, excluded: Iterable[str]) -> dict[str, str]:
    """A digest of each excluded field's and URL column's value: enough to tell that a secret changed, never kept."""
    digests: dict[str, str] = {}
    urls = [field.name for field in obj._meta.concrete_fields if isinstance(field, models.URLField)]
    for name in (*excluded, *urls):
        try:
            field = obj._meta.get_field(name)
        except Exception:  # noqa: BLE001 - a default exclusion the model does not have
            continue
        if getattr(field, "concrete", False) and not field.many_to_many:
            raw = str(field.value_from_object(obj)).encode()  # type: ignore[union-attr]
            digests[name] = hashlib.sha256(raw).hexdigest()
    return digests


def governance_tenants(
    obj: models.Model, *, fields: Iterable[str] = ("tenant",), lookups: Iterable[str] = ()
) -> list[str]:
    """The slugs of the tenants ``obj`` is bound to: its ``fields`` (foreign keys to ``Tenant``) and ``lookups``.

    ``lookups`` go from the row as stored to a tenant's slug (a user through their memberships); the admin
    and commands changing the same rows use the same ones, so their events reach the same chains.
    """
    from toolhub.models import Tenant

    ids = [getattr(obj, f"{name}_id", None) for name in fields]
    slugs = set(Tenant.objects.filter(pk__in=[pk for pk in ids if pk is not None]).values_list("slug", flat=True))
    lookups = tuple(lookups)
    if lookups and row_pk(obj) is not None:
        rows = type(obj)._default_manager.filter(pk=row_pk(obj))
        for lookup in lookups:
            slugs.update(slug for slug in rows.values_list(lookup, flat=True).distinct() if slug)
    return sorted(slugs)


@dataclass(frozen=True)
class Recorded:
    """A row as stored before a change: its values, its secrets' digests and the tenants it was bound to."""

    values: dict[str, Any]
    digests: dict[str, str]
    tenants: tuple[str, ...]


def governance_recorded(
    obj: models.Model,
    *,
    tenants: Iterable[str],
    excluded: Iterable[str] = DEFAULT_EXCLUDED,
    accounts: Iterable[str] = (),
) -> Recorded:
    """``obj`` as stored now, for the ``changed`` event :func:`governance_append` writes after the change."""
    excluded = tuple(excluded)
    return Recorded(governance_values(obj, excluded, accounts), _secret_digests(obj, excluded), tuple(tenants))


def _secrets(obj: models.Model, excluded: Iterable[str]) -> list[str]:
    """The values of the row's excluded fields that are text (a password's hash, a token's key)."""
    values = (getattr(obj, name, None) for name in excluded)
    return [value for value in values if isinstance(value, str) and value]


def governance_append(
    obj: models.Model,
    action: str,
    *,
    actor: str,
    tenants: Iterable[str],
    excluded: Iterable[str] = DEFAULT_EXCLUDED,
    accounts: Iterable[str] = (),
    before: Recorded | None = None,
) -> None:
    """Append ``governance.<action>`` for ``obj`` to the chains of ``tenants`` (and ``before``'s; none: the platform's).

    ``added`` / ``deleted`` (or a change with no ``before``) hold the row's values; ``changed`` with ``before``
    holds each changed field before and after, and nothing is appended when nothing changed. Must run in the
    transaction of the change it records (``audit_append``).
    """
    excluded = tuple(excluded)
    after = governance_values(obj, excluded, accounts)
    chains = set(tenants)
    data: dict[str, Any]
    if before is None:
        data = {"values": after}
    else:
        chains |= set(before.tenants)
        changes: dict[str, Any] = {
            key: {"before": before.values.get(key), "after": after.get(key)}
            for key in sorted(set(before.values) | set(after))
            if before.values.get(key) != after.get(key)
        }
        for name, digest in _secret_digests(obj, excluded).items():
            if before.digests.get(name) != digest and name not in changes:
                changes[name] = {"changed": True}  # that it changed, never what it was or is
        if not changes:
            return
        data = {"changes": changes}
    secrets = _secrets(obj, excluded)
    ident = _plain(obj.pk)
    if str(ident) in secrets:
        ident = "[redacted]"  # a model whose primary key is its secret (a token's key)
    for tenant in sorted(chains) or [""]:
        label = _label(obj, tenant, [getattr(obj, name, None) for name in accounts if after.get(name) is None], secrets)
        payload = {"model": obj._meta.label_lower, "id": ident, "object": label[:200], **data}
        audit_append(event_type=f"governance.{action}", actor=actor, data=payload, tenant=tenant)


def _label(obj: models.Model, tenant: str, unknown: Iterable[Any], secrets: Iterable[str]) -> str:
    """``obj``'s name as ``tenant``'s auditors may read it, names typed by nobody's account and secrets left out.

    A shared row only other tenants see (a grant's tool group) is named by its kind, as that tenant's admin pages
    name it, whoever's page made the change (``unknown``: typed names that are no account's).
    """
    from toolhub.disclosure.groups import tenant_group_namer

    with names_withheld(tenant_group_namer(tenant)):
        label = str(obj)
    for typed in unknown:
        if isinstance(typed, str) and typed:
            label = label.replace(typed, "[unknown name]")
    for secret in secrets:
        label = label.replace(secret, "[redacted]")
    return label


@dataclass(frozen=True)
class Binding:
    """How a governing model's rows reach the trail: their tenants (as :func:`governance_tenants`) and secrets."""

    fields: tuple[str, ...] = ()
    lookups: tuple[str, ...] = ()
    excluded: tuple[str, ...] = DEFAULT_EXCLUDED
    accounts: tuple[str, ...] = ()
    #: The model a page shows the rows as (a proxy: DRF's token proxy, whose id is the user's), which events name.
    shown: type[models.Model] | None = None


def _as_shown(instance: models.Model, shown: type[models.Model] | None) -> models.Model:
    """``instance`` as its page records it: through the proxy the page shows, so either door names the row alike."""
    if shown is None or type(instance) is shown:
        return instance
    fields = instance._meta.concrete_fields
    values = [getattr(instance, field.attname) for field in fields]
    return shown.from_db(instance._state.db, [field.attname for field in fields], values)


def os_user() -> str:
    """The operating system's user running this process, as the trail names a command's actor.

    A container may run under a numeric user with no name (no ``passwd`` entry, no ``USER``): then its number, so
    a command that must record never fails for want of a name.
    """
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid-{os.getuid()}" if hasattr(os, "getuid") else "unknown"


def command_actor() -> str:
    """Who runs a management command, as the trail names them: ``command:`` and the operating system's user."""
    return f"command:{os_user()}"


@contextmanager
def governance_recording(*, actor: str, watched: dict[type[models.Model], Binding]) -> Iterator[None]:
    """Within the block, one transaction: each row of ``watched`` saved or deleted is a governance event.

    For code toolhub does not own (a third-party management command) that writes governing rows (through a watched
    model or a proxy of it) with no hook to
    call :func:`governance_append` from; the events commit with the writes or not at all. A bulk ``delete()``
    sends ``pre_delete`` for each row while a receiver listens, so it is recorded row by row too.

    The transaction starts at the block's first watched write, not at the block's start: a command that prompts
    first (``changepassword``, an interactive ``createsuperuser``) holds none while a person types, where on SQLite
    its reads' lock would keep every other process (the running server) from committing until they are done. A
    write inside a transaction of its own (``get_or_create``'s, a ``delete()``'s) records its events in that one.
    """
    before: dict[tuple[str, Any], Recorded] = {}
    thread = threading.get_ident()
    block = ExitStack()

    def begin(using: str | None) -> None:
        if not transaction.get_connection(using).in_atomic_block:
            block.enter_context(transaction.atomic(using=using))

    def binding(sender: Any) -> Binding | None:
        # Receivers are global while the block runs: another thread's writes are not this actor's.
        return bindings.get(sender) if threading.get_ident() == thread else None

    def remember(sender: Any, instance: models.Model, raw: bool = False, **kwargs: Any) -> None:
        bound = binding(sender)
        if bound is None:
            return
        begin(kwargs.get("using"))
        if row_pk(instance) is None:
            return
        # The row as stored, whatever a proxy's default manager would hide.
        stored = sender._meta.concrete_model._base_manager.filter(pk=row_pk(instance)).first()
        if stored is not None:
            tenants = governance_tenants(stored, fields=bound.fields, lookups=bound.lookups)
            before[(sender._meta.label_lower, row_pk(instance))] = governance_recorded(
                stored, tenants=tenants, excluded=bound.excluded, accounts=bound.accounts
            )

    def saved(sender: Any, instance: models.Model, created: bool = False, **kwargs: Any) -> None:
        bound = binding(sender)
        if bound is None:
            return
        was = before.pop((sender._meta.label_lower, row_pk(instance)), None)
        tenants = governance_tenants(instance, fields=bound.fields, lookups=bound.lookups)
        action = "added" if created or was is None else "changed"
        governance_append(
            _as_shown(instance, bound.shown),
            action,
            actor=actor,
            tenants=tenants,
            excluded=bound.excluded,
            accounts=bound.accounts,
            before=was,
        )

    def deleted(sender: Any, instance: models.Model, **kwargs: Any) -> None:
        bound = binding(sender)
        if bound is None:
            return
        begin(kwargs.get("using"))
        tenants = governance_tenants(instance, fields=bound.fields, lookups=bound.lookups)
        governance_append(
            _as_shown(instance, bound.shown),
            "deleted",
            actor=actor,
            tenants=tenants,
            excluded=bound.excluded,
            accounts=bound.accounts,
        )

    uid = f"toolhub.governance_recording.{id(before)}"
    # A row saved through a proxy of a watched model (DRF's token proxy) is its row too; its signals name the proxy.
    bindings = {
        model: binding_of
        for watched_model, binding_of in watched.items()
        for model in apps.get_models()
        if model._meta.concrete_model is watched_model._meta.concrete_model
    }
    bindings.update(watched)

    def disconnect() -> None:
        for model in bindings:
            pre_save.disconnect(sender=model, dispatch_uid=uid)
            post_save.disconnect(sender=model, dispatch_uid=uid)
            pre_delete.disconnect(sender=model, dispatch_uid=uid)

    with block:  # on the way out: the transaction begun (committed, or rolled back on an error), then the receivers
        block.callback(disconnect)
        for model in bindings:
            pre_save.connect(remember, sender=model, weak=False, dispatch_uid=uid)
            post_save.connect(saved, sender=model, weak=False, dispatch_uid=uid)
            pre_delete.connect(deleted, sender=model, weak=False, dispatch_uid=uid)
        yield
