"""How a stored file leaves as a download: always an attachment, never rendered as the console's own page.

A tool's artifact is the tool's output (and often the model's text), served from the console's origin with the
viewer's session. ``Content-Disposition`` is built by Django (``filename*=utf-8''...`` for names outside Latin-1:
a hand-written ``filename="..."`` with such a name is MIME-encoded whole by Django, which browsers read as no
disposition at all and render inline); ``Content-Security-Policy: sandbox`` keeps even a rendered file in an
opaque origin without scripts; a media type that is not ``type/subtype[; parameters]`` of printable ASCII (a line
break would make the response a 500) is served as ``application/octet-stream``.
"""

import re

from django.http import HttpResponse
from django.utils.http import content_disposition_header

__all__ = ["attachment_response", "download_filename", "served_media_type"]

OCTET_STREAM = "application/octet-stream"
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_MEDIA_TYPE = re.compile(rf"{_TOKEN}/{_TOKEN}(\s*;[\x20-\x7e]*)?")
_NAME_CHARS = 150


def served_media_type(media_type: str) -> str:
    """``media_type`` when it is a well-formed media type, else ``application/octet-stream``."""
    return media_type if media_type and _MEDIA_TYPE.fullmatch(media_type) else OCTET_STREAM


def download_filename(name: str, *, default: str = "download") -> str:
    """A file name safe on any disk: letters, digits, ``._- `` (others become ``_``), at most 150 characters."""
    cleaned = "".join(ch if ch.isalnum() or ch in "._- " else "_" for ch in name).strip(" .") or default
    return cleaned[:_NAME_CHARS]


def attachment_response(content: bytes, *, name: str, media_type: str, default_name: str = "download") -> HttpResponse:
    """``content`` as a download named ``name``, which no browser renders as a page of this site."""
    response = HttpResponse(content, content_type=served_media_type(media_type))
    response["Content-Disposition"] = content_disposition_header(True, download_filename(name, default=default_name))
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    return response
