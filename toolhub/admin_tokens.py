"""The admin's Tokens page: API tokens, shown and made without ever showing a key but once."""

from datetime import datetime, timedelta
from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IS_POPUP_VAR, TO_FIELD_VAR
from django.core.exceptions import BadRequest, ObjectDoesNotExist
from django.db.models import DateTimeField, F, Q, QuerySet, Value
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.utils.timezone import localtime
from rest_framework.authtoken.admin import TokenAdmin  # registers DRF's page, replaced below
from rest_framework.authtoken.models import TokenProxy

from toolhub.admin_governance_audit import GovernanceAudited
from toolhub.admin_helpers import CrossTenantOnly
from toolhub.api.keys import api_key_assign
from toolhub.api.token_use import uses_recorded_since
from toolhub.governance_trail import USER_TENANTS

__all__ = ["ApiTokenAdmin", "LastUsedFilter"]

_MEMBER_TENANTS = USER_TENANTS[0]
#: "Unused" on the Tokens page: no request for this long (or never).
UNUSED_FOR = timedelta(days=30)

if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)


def _recorded_since(request: HttpRequest, using: str) -> datetime | None:
    """``uses_recorded_since``, read once per request: the rows, the filter and each of its facets ask it."""
    read: dict[str, datetime | None] = request.__dict__.setdefault("_toolhub_uses_recorded_since", {})
    if using not in read:
        read[using] = uses_recorded_since(using)
    return read[using]


class LastUsedFilter(admin.SimpleListFilter):
    """Tokens by their latest use: the ones nobody used for 30 days (or ever) are the ones to retire first.

    A token made before uses were recorded (``uses_recorded_since``) and unstamped since is never "never": it is
    "unused" once recording has run for the whole 30 days, and in no choice before (its row says since when).
    """

    title = "last used"
    parameter_name = "used"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("recently", "in the last 30 days"), ("unused", "not in 30 days, or never"), ("never", "never")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() not in ("recently", "unused", "never"):
            return queryset
        since = timezone.now() - UNUSED_FOR
        start = _recorded_since(request, queryset.db)
        never = Q(use__isnull=True) if start is None else Q(use__isnull=True, created__gte=start)
        if self.value() == "recently":
            return queryset.filter(use__last_used_at__gte=since)
        if self.value() == "unused":
            unstamped = Q(use__isnull=True) if start is None or start < since else never
            return queryset.filter(unstamped | Q(use__last_used_at__lt=since))
        return queryset.filter(never)


@admin.register(TokenProxy)
class ApiTokenAdmin(GovernanceAudited, CrossTenantOnly, TokenAdmin):
    """API tokens are credentials: only people who cross the boundary see or create them.

    A token created or deleted is in the trail of its user's tenants; its key never is. The table holds the key's
    digest (``toolhub.api.keys``), so the key exists only in the answer to the "add" form: it is shown once, on
    the page answering the "add" form (not in a message, which the session or a cookie would keep, nor cacheable);
    afterwards the token is named by its user and creation time (``toolhub.api.tokens.token_handle``), and its pages
    answer no popup, which would name each row by its primary key, the key (``_not_a_popup``).
    """

    small_table = True  # configuration: sorts by any column (GuardedLookups)

    audit_tenant_fields = ()
    audit_tenant_lookups = (f"user__{_MEMBER_TENANTS}",)
    list_display = ("user", "created", "last_used")  # DRF's lists the key
    list_filter = (*TokenAdmin.list_filter, LastUsedFilter)  # DRF's (when it was created), and the use

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        rows = super().get_queryset(request).select_related("user", "use")
        # read once per page, for every row's "last used" (``last_used``)
        start = _recorded_since(request, rows.db)
        return rows.annotate(uses_recorded_since=Value(start, output_field=DateTimeField()))

    # "never" sorts as older than any use on every database (PostgreSQL puts NULLs last ascending, SQLite first)
    @admin.display(description="last used", ordering=F("use__last_used_at").asc(nulls_first=True))
    def last_used(self, obj: Any) -> str:
        """When and where the token last authenticated a request (``toolhub.api.token_use``), or "never".

        A token made before uses were recorded, unstamped since, says since when none was: it is not "never".
        """
        try:
            use = obj.use
        except ObjectDoesNotExist:
            start = getattr(obj, "uses_recorded_since", None)
            if start is not None and obj.created < start:
                return f"not since {localtime(start):%Y-%m-%d %H:%M} (no use was recorded before)"
            return "never"
        return f"{localtime(use.last_used_at):%Y-%m-%d %H:%M} ({use.get_channel_display()})"

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        response: HttpResponse = super().changelist_view(_not_a_popup(request), extra_context)
        return response

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        response: HttpResponse = super().changeform_view(_not_a_popup(request), object_id, form_url, extra_context)
        return response

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        response: HttpResponse = super().delete_view(_not_a_popup(request), object_id, extra_context)
        return response

    def hidden_lookups(self, request: HttpRequest) -> frozenset[str]:
        """The key: a list filtered by it (``?key__startswith=``) would answer it a character at a time."""
        return frozenset({"key"})

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """A made token's holder stays: moved to another user, the same live key would sign in as them."""
        return ("user", "created", "last_used") if obj is not None else ()

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        """A new token stores its key's digest (``toolhub.api.keys``); the key is kept for the answer only."""
        if not change:
            obj._issued_key = api_key_assign(obj)
        super().save_model(request, obj, form, change)

    def response_add(self, request: HttpRequest, obj: Any, post_url_continue: str | None = None) -> HttpResponse:
        response = TemplateResponse(
            request,
            "admin/toolhub/token_created.html",
            {
                **self.admin_site.each_context(request),
                "title": f"{obj}: copy the key now",
                "opts": self.opts,
                "token": obj,
                "key": obj._issued_key,  # the table holds its digest
            },
        )
        add_never_cache_headers(response)  # no-store: a key answered once, kept by no cache
        return response


def _not_a_popup(request: HttpRequest) -> HttpRequest:
    """``request``, unless it asks a token page for a popup (``_popup``, ``_to_field``): refused, 400.

    Django's popups name a row by its primary key's column (the popup list's ``data-popup-opener``, the values a
    change or delete popup answers), and a token's is its key: every key would be on the page. Nothing refers to a
    token, so no page opens one in a popup.
    """
    if any(name in request.GET or name in request.POST for name in (IS_POPUP_VAR, TO_FIELD_VAR)):
        raise BadRequest("A token is never chosen in a popup: open the Tokens page itself.")
    return request
