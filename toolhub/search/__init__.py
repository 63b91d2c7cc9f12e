"""Tool search: indexes over the tools a principal may use, behind one small interface.

The run-time side (the ``tool_search`` meta tool, grants, what a run sees) builds an index from the
*granted* searchable tools only and asks it for names; providers never see anything else, so a denied
tool cannot surface in a hit, a count or a suggestion.
"""

from toolhub.search.base import SearchDocument, SearchIndex, SearchProvider, document_from_tool, get_provider

__all__ = ["SearchDocument", "SearchIndex", "SearchProvider", "document_from_tool", "get_provider"]
