"""``outputSchema`` joins a remote tool's pinned fields: re-hash the stored definitions, so none is quarantined by this.

The accepted definition is stored as the server listed it, output schema included: its new hash pins the output
schema the administrator accepted. A server that changed its output schema since is quarantined (and audited) at
the tool's next call or fetch, as any change is. The hash is frozen here as the pin defines it now.
"""

import hashlib
import json
from typing import Any

from django.db import migrations

_BEFORE = ("name", "description", "inputSchema", "annotations")
_PINNED = ("name", "description", "inputSchema", "outputSchema", "annotations")


def _hash(definition: dict[str, Any], fields: tuple[str, ...]) -> str:
    pinned = {field: definition.get(field) for field in fields}
    canonical = json.dumps(pinned, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _rehash(apps: Any, fields: tuple[str, ...]) -> None:
    RemoteMcpTool = apps.get_model("toolhub", "RemoteMcpTool")
    for row in RemoteMcpTool.objects.only("pk", "accepted_definition", "accepted_hash", "current_definition"):
        changed = {}
        if row.accepted_hash and row.accepted_definition is not None:
            changed["accepted_hash"] = _hash(row.accepted_definition, fields)
        if row.current_definition is not None:
            changed["current_hash"] = _hash(row.current_definition, fields)
        if changed:
            RemoteMcpTool.objects.filter(pk=row.pk).update(**changed)


def rehash_remote_tools(apps: Any, schema_editor: Any) -> None:
    _rehash(apps, _PINNED)


def unpin_output_schemas(apps: Any, schema_editor: Any) -> None:
    _rehash(apps, _BEFORE)


class Migration(migrations.Migration):
    dependencies = [
        ("toolhub", "0043_ended_direct_step_index"),
    ]

    operations = [migrations.RunPython(rehash_remote_tools, unpin_output_schemas)]
