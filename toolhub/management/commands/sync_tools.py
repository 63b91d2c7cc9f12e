"""``manage.py sync_tools``: mirror the registered tools into the database catalogue."""

from typing import Any

from toolhub.catalogue import tool_catalogue_sync
from toolhub.operator_command import OperatorCommand


class Command(OperatorCommand):
    help = "Mirror every registered tool into the ToolDefinition catalogue (operators' settings are kept)."

    def handle(self, *args: Any, **options: Any) -> None:
        counts = tool_catalogue_sync()
        self.stdout.write(
            self.style.SUCCESS(
                f"Catalogue synced: {counts['created']} created, {counts['updated']} updated, "
                f"{counts['removed']} no longer in code."
            )
        )
