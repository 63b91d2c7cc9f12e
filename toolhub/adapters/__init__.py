"""Adapters that put other agent frameworks' tools and approvals on toolhub's governed calls."""
