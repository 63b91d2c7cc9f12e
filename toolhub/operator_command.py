"""``OperatorCommand``: the base of toolhub's management commands, run without the statement bound of requests.

``DATABASE_STATEMENT_TIMEOUT`` keeps a slow or stuck statement from holding a request or a worker for ever. An
operator's command is watched by its operator (who can stop it): a whole trail verified or exported, synthetic
calls written, grants made, or a wait on the locks live traffic holds, may rightly take longer than a request.
Cancelled, it failed with the raw "canceling statement due to statement timeout", its work lost. Requests and
workers stay bounded, and so does a transaction left idle (``toolhub.db_timeouts``).
"""

from typing import Any

from django.core.management.base import BaseCommand

from toolhub.db_timeouts import operator_statements_unbounded


class OperatorCommand(BaseCommand):
    """A management command whose database statements run as long as they need (its operator watches it)."""

    def execute(self, *args: Any, **options: Any) -> Any:
        with operator_statements_unbounded():
            return super().execute(*args, **options)
