"""Keyset pagination for every list: stable on million-row tables, no COUNT(*)."""

from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request

from toolhub.storable import json_storage_problem

__all__ = ["NewestFirstCursorPagination", "ByNameCursorPagination"]


class NewestFirstCursorPagination(CursorPagination):
    """Newest rows first, by creation time, then by id; clients follow ``next`` / ``previous`` cursors.

    The cursor keeps its place by the first key and an offset among rows that share it; ``-id``
    makes the order of rows created in the same microsecond (one transaction's rows) total, so no
    row is shown twice or skipped across pages.
    """

    ordering = ("-created_at", "-id")
    page_size_query_param = "page_size"
    max_page_size = 500

    def decode_cursor(self, request: Request) -> Cursor | None:
        """DRF's cursor, its position checked: a crafted one that is no time is refused like any bad cursor (404).

        The position goes into the page's query: whatever the ordering, text no column holds (a NUL, which the
        cursor's base64 hides from ``StorableAddressMiddleware``) is refused too, never a 500 on PostgreSQL.
        """
        cursor: Any = super().decode_cursor(request)
        if cursor is not None and cursor.position is not None:
            valid = json_storage_problem(cursor.position) is None
            if valid and self.ordering[0].lstrip("-") == "created_at":
                try:
                    valid = parse_datetime(cursor.position) is not None
                except ValueError:
                    valid = False
            if not valid:
                raise NotFound(self.invalid_cursor_message)
        return cursor  # type: ignore[no-any-return]


class ByNameCursorPagination(NewestFirstCursorPagination):
    """Alphabetical by the unique ``name``: for catalogues, which people read by name."""

    ordering = ("name",)
