"""The demo app: a small ledger and order book with tools an agent can use."""

from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "demo"
    verbose_name = "Demo ledger and orders"
    default_auto_field = "django.db.models.BigAutoField"
