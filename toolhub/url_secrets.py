"""The secret parts of a URL an administrator configured, to take out of whatever may show it.

Hosted endpoints (remote MCP servers, webhook receivers) often carry a key in their URL: in its user name and
password, in a query value, in a path segment. Errors of the libraries that call such a URL quote it, whole or
in part (``http.client``: ``nonnumeric port: 'password@host'``), and those errors reach people who may not read
the platform's configuration (tenant staff, the model). One rule for every outbound client.
"""

import re
from urllib.parse import parse_qsl, unquote, unquote_plus, urlsplit, urlunsplit

__all__ = ["REDACTED", "url_redacted", "url_secret_parts"]

#: What stands in for a secret part of a URL where the URL is shown or recorded.
REDACTED = "[redacted]"

#: A path segment that may be a key: 16 characters or more of a token's alphabet, with a digit among them
#: (``sk_live_4eC39Hq...``, a UUID); a word of a path (``mcp``, ``v1``, ``customer-lookup``) is not one.
_KEY_LIKE = re.compile(r"(?=[^/]*\d)[A-Za-z0-9_\-.~+=:]{16,}")

#: Query parameter names whose values are settings, not credentials (a vendor's own key name is not here).
_PLAIN_QUERY_NAMES = frozenset(
    {"format", "version", "api-version", "api_version", "v", "transport", "lang", "locale", "mode", "region"}
)


def url_secret_parts(url: str) -> list[str]:
    """The user name and password of ``url``, every query value but a setting's, and every key-like path segment."""
    parts = urlsplit(url)
    query = [value for name, value in parse_qsl(parts.query) if name.lower() not in _PLAIN_QUERY_NAMES]
    keys = [unquote(segment) for segment in parts.path.split("/") if _KEY_LIKE.fullmatch(unquote(segment))]
    return [value for value in (*query, *keys, parts.username or "", parts.password or "") if value]


def url_redacted(url: str) -> str:
    """``url`` with each part :func:`url_secret_parts` would name (and any fragment) written as ``[redacted]``.

    For what is kept and shown to people who may not read the key (a governance event in a tenant's trail): the
    host, the path's words and the settings in the query stay readable, so an auditor sees where calls go.
    """
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    path = "/".join(REDACTED if _KEY_LIKE.fullmatch(unquote(segment)) else segment for segment in parts.path.split("/"))
    query = "&".join(_redacted_pair(pair) for pair in parts.query.split("&")) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, path, query, REDACTED if parts.fragment else ""))


def _redacted_pair(pair: str) -> str:
    name, sign, value = pair.partition("=")
    if not value or unquote_plus(name).lower() in _PLAIN_QUERY_NAMES:
        return pair
    return f"{name}{sign}{REDACTED}"
