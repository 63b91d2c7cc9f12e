"""The admin of the demo data, so operators can see what the demo tools did."""

from django.contrib import admin

from demo.models import Account, LedgerEntry, Order


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin):
    list_display = ("account_id", "owner", "tenant", "balance", "frozen")
    list_filter = ("tenant", "frozen")
    search_fields = ("account_id", "owner")


@admin.register(LedgerEntry)
class LedgerEntryAdmin(admin.ModelAdmin):
    list_display = ("id", "account", "kind", "amount", "call_id", "created_at")
    list_filter = ("kind",)
    search_fields = ("account__account_id", "call_id")
    list_select_related = ("account",)
    raw_id_fields = ("account",)


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ("id", "product", "amount", "tenant", "created_by", "call_id", "created_at")
    list_filter = ("tenant",)
    search_fields = ("product", "created_by", "call_id")
