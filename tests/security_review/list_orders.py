"""What an admin list sorted by, as its change list built the query (reviews cc and cf)."""

from django.test import Client

__all__ = ["column_index", "list_ordering"]


def list_ordering(client: Client, page: str, **query: str) -> list[str]:
    """The ``ORDER BY`` parts of ``page``'s list for ``query`` (``o=`` among them), the page answering 200."""
    response = client.get(page, query)
    assert response.status_code == 200, (page, query, response.status_code)
    return [str(part) for part in response.context["cl"].queryset.query.order_by]


def column_index(client: Client, page: str, column: str) -> int:
    """The position of ``column`` (a field name or a display method's name) in ``page``'s list, for ``?o=``."""
    names = [getattr(entry, "__name__", entry) for entry in client.get(page).context["cl"].list_display]
    return names.index(column)
