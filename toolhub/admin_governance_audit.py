"""Governance changes made in the admin (grants, approval rules, tool groups, memberships, accounts) go to the trail.

Who may call what, who must approve it and who acts for a tenant decide every call as much as a decision
on the desk does, so an auditor needs who changed them, when and how, in the trail that is verified, not
only in Django's admin history (``LogEntry``: rows the application may update or delete, and no tenant's
auditors read). Each addition, change and deletion appends ``governance.added`` / ``governance.changed`` /
``governance.deleted`` in the transaction that writes it, with the row's values (before and after, for a
change), to the chain of every tenant the row was bound to before or after (the platform's chains for a
row bound to none), so a grant moved from one tenant to another is seen by both tenants' auditors.

People's accounts (users, roles, API tokens) decide who may do what as much as grants do, so their pages use the
same mixin; their secrets (a password's hash, a token's key) never reach an event: an excluded field is left out
of the values, and a change to it is recorded as ``{"changed": true}`` only (a password set in the password form
too); a row's label that shows a secret (a token's is its key) is redacted. Many-to-many fields (groups,
permissions) are recorded as readable names (``app_label.codename`` for a permission).
"""

import hashlib
from collections.abc import Iterable
from typing import Any

from django.db import models, transaction
from django.http import HttpRequest
from pydantic_core import to_jsonable_python

from toolhub.audit import audit_append

__all__ = ["GovernanceAudited", "governance_values"]

#: The request attribute holding each saved row's values as stored before the save (keyed by model and pk).
_BEFORE = "_toolhub_governance_before"


def _plain(value: Any) -> Any:
    """A value as the trail writes every payload: pydantic's JSON form (ISO 8601 dates), else its text."""
    return to_jsonable_python(value, fallback=str)


def _name(related: models.Model) -> str:
    """A related row as an auditor reads it: a permission as ``app_label.codename``, anything else as its text."""
    from django.contrib.auth.models import Permission

    if isinstance(related, Permission):
        return f"{related.content_type.app_label}.{related.codename}"
    return str(related)


def governance_values(obj: models.Model, excluded: Iterable[str] = ()) -> dict[str, Any]:
    """The row's own columns (foreign keys as their ids) and many-to-many fields (sorted names), as JSON keeps them.

    ``excluded`` names fields (secrets) left out.
    """
    skip = set(excluded)
    values: dict[str, Any] = {}
    for field in obj._meta.concrete_fields:
        if field.primary_key or field.name in skip or field.attname in skip:
            continue
        values[field.attname] = _plain(field.value_from_object(obj))
    if _row_pk(obj) is not None:
        for field in obj._meta.many_to_many:
            if field.name in skip:
                continue
            related = getattr(obj, field.name).all()
            if field.related_model is not None and field.related_model._meta.label_lower == "auth.permission":
                related = related.select_related("content_type")
            values[field.name] = sorted(_name(item) for item in related)
    return values


def _row_pk(obj: models.Model) -> Any:
    """The row's primary key as stored (a proxy may map ``pk`` to something else: DRF's token proxy, to the user)."""
    return getattr(obj, obj._meta.pk.attname)


def _secret_digests(obj: models.Model, excluded: Iterable[str]) -> dict[str, str]:
    """A digest of each excluded field's value: enough to tell that a secret changed, never kept in an event."""
    digests: dict[str, str] = {}
    for name in excluded:
        try:
            field = obj._meta.get_field(name)
        except Exception:  # noqa: BLE001 - a default exclusion the model does not have
            continue
        if getattr(field, "concrete", False) and not field.many_to_many:
            raw = str(field.value_from_object(obj)).encode()  # type: ignore[union-attr]
            digests[name] = hashlib.sha256(raw).hexdigest()
    return digests


