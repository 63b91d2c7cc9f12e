"""Governance changes made in the admin (grants, approval rules, tool groups, memberships) go to the audit trail.

Who may call what, who must approve it and who acts for a tenant decide every call as much as a decision
on the desk does, so an auditor needs who changed them, when and how, in the trail that is verified, not
only in Django's admin history (``LogEntry``: rows the application may update or delete, and no tenant's
auditors read). Each addition, change and deletion appends ``governance.added`` / ``governance.changed`` /
``governance.deleted`` in the transaction that writes it, with the row's values (before and after, for a
change), to the chain of every tenant the row was bound to before or after (the platform's chains for a
row bound to none), so a grant moved from one tenant to another is seen by both tenants' auditors.
"""

from collections.abc import Iterable
from typing import Any

from django.db import models, transaction
from django.http import HttpRequest

from toolhub.audit import audit_append

__all__ = ["GovernanceAudited", "governance_values"]

#: The request attribute holding each saved row's values as stored before the save (keyed by model and pk).
_BEFORE = "_toolhub_governance_before"


def _plain(value: Any) -> Any:
    """A value as JSON keeps it: scalars as they are, everything else (dates, decimals, objects) as text."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return str(value)


def governance_values(obj: models.Model) -> dict[str, Any]:
    """The row's own columns (foreign keys as their ids) and many-to-many fields (sorted ids), as JSON keeps them."""
    values: dict[str, Any] = {}
    for field in obj._meta.concrete_fields:
        if field.primary_key:
            continue
        values[field.attname] = _plain(field.value_from_object(obj))
    if obj.pk is not None:
        for field in obj._meta.many_to_many:
            values[field.name] = sorted(getattr(obj, field.name).values_list("pk", flat=True))
    return values


class GovernanceAudited:
    """Mixed into a ``ModelAdmin`` (before it): every addition, change and deletion it makes is an audit event.

    ``audit_tenant_fields`` names the row's foreign keys to ``Tenant`` whose chains get the event.
    """

    audit_tenant_fields: tuple[str, ...] = ("tenant",)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change and obj.pk is not None:
            stored = type(obj)._default_manager.filter(pk=obj.pk).first()
            if stored is not None:
                before = getattr(request, _BEFORE, {})
                before[(obj._meta.label_lower, obj.pk)] = governance_values(stored)
                setattr(request, _BEFORE, before)
        super().save_model(request, obj, form, change)  # type: ignore[misc]

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        self._append(request, obj, "added", {"values": governance_values(obj)}, ())
        return super().log_addition(request, obj, message)  # type: ignore[misc]

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        before = getattr(request, _BEFORE, {}).pop((obj._meta.label_lower, obj.pk), None)
        after = governance_values(obj)
        if before is None:
            self._append(request, obj, "changed", {"values": after}, ())
        else:
            changes = {
                key: {"before": before.get(key), "after": after.get(key)}
                for key in sorted(set(before) | set(after))
                if before.get(key) != after.get(key)
            }
            if changes:
                self._append(request, obj, "changed", {"changes": changes}, self._tenants_in(before))
        return super().log_change(request, obj, message)  # type: ignore[misc]

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        with transaction.atomic():
            self._append(request, obj, "deleted", {"values": governance_values(obj)}, ())
            super().delete_model(request, obj)  # type: ignore[misc]

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        # The bulk action deletes outside the admin's transaction: the events commit with the deletion or not at all.
        with transaction.atomic():
            for obj in queryset:
                self._append(request, obj, "deleted", {"values": governance_values(obj)}, ())
            super().delete_queryset(request, queryset)  # type: ignore[misc]

    def _tenants_in(self, values: dict[str, Any]) -> list[str]:
        """The slugs of the tenants ``values`` (a row as :func:`governance_values` read it) was bound to."""
        from toolhub.models import Tenant

        ids = [values.get(f"{name}_id") for name in self.audit_tenant_fields]
        return list(Tenant.objects.filter(pk__in=[pk for pk in ids if pk is not None]).values_list("slug", flat=True))

    def _append(self, request: HttpRequest, obj: Any, action: str, data: dict[str, Any], also: Iterable[str]) -> None:
        tenants = set(self._tenants_in(governance_values(obj))) | set(also)
        payload = {"model": obj._meta.label_lower, "id": _plain(obj.pk), "object": str(obj)[:200], **data}
        for tenant in sorted(tenants) or [""]:
            audit_append(
                event_type=f"governance.{action}",
                actor=f"user:{request.user.get_username()}",
                data=payload,
                tenant=tenant,
            )
