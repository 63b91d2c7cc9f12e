"""Stored checkpoints say, in an indexed column, whether a person signed over problems with them.

Only where to look: what counts is the signed body's ``acknowledged`` (``toolhub.checkpoints``). Checkpoints
stored before carry none (acknowledgement came with this release).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("toolhub", "0023_grant_set_by_platform")]

    operations = [
        migrations.AddField(
            model_name="auditcheckpoint",
            name="acknowledged",
            field=models.BooleanField(db_index=True, default=False),
        ),
    ]
