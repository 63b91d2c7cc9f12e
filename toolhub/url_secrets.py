"""The secret parts of a URL an administrator configured, to take out of whatever may show it.

Hosted endpoints (remote MCP servers, webhook receivers) often carry a key in their URL: in its user name and
password, in a query value, in a path segment. Errors of the libraries that call such a URL quote it, whole or
in part (``http.client``: ``nonnumeric port: 'password@host'``), and those errors reach people who may not read
the platform's configuration (tenant staff, the model). One rule for every outbound client.
"""

import re
from urllib.parse import unquote, unquote_plus, urldefrag, urlsplit, urlunsplit

__all__ = ["REDACTED", "url_quotes_redacted", "url_redacted", "url_secret_parts"]

#: What stands in for a secret part of a URL where the URL is shown or recorded.
REDACTED = "[redacted]"

#: A path segment that may be a key: 16 characters or more of a token's alphabet, with a digit among them
#: (``sk_live_4eC39Hq...``, a UUID); a word of a path (``mcp``, ``v1``, ``customer-lookup``) is not one. Read
#: percent-decoded: a base64 key's ``/`` is written ``%2F`` in a segment, so ``/`` is of the alphabet there.
_KEY_LIKE = re.compile(r"(?=.*\d)[A-Za-z0-9_\-.~+=:/]{16,}")

#: Query parameter names whose values are settings, not credentials (a vendor's own key name is not here).
_PLAIN_QUERY_NAMES = frozenset(
    {"format", "version", "api-version", "api_version", "v", "transport", "lang", "locale", "mode", "region"}
)

#: What separates query parameters: ``&``, and ``;`` as many servers still read it (kept apart by ``re.split``).
_QUERY_SEPARATOR = re.compile(r"([&;])")


def url_secret_parts(url: str) -> list[str]:
    """The secret parts of ``url``, each as written and percent-decoded (a library may quote either).

    Its user name and password, every query value and matrix parameter's (``/mcp;token=<key>``) but a setting's,
    a key-like parameter with no value (``?<key>``, ``/mcp;<key>``), every key-like path segment, and the fragment.
    A URL that does not parse (``http://[::1``) is secret whole: nothing tells its parts apart.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url] if url else []
    query = [_secret_param(name, value) for name, value in _query_params(parts.query)]
    segments = [_segment_parts(segment) for segment in parts.path.split("/")]
    keys = [word for word, _ in segments if _KEY_LIKE.fullmatch(unquote(word))]
    matrix = [_secret_param(name, value) for _, params in segments for name, value in params]
    userinfo = [parts.username or "", parts.password or "", parts.fragment]
    found = [*query, *keys, *matrix, *userinfo]
    decoded = (text for value in found if value for text in (value, unquote(value), unquote_plus(value)))
    return list(dict.fromkeys(text for text in decoded if text))


def url_redacted(url: str) -> str:
    """``url`` with each part :func:`url_secret_parts` would name (and any fragment) written as ``[redacted]``.

    For what is kept and shown to people who may not read the key (a governance event in a tenant's trail): the
    host, the path's words and the settings in the query stay readable, so an auditor sees where calls go. A URL
    that does not parse is ``[redacted]`` whole, never an exception in the code that records it.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    path = "/".join(_redacted_segment(segment) for segment in parts.path.split("/"))
    # ``;`` separates query parameters too for many servers (``?format=json;token=<key>``).
    pieces = _QUERY_SEPARATOR.split(parts.query) if parts.query else []
    query = "".join(piece if index % 2 else _redacted_param(piece) for index, piece in enumerate(pieces))
    return urlunsplit((parts.scheme, netloc, path, query, REDACTED if parts.fragment else ""))


def url_quotes_redacted(text: str, url: str) -> str:
    """``text`` with ``url``, and each piece of it an HTTP client quotes, replaced whole by its redacted form.

    ``urllib`` and ``http.client`` quote the URL (``unknown url type: '<url>'``), its path and query (``URL can't
    contain control characters. '<path?query>'``) or its host part from the user name's colon on (``nonnumeric
    port: '<password>@<host>'``). Replacing those pieces whole takes out a secret part of any length; scrubbing a
    short part (``?k=ab1``, ``u:pw@``) alone, everywhere in the text, would garble it instead. Apply it before a
    ``SecretScrubber`` of the long parts, which would otherwise break up the pieces.
    """
    if not url:
        return text
    pieces = {url: url_redacted(url)}
    try:
        parts = urlsplit(url)
    except ValueError:
        parts = None  # redacted whole (``url_redacted``); its pieces cannot be told apart, nor may they raise here
    if parts is not None:
        defragged = urldefrag(url).url  # parses as ``urlsplit`` did: no error once that one passed
        pieces[defragged] = url_redacted(defragged)
        selector = urlunsplit(("", "", parts.path, parts.query, ""))
        pieces[selector] = url_redacted(selector)
        userinfo, at, host = parts.netloc.rpartition("@")
        if at:
            pieces[parts.netloc] = f"{REDACTED}@{host}"
            # http.client reads what follows the last colon before the host as the port, and quotes it.
            pieces.update(
                {f"{userinfo[i + 1 :]}@{host}": f"{REDACTED}@{host}" for i, c in enumerate(userinfo) if c == ":"}
            )
    forms: dict[str, str] = {}
    for piece, redacted in pieces.items():
        if piece and piece != redacted:
            forms[piece] = redacted
            forms[repr(piece)[1:-1]] = repr(redacted)[1:-1]
    for piece in sorted(forms, key=len, reverse=True):
        text = text.replace(piece, forms[piece])
    return text


def _segment_parts(segment: str) -> tuple[str, list[tuple[str, str]]]:
    """A path segment's word and its matrix parameters (``/mcp;token=<key>``: ``mcp``, ``[("token", "<key>")]``)."""
    word, *params = segment.split(";")
    return word, [(name, value) for name, _, value in (param.partition("=") for param in params)]


def _query_params(query: str) -> list[tuple[str, str]]:
    """A query's parameters as written, split at ``&`` and ``;`` (either may separate them)."""
    pieces = _QUERY_SEPARATOR.split(query)[::2] if query else []
    return [(name, value) for name, _, value in (piece.partition("=") for piece in pieces)]


def _secret_param(name: str, value: str) -> str:
    """What of a parameter (query or matrix) is secret: a value but a setting's, or a key-like bare name."""
    if value:
        return "" if unquote_plus(name).lower() in _PLAIN_QUERY_NAMES else value
    return name if _KEY_LIKE.fullmatch(unquote_plus(name)) else ""


def _redacted_param(param: str) -> str:
    """A parameter (``name=value`` or a bare name) with what :func:`_secret_param` names as ``[redacted]``."""
    name, sign, value = param.partition("=")
    if not _secret_param(name, value):
        return param
    return f"{name}{sign}{REDACTED}" if value else REDACTED


def _redacted_segment(segment: str) -> str:
    """A path segment with a key-like word, and each matrix parameter's secret, as ``[redacted]``."""
    word, *params = segment.split(";")
    return ";".join([REDACTED if _KEY_LIKE.fullmatch(unquote(word)) else word, *map(_redacted_param, params)])
