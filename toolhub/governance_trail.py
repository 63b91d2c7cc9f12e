"""Governance events (``governance.added`` / ``changed`` / ``deleted``): one shape whichever door made the change.

The admin's ``GovernanceAudited`` mixin and services that change governing rows (``agents_app.services``'s
agent writes, behind the REST API) both append through :func:`governance_append`, so an auditor reads the same
event, with the same values (:func:`governance_values`), for a change made on an admin page or through the API.
Secrets (``excluded`` fields: a password's hash, a token's key) never reach an event; a change to one is recorded
as ``{"changed": true}`` only, and a row's label or id that shows one is redacted. A URL column is recorded with
its secret parts written as ``[redacted]`` (``toolhub.url_secrets``: a hosted endpoint's key in its user info,
query or path); a change to those parts alone is recorded as ``{"changed": true}``.
"""

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import models
from pydantic_core import to_jsonable_python

from toolhub.audit import audit_append
from toolhub.url_secrets import url_redacted

__all__ = [
    "DEFAULT_EXCLUDED",
    "GROUP_TENANTS",
    "USER_TENANTS",
    "Recorded",
    "governance_append",
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


def governance_values(obj: models.Model, excluded: Iterable[str] = ()) -> dict[str, Any]:
    """The row's own columns (foreign keys as their ids) and many-to-many fields (sorted names), as JSON keeps them.

    ``excluded`` names fields (secrets) left out.
    """
    skip = set(excluded)
    values: dict[str, Any] = {}
    for field in obj._meta.concrete_fields:
        if field.primary_key or field.name in skip or field.attname in skip:
            continue
        value = field.value_from_object(obj)
        if isinstance(field, models.URLField) and isinstance(value, str):
            value = url_redacted(value)
        values[field.attname] = _plain(value)
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
    obj: models.Model, *, tenants: Iterable[str], excluded: Iterable[str] = DEFAULT_EXCLUDED
) -> Recorded:
    """``obj`` as stored now, for the ``changed`` event :func:`governance_append` writes after the change."""
    excluded = tuple(excluded)
    return Recorded(governance_values(obj, excluded), _secret_digests(obj, excluded), tuple(tenants))


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
    before: Recorded | None = None,
) -> None:
    """Append ``governance.<action>`` for ``obj`` to the chains of ``tenants`` (and ``before``'s; none: the platform's).

    ``added`` / ``deleted`` (or a change with no ``before``) hold the row's values; ``changed`` with ``before``
    holds each changed field before and after, and nothing is appended when nothing changed. Must run in the
    transaction of the change it records (``audit_append``).
    """
    excluded = tuple(excluded)
    after = governance_values(obj, excluded)
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
    label = str(obj)
    for secret in secrets:
        label = label.replace(secret, "[redacted]")
    ident = _plain(obj.pk)
    if str(ident) in secrets:
        ident = "[redacted]"  # a model whose primary key is its secret (a token's key)
    payload = {"model": obj._meta.label_lower, "id": ident, "object": label[:200], **data}
    for tenant in sorted(chains) or [""]:
        audit_append(event_type=f"governance.{action}", actor=actor, data=payload, tenant=tenant)
