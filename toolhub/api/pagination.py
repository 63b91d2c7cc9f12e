"""Keyset pagination for every list: stable on million-row tables, no COUNT(*)."""

from rest_framework.pagination import CursorPagination

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


class ByNameCursorPagination(NewestFirstCursorPagination):
    """Alphabetical by the unique ``name``: for catalogues, which people read by name."""

    ordering = ("name",)