class GovernanceAudited:
    """Mixed into a ``ModelAdmin`` (before it): every addition, change and deletion it makes is an audit event.

    ``audit_tenant_fields`` names the row's foreign keys to ``Tenant`` whose chains get the event;
    ``audit_tenant_lookups`` names lookups from the row to a tenant's slug for rows bound through others (a
    user through their memberships). ``audit_excluded_fields`` names the secrets no event holds.
    """

    audit_tenant_fields: tuple[str, ...] = ("tenant",)
    audit_tenant_lookups: tuple[str, ...] = ()
    audit_excluded_fields: tuple[str, ...] = ("password", "key")

    def audit_remember(self, request: HttpRequest, obj: Any) -> None:
        """Keep the row as stored before a change, and the tenants it was bound to then, for :meth:`log_change`."""
        stored = type(obj)._default_manager.filter(pk=_row_pk(obj)).first() if _row_pk(obj) is not None else None
        if stored is not None:
            before = getattr(request, _BEFORE, {})
            before[(obj._meta.label_lower, _row_pk(obj))] = (
                governance_values(stored, self.audit_excluded_fields),
                _secret_digests(stored, self.audit_excluded_fields),
                self.audit_tenants(stored),
            )
            setattr(request, _BEFORE, before)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            self.audit_remember(request, obj)
        super().save_model(request, obj, form, change)  # type: ignore[misc]

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        self._append(request, obj, "added", {"values": self._values(obj)}, ())
        return super().log_addition(request, obj, message)  # type: ignore[misc]

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        remembered = getattr(request, _BEFORE, {}).pop((obj._meta.label_lower, _row_pk(obj)), None)
        after = self._values(obj)
        if remembered is None:
            self._append(request, obj, "changed", {"values": after}, ())
        else:
            before, secrets, tenants = remembered
            changes: dict[str, Any] = {
                key: {"before": before.get(key), "after": after.get(key)}
                for key in sorted(set(before) | set(after))
                if before.get(key) != after.get(key)
            }
            for name, digest in _secret_digests(obj, self.audit_excluded_fields).items():
                if secrets.get(name) != digest:
                    changes[name] = {"changed": True}  # that it changed, never what it was or is
            if changes:
                self._append(request, obj, "changed", {"changes": changes}, tenants)
        return super().log_change(request, obj, message)  # type: ignore[misc]

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        with transaction.atomic():
            self._append(request, obj, "deleted", {"values": self._values(obj)}, ())
            super().delete_model(request, obj)  # type: ignore[misc]

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        # The bulk action deletes outside the admin's transaction: the events commit with the deletion or not at all.
        with transaction.atomic():
            for obj in queryset:
                self._append(request, obj, "deleted", {"values": self._values(obj)}, ())
            super().delete_queryset(request, queryset)  # type: ignore[misc]

    def audit_tenants(self, obj: Any) -> list[str]:
        """The slugs of the tenants the row is bound to (as stored, for the lookups through other rows)."""
        from toolhub.models import Tenant

        ids = [getattr(obj, f"{name}_id", None) for name in self.audit_tenant_fields]
        slugs = set(Tenant.objects.filter(pk__in=[pk for pk in ids if pk is not None]).values_list("slug", flat=True))
        if self.audit_tenant_lookups and _row_pk(obj) is not None:
            rows = type(obj)._default_manager.filter(pk=_row_pk(obj))
            for lookup in self.audit_tenant_lookups:
                slugs.update(slug for slug in rows.values_list(lookup, flat=True).distinct() if slug)
        return sorted(slugs)

    def _values(self, obj: Any) -> dict[str, Any]:
        return governance_values(obj, self.audit_excluded_fields)

    def _secrets(self, obj: Any) -> list[str]:
        """The values of the row's excluded fields that are text (a password's hash, a token's key)."""
        values = (getattr(obj, name, None) for name in self.audit_excluded_fields)
        return [value for value in values if isinstance(value, str) and value]

    def _label(self, obj: Any) -> str:
        """The row's text, with any secret it shows (a token's text is its key) redacted."""
        label = str(obj)
        for secret in self._secrets(obj):
            label = label.replace(secret, "[redacted]")
        return label[:200]

    def _append(self, request: HttpRequest, obj: Any, action: str, data: dict[str, Any], also: Iterable[str]) -> None:
        tenants = set(self.audit_tenants(obj)) | set(also)
        ident = _plain(obj.pk)
        if str(ident) in self._secrets(obj):
            ident = "[redacted]"  # a model whose primary key is its secret (a token's key)
        payload = {"model": obj._meta.label_lower, "id": ident, "object": self._label(obj), **data}
        for tenant in sorted(tenants) or [""]:
            audit_append(
                event_type=f"governance.{action}",
                actor=f"user:{request.user.get_username()}",
                data=payload,
                tenant=tenant,
            )
