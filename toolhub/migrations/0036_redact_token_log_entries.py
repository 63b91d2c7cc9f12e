"""Redact the API token keys Django's admin history wrote before tokens were named by their handle.

Django writes ``str(obj)`` into ``LogEntry.object_repr``, and a token's ``str()`` was its key (its ``object_id``
too, for a row of the concrete ``Token``, whose primary key is the key): every token added or deleted in the admin
left its key in "Recent actions" and the history pages, readable for as long as the rows are kept. The rows are
redacted rather than deleted: who added or deleted which user's token, and when, stays (a proxy row's
``object_id`` is the user's id); only the secret goes.
"""

from typing import Any

from django.db import migrations

REDACTED = "API token (key redacted)"


def redact_token_log_entries(apps: Any, schema_editor: Any) -> None:
    """Replace the key in every token row of the admin history; other rows are untouched."""
    log_entry = apps.get_model("admin", "LogEntry")
    content_type = apps.get_model("contenttypes", "ContentType")
    proxy = content_type.objects.filter(app_label="authtoken", model="tokenproxy").values("pk")
    concrete = content_type.objects.filter(app_label="authtoken", model="token").values("pk")
    log_entry.objects.filter(content_type__in=proxy).update(object_repr=REDACTED)
    log_entry.objects.filter(content_type__in=concrete).update(object_repr=REDACTED, object_id="[redacted]")


class Migration(migrations.Migration):
    dependencies = [
        ("toolhub", "0035_credential_env_not_platform"),
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("authtoken", "0004_alter_tokenproxy_options"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(redact_token_log_entries, migrations.RunPython.noop, elidable=True)]
