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
    """The secret parts of ``url``, each as written and percent-decoded (a library may quote either).

    Its user name and password, every query value and matrix parameter's (``/mcp;token=<key>``) but a setting's,
    every key-like path segment, and the fragment.
    """
    parts = urlsplit(url)
    query = [value for name, value in parse_qsl(parts.query) if name.lower() not in _PLAIN_QUERY_NAMES]
    segments = [_segment_parts(segment) for segment in parts.path.split("/")]
    keys = [word for word, _ in segments if _KEY_LIKE.fullmatch(unquote(word))]
    matrix = [value for _, params in segments for name, value in params if _secret_value(name, value)]
    userinfo = [parts.username or "", parts.password or "", parts.fragment]
    found = [*query, *keys, *matrix, *userinfo]
    return list(dict.fromkeys(text for value in found for text in (value, unquote(value)) if text))


def url_redacted(url: str) -> str:
    """``url`` with each part :func:`url_secret_parts` would name (and any fragment) written as ``[redacted]``.

    For what is kept and shown to people who may not read the key (a governance event in a tenant's trail): the
    host, the path's words and the settings in the query stay readable, so an auditor sees where calls go.
    """
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    path = "/".join(_redacted_segment(segment) for segment in parts.path.split("/"))
    query = "&".join(_redacted_pair(pair) for pair in parts.query.split("&")) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, path, query, REDACTED if parts.fragment else ""))


def _segment_parts(segment: str) -> tuple[str, list[tuple[str, str]]]:
    """A path segment's word and its matrix parameters (``/mcp;token=<key>``: ``mcp``, ``[("token", "<key>")]``)."""
    word, *params = segment.split(";")
    return word, [(name, value) for name, _, value in (param.partition("=") for param in params)]


def _secret_value(name: str, value: str) -> bool:
    return bool(value) and unquote_plus(name).lower() not in _PLAIN_QUERY_NAMES


def _redacted_segment(segment: str) -> str:
    """A path segment with a key-like word, and each matrix parameter's value but a setting's, as ``[redacted]``."""
    word, params = _segment_parts(segment)
    kept = [REDACTED if _KEY_LIKE.fullmatch(unquote(word)) else word]
    kept += [
        f"{name}={REDACTED}" if _secret_value(name, value) else param
        for (name, value), param in zip(params, segment.split(";")[1:], strict=True)
    ]
    return ";".join(kept)


def _redacted_pair(pair: str) -> str:
    name, sign, value = pair.partition("=")
    if not value or unquote_plus(name).lower() in _PLAIN_QUERY_NAMES:
        return pair
    return f"{name}{sign}{REDACTED}"
