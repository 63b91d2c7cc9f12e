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

Model providers and agents use it too; the event itself is written by ``toolhub.governance_trail``, which services
(the agent API's ``agent_create`` / ``agent_update``) call as well, so an auditor reads the same event whichever door.
"""

from typing import Any

from django.db import models, router, transaction
from django.db.models.deletion import Collector
from django.http import HttpRequest

from toolhub.governance_trail import (
    DEFAULT_EXCLUDED,
    Binding,
    Recorded,
    governance_append,
    governance_recorded,
    governance_tenants,
    governance_values,
    row_pk,
)

__all__ = ["GovernanceAudited", "governance_values", "governing_page"]

#: The request attribute holding each saved row as stored before the save (keyed by model and pk).
_BEFORE = "_toolhub_governance_before"


class GovernanceAudited:
    """Mixed into a ``ModelAdmin`` (before it): every addition, change and deletion it makes is an audit event.

    ``audit_tenant_fields`` names the row's foreign keys to ``Tenant`` whose chains get the event;
    ``audit_tenant_lookups`` names lookups from the row to a tenant's slug for rows bound through others (a
    user through their memberships). ``audit_excluded_fields`` names the secrets no event holds.
    """

    audit_tenant_fields: tuple[str, ...] = ("tenant",)
    audit_tenant_lookups: tuple[str, ...] = ()
    audit_excluded_fields: tuple[str, ...] = DEFAULT_EXCLUDED
    #: Fields holding a name typed by someone not logged in: kept only when it is an account's.
    audit_account_fields: tuple[str, ...] = ()

    def audit_remember(self, request: HttpRequest, obj: Any) -> None:
        """Keep the row as stored before a change, and the tenants it was bound to then, for :meth:`log_change`."""
        stored = type(obj)._default_manager.filter(pk=row_pk(obj)).first() if row_pk(obj) is not None else None
        if stored is not None:
            before: dict[tuple[str, Any], Recorded] = getattr(request, _BEFORE, {})
            before[(obj._meta.label_lower, row_pk(obj))] = governance_recorded(
                stored,
                tenants=self.audit_tenants(stored),
                excluded=self.audit_excluded_fields,
                accounts=self.audit_account_fields,
            )
            setattr(request, _BEFORE, before)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            self.audit_remember(request, obj)
        super().save_model(request, obj, form, change)  # type: ignore[misc]

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        self._append(request, obj, "added")
        return super().log_addition(request, obj, message)  # type: ignore[misc]

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        before = getattr(request, _BEFORE, {}).pop((obj._meta.label_lower, row_pk(obj)), None)
        self._append(request, obj, "changed", before)
        return super().log_change(request, obj, message)  # type: ignore[misc]

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        with transaction.atomic():
            self._append(request, obj, "deleted")
            self._append_cascade(request, [obj])
            super().delete_model(request, obj)  # type: ignore[misc]

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        # The bulk action deletes outside the admin's transaction: the events commit with the deletion or not at all.
        with transaction.atomic():
            deleted = list(queryset)
            for obj in deleted:
                self._append(request, obj, "deleted")
            self._append_cascade(request, deleted)
            super().delete_queryset(request, queryset)  # type: ignore[misc]

    def _append_cascade(self, request: HttpRequest, deleted: list[Any]) -> None:
        """Record the governance rows Django's cascade deletes with ``deleted`` (a tool group's grants and rules).

        Each is recorded as its own admin records it (its tenants, its excluded fields), so that a rule or a deny
        that stopped applying is in the trail whichever row's deletion took it. A model the admin shows through a
        proxy (an API token, through DRF's token proxy) is recorded as that page records it; rows of models no
        governance page shows are not loaded (a user's idempotency keys), each row is recorded once.
        """
        collector = Collector(using=router.db_for_write(self.model))  # type: ignore[attr-defined]
        collector.collect(deleted)
        taken: dict[type[models.Model], dict[Any, models.Model]] = {}
        for model, rows in [*collector.data.items(), *((qs.model, qs) for qs in collector.fast_deletes)]:
            if self._governing(model) is not None:  # looked at before a fast-deleted queryset is read
                taken.setdefault(model._meta.concrete_model, {}).update((row_pk(row), row) for row in rows)
        for obj in deleted:
            taken.get(type(obj)._meta.concrete_model, {}).pop(row_pk(obj), None)
        self._append_cascade_updates(request, collector, deleted, taken)
        for model, found in taken.items():
            governing = self._governing(model)
            assert governing is not None
            shown, owner = governing
            rows = list(found.values())
            if shown is not model:
                rows = list(shown._default_manager.filter(**{f"{shown._meta.pk.attname}__in": list(found)}))
            for row in rows:
                owner._append(request, row, "deleted")

    def _append_cascade_updates(
        self,
        request: HttpRequest,
        collector: Collector,
        deleted: list[Any],
        taken: dict[type[models.Model], dict[Any, models.Model]],
    ) -> None:
        """Record the governed rows the cascade changes rather than deletes (``SET_NULL``), each as a change.

        A tool group's escalation group emptied takes its fallback approvers away as surely as a deletion would: it is
        recorded as its own page records a change (before and after, in its tenants' chains).
        """
        for (field, value), batches in collector.field_updates.items():
            governing = self._governing(field.model)
            if governing is None:
                continue
            shown, owner = governing
            concrete: Any = field.model._meta.concrete_model
            gone = set(taken.get(concrete, {})) | {
                row_pk(obj) for obj in deleted if type(obj)._meta.concrete_model is concrete
            }
            batch_rows: list[Any] = batches  # lists of instances, or querysets
            ids = {row_pk(row) for batch in batch_rows for row in batch} - gone
            for row in shown._default_manager.filter(**{f"{shown._meta.pk.attname}__in": sorted(ids)}):
                before = governance_recorded(
                    row,
                    tenants=owner.audit_tenants(row),
                    excluded=owner.audit_excluded_fields,
                    accounts=owner.audit_account_fields,
                )
                setattr(row, field.attname, value)
                owner._append(request, row, "changed", before)

    def _governing(self, model: type[models.Model]) -> "tuple[type[models.Model], GovernanceAudited] | None":
        return governing_page(model, self.admin_site)  # type: ignore[attr-defined]

    def audit_binding(self) -> Binding:
        """How this page records its rows, for writes made elsewhere (``governance_recording``): one declaration."""
        return Binding(
            fields=tuple(self.audit_tenant_fields),
            lookups=tuple(self.audit_tenant_lookups),
            excluded=tuple(self.audit_excluded_fields),
            accounts=tuple(self.audit_account_fields),
            shown=self.model,  # type: ignore[attr-defined]
        )

    def audit_tenants(self, obj: Any) -> list[str]:
        """The slugs of the tenants the row is bound to (as stored, for the lookups through other rows)."""
        return governance_tenants(obj, fields=self.audit_tenant_fields, lookups=self.audit_tenant_lookups)

    def _append(self, request: HttpRequest, obj: Any, action: str, before: Recorded | None = None) -> None:
        governance_append(
            obj,
            action,
            actor=f"user:{request.user.get_username()}",
            tenants=self.audit_tenants(obj),
            excluded=self.audit_excluded_fields,
            accounts=self.audit_account_fields,
            before=before,
        )


def governing_page(model: type[models.Model], site: Any) -> "tuple[type[models.Model], GovernanceAudited] | None":
    """The model (``model``'s or a proxy of it) whose page on ``site`` records ``model``'s rows, and that page."""
    registry: dict[type[models.Model], Any] = site._registry
    for shown, owner in registry.items():
        if shown._meta.concrete_model is model._meta.concrete_model and isinstance(owner, GovernanceAudited):
            return shown, owner
    return None
