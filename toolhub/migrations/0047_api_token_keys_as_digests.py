"""Store API token keys as digests: each stored key becomes the first 40 hex characters of its SHA-256.

``authtoken_token.key`` held every key in clear, so whoever read the table held every working credential.
``toolhub.api.tokens.token_owner`` now digests the presented key (``toolhub.api.keys``); digesting the stored keys
keeps every key issued before working. Irreversible in effect: a digest gives no key back, so the reverse is a no-op
that leaves the digests (code from before this would then authenticate no one, failing closed).
"""

import hashlib
from typing import Any

from django.db import migrations

DIGEST_LENGTH = 40  # toolhub.api.keys.DIGEST_LENGTH, the column's width; copied, as a migration's code stays fixed


def digest_stored_keys(apps: Any, schema_editor: Any) -> None:
    """Replace each stored key by its digest (the primary key: rewritten row by row, nothing refers to it)."""
    token = apps.get_model("authtoken", "Token")
    manager = token._base_manager.using(schema_editor.connection.alias)
    for key in list(manager.values_list("key", flat=True)):
        manager.filter(key=key).update(key=hashlib.sha256(key.encode()).hexdigest()[:DIGEST_LENGTH])


class Migration(migrations.Migration):
    dependencies = [
        ("toolhub", "0046_remote_tool_unusable_reason"),
        ("authtoken", "0004_alter_tokenproxy_options"),
    ]

    operations = [migrations.RunPython(digest_stored_keys, migrations.RunPython.noop)]
