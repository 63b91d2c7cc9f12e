"""How a stored file leaves as a download: always an attachment, never rendered as the console's own page.

A tool's artifact is the tool's output (and often the model's text), served from the console's origin with the
viewer's session. ``Content-Disposition`` is built by Django (``filename*=utf-8''...`` for names outside Latin-1:
a hand-written ``filename="..."`` with such a name is MIME-encoded whole by Django, which browsers read as no
disposition at all and render inline); ``Content-Security-Policy: sandbox`` keeps even a rendered file in an
opaque origin without scripts; a media type that is not ``type/subtype[; parameters]`` of printable ASCII (a line
break would make the response a 500) is served as ``application/octet-stream``.

A generated download (an export) streams as a :class:`StreamedResponse`, a chunk at a time under WSGI and ASGI alike.
"""

import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header

__all__ = ["StreamedResponse", "attachment_response", "download_filename", "served_media_type"]

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


_DONE = object()


class StreamedResponse(StreamingHttpResponse):
    """A streaming response that also streams under ASGI: one chunk of its iterator at a time, never all of it.

    Under ASGI Django reads a synchronous iterator whole (``sync_to_async(list)``) before sending a byte: a
    million-row export would sit in the worker's memory. Here each chunk is taken on the request's own thread
    (thread-sensitive, as the view ran), where the iterator's transaction and server-side cursor live.
    """

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.is_async:
            async for part in super().__aiter__():
                yield part
            return
        chunks: Iterator[bytes] = iter(self.streaming_content)
        step = sync_to_async(_next_chunk, thread_sensitive=True)
        while (part := await step(chunks)) is not _DONE:
            yield part


def _next_chunk(chunks: Iterator[bytes]) -> Any:
    return next(chunks, _DONE)
