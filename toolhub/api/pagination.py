"""Keyset pagination for every list: stable on million-row tables, no COUNT(*)."""

from rest_framework.pagination import CursorPagination


class NewestFirstCursorPagination(CursorPagination):
    """Newest rows first, by creation time; clients follow ``next`` / ``previous`` cursors."""

    ordering = "-created_at"
    page_size_query_param = "page_size"
    max_page_size = 500


class ByNameCursorPagination(NewestFirstCursorPagination):
    """Alphabetical by the unique ``name``: for catalogues, which people read by name."""

    ordering = "name"
