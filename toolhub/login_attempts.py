"""What the login lockout keeps of a pair's failures: django-axes' database handler, with the kept text bounded.

Axes appends each failure's GET and POST text (up to 1 KB each, ``axes.helpers.get_query_str``) to the pair's one
``AccessAttempt`` row, refused attempts during a lockout included (``AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT``
restarts the cool-off with each), and its version keeps no bound of its own: one address hammering one name would
grow the row without end. The row keeps the newest ``LOGIN_FAILURE_DATA_CHARS`` of each instead.
"""

from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from django.db.models import Q
from django.db.models.functions import Length, Right
from django.http import HttpRequest

__all__ = ["LOGIN_FAILURE_DATA_CHARS", "BoundedAttemptsHandler"]

#: The most of a pair's failures' GET (and, apart, POST) text its attempt row keeps: the latest few failures.
LOGIN_FAILURE_DATA_CHARS = 4096


class BoundedAttemptsHandler(AxesDatabaseHandler):  # type: ignore[misc]
    """``AxesDatabaseHandler`` whose attempt rows keep only the tail of the failures' text (``AXES_HANDLER``)."""

    def user_login_failed(
        self, sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
    ) -> None:
        super().user_login_failed(sender, credentials, request=request, **kwargs)
        if request is None:
            return
        # The row axes just wrote (its key: name, address, user agent); a short one is left alone, unwritten.
        (
            AccessAttempt.objects.filter(
                username=get_client_username(request, credentials),
                ip_address=request.axes_ip_address,
                user_agent=request.axes_user_agent,
            )
            .alias(get_chars=Length("get_data"), post_chars=Length("post_data"))
            .filter(Q(get_chars__gt=LOGIN_FAILURE_DATA_CHARS) | Q(post_chars__gt=LOGIN_FAILURE_DATA_CHARS))
            .update(
                get_data=Right("get_data", LOGIN_FAILURE_DATA_CHARS),
                post_data=Right("post_data", LOGIN_FAILURE_DATA_CHARS),
            )
        )
