"""What a delete confirmation page lists: the rows the viewer may see, the others counted, and why it is refused.

Django's page (one row, and the list's "Delete selected") names every related row a deletion would take or that
protects the row, by name and with a link, whatever tenant it belongs to and whatever the viewer may open; and it
reports a row protected by a record nobody deletes (an agent's runs, a group's pending requests) as a permission
the viewer lacks, which no one has. A governance console must neither disclose another tenant's rows nor send an
operator after a permission when the remedy is elsewhere. So, for the admins of the console (``ScopedDeletion``):

- a related row is named, and linked, only when its model's admin shows it to the viewer (that admin's queryset,
  so its tenants, and its view or change permission); every other row is a count ("2 agent runs you cannot see").
  A row of a model with no page of its own (a part of the row deleted) is named only to those who cross the tenant
  boundary, counted for everyone else.
- a deletion that would take rows the viewer cannot see with it is refused, as one they lack the permission for:
  tenant staff never delete another tenant's rows, not even by a cascade. Refusing, rather than deleting what the
  page did not name, keeps "what you confirmed is what was deleted" true; the count says why, without naming.
- a protected row refuses the deletion whatever permission the viewer holds, so it is reported as protected, with
  the remedy its model declares for the protecting field (``protected_because = {"field": "what to do"}``), above
  the rows it concerns; a protection without one is listed as Django lists it.
"""

from collections import Counter
from collections.abc import Iterable
from typing import Any, cast

from django.contrib.admin.utils import NestedObjects, quote
from django.db import router
from django.db.models import Model
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.text import capfirst

from toolhub.tenancy import tenant_scope
from toolhub.visible import visible_text

__all__ = ["ScopedDeletion", "deleted_objects_shown"]


class ScopedDeletion:
    """Mixed into a ``ModelAdmin``: its delete pages name only what the viewer may see and say why one is refused."""

    delete_confirmation_template = "admin/toolhub/delete_confirmation.html"
    delete_selected_confirmation_template = "admin/toolhub/delete_selected_confirmation.html"

    def get_deleted_objects(self, objs: Iterable[Model], request: HttpRequest) -> tuple[Any, Any, Any, Any]:
        return deleted_objects_shown(list(objs), request, self.admin_site)  # type: ignore[attr-defined]


class _Shown:
    """Which related rows the viewer sees, read once per model."""

    def __init__(self, request: HttpRequest, site: Any, roots: list[Model], rows: list[Model]) -> None:
        self.request, self.site, self.rows = request, site, rows
        self.crosses = tenant_scope(request.user).everything
        self.roots = {(type(obj)._meta.concrete_model, obj.pk) for obj in roots}
        self.keys: dict[type[Model], set[Any]] = {}

    def admin(self, obj: Model) -> Any:
        return self.site._registry.get(type(obj))

    def sees(self, obj: Model) -> bool:
        if (type(obj)._meta.concrete_model, obj.pk) in self.roots:
            return True
        model_admin = self.admin(obj)
        if model_admin is None:
            return self.crosses
        model = type(obj)
        if model not in self.keys:
            pks = [row.pk for row in self.rows if type(row) is model]
            shown = model_admin.get_queryset(self.request).filter(pk__in=pks).values_list("pk", flat=True)
            self.keys[model] = set(shown) if model_admin.has_view_or_change_permission(self.request) else set()
        return obj.pk in self.keys[model] and model_admin.has_view_or_change_permission(self.request, obj)

    def label(self, obj: Model) -> str:
        """The row as Django names it, linked to its change page (the viewer sees it, so may open it)."""
        name = capfirst(obj._meta.verbose_name)
        text = visible_text(str(obj))  # a name a tenant chose (bidi controls, zero-width) drawn as the lists draw it
        if self.admin(obj) is None:
            return f"{name}: {text}"
        try:
            url = reverse(
                f"{self.site.name}:{obj._meta.app_label}_{obj._meta.model_name}_change", args=(quote(obj.pk),)
            )
        except NoReverseMatch:
            return f"{name}: {text}"
        return format_html('{}: <a href="{}">{}</a>', name, url, text)


def _unseen(counts: Counter[type[Model]]) -> list[str]:
    return [
        f"{count} {model._meta.verbose_name if count == 1 else model._meta.verbose_name_plural} you cannot see"
        for model, count in counts.items()
    ]


def deleted_objects_shown(objs: list[Model], request: HttpRequest, site: Any) -> tuple[Any, Any, Any, Any]:
    """``ModelAdmin.get_deleted_objects`` for the console: (to delete, counts, permissions lacking, protected)."""
    if not objs:
        return [], {}, set(), []
    # Django's own page passes the rows deleted as the origin, a list or a queryset, as here.
    collector = NestedObjects(using=router.db_for_write(objs[0]._meta.model), origin=objs)  # type: ignore[arg-type]
    collector.collect(objs)
    found = _found(collector)
    collected = [row for rows in found.values() for row in rows]
    protected_rows = list(collector.protected)
    shown = _Shown(request, site, objs, collected + protected_rows)

    perms_needed: set[str] = set()
    hidden: Counter[type[Model]] = Counter()
    for row in collected:
        if not shown.sees(row):
            hidden[type(row)] += 1
            if shown.admin(row) is not None:  # a row of its own, not a part of the one deleted
                perms_needed.add(f"{type(row)._meta.verbose_name_plural} you cannot see")
        elif shown.admin(row) is not None and not shown.admin(row).has_delete_permission(request, row):
            perms_needed.add(str(row._meta.verbose_name))

    def nested(items: list[Any]) -> list[Any]:
        out: list[Any] = []
        skip = False
        for item in items:
            if isinstance(item, list):
                if not skip:
                    out.append(nested(item))
                continue
            skip = not shown.sees(item)
            if not skip:
                out.append(shown.label(item))
        return out

    to_delete = nested(collector.nested()) + _unseen(hidden)
    model_count = {model._meta.verbose_name_plural: len(rows) for model, rows in found.items()}
    return to_delete, model_count, perms_needed, _protected(protected_rows, found, shown)


def _found(collector: NestedObjects) -> dict[type[Model], set[Model]]:
    """The rows the collector would delete, by model (the roots among them)."""
    return cast("dict[type[Model], set[Model]]", collector.model_objs)


def _protected(rows: list[Model], found: dict[type[Model], set[Model]], shown: _Shown) -> list[Any]:
    """The protected rows, under the remedy their model declares for the protecting field (if it declares one)."""
    deleted = {model._meta.concrete_model: {row.pk for row in of_model} for model, of_model in found.items()}
    by_reason: dict[str, tuple[list[str], Counter[type[Model]]]] = {}
    for row in sorted(rows, key=lambda row: (row._meta.label, str(row.pk))):
        reason = ""
        for name, because in getattr(type(row), "protected_because", {}).items():
            field = row._meta.get_field(name)
            if getattr(row, field.attname) in deleted.get(field.related_model._meta.concrete_model, ()):  # type: ignore[union-attr]
                reason = because
                break
        named, hidden = by_reason.setdefault(reason, ([], Counter()))
        if shown.sees(row):
            named.append(shown.label(row))
        else:
            hidden[type(row)] += 1
    listed: list[Any] = []
    for reason, (named, hidden) in by_reason.items():
        entries = named + _unseen(hidden)
        listed.extend([reason, entries] if reason else entries)
    return listed
