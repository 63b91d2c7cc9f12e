"""The admin of the demo data, so operators can see what the demo tools did (in their tenants only)."""

from django.contrib import admin

from demo.models import Account, LedgerEntry, Order
from toolhub.admin_helpers import TenantScopedAdmin


@admin.register(Account)
class AccountAdmin(TenantScopedAdmin, admin.ModelAdmin):
    list_display = ("account_id", "owner", "tenant", "balance", "frozen")
    list_filter = ("tenant", "frozen")
    search_fields = ("account_id", "owner")


@admin.register(LedgerEntry)
class LedgerEntryAdmin(TenantScopedAdmin, admin.ModelAdmin):
    tenant_field = "account__tenant"
    list_display = ("id", "account", "kind", "amount", "call_id", "created_at")
    list_filter = ("kind",)
    search_fields = ("account__account_id", "call_id")
    list_select_related = ("account",)
    raw_id_fields = ("account", "reverses")


@admin.register(Order)
class OrderAdmin(TenantScopedAdmin, admin.ModelAdmin):
    list_display = ("id", "product", "amount", "tenant", "created_by", "call_id", "created_at")
    list_filter = ("tenant",)
    search_fields = ("product", "created_by", "call_id")
