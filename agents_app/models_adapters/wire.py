"""A bound on the bytes an endpoint sends, whatever they hold: the transport's own limit on data from outside.

``StreamedTurn`` bounds what it interprets (text, reasoning, calls), so a stream of chunks heavy with fields it
does not read (an unknown field, a ``reasoning`` object, one ``data:`` line without end that the SDK's decoder
keeps whole in memory) or a whole answer of any size (read into memory before it is parsed) passed it unchecked,
read until the deadline. The client's response body is wrapped here, before the SDK reads a byte of it.

The body is decoded here too (``Content-Encoding``, which the client asks for): counted only as it came off the
socket, a few kilobytes of gzip were decoded into any size (a gzip bomb is a thousand to one). The bound counts
the bytes read and the bytes they decode to, and the response is then handed on as not encoded.
"""

from collections.abc import Iterator

import httpx2
from httpx2._decoders import ContentDecoder, IdentityDecoder, MultiDecoder

__all__ = ["WIRE_BYTES_PER_ANSWER_BYTE", "WireBoundExceeded", "bounded_responses"]

#: How many bytes on the wire an answer's byte may take: a streamed token is a chunk of some 150 to 250 bytes of
#: JSON around its few characters, so an answer at ``MAX_EXTERNAL_RESULT_BYTES`` is let through, while one of
#: nothing but overhead is cut at this multiple of it.
WIRE_BYTES_PER_ANSWER_BYTE = 64


class WireBoundExceeded(Exception):
    """The endpoint sent more bytes than the bound; what it sent so far is given up."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"The model endpoint sent more than {limit:,} bytes ({WIRE_BYTES_PER_ANSWER_BYTE} times "
            "TOOLHUB['MAX_EXTERNAL_RESULT_BYTES']); it was given up and nothing of it was kept."
        )
        self.limit = limit


class _BoundedStream(httpx2.SyncByteStream):
    """The response's bytes as they come, decoded, refused once more than ``limit`` were read or decoded."""

    def __init__(self, inner: httpx2.SyncByteStream, decoder: ContentDecoder, limit: int) -> None:
        self._inner = inner
        self._decoder = decoder
        self._limit = limit

    def __iter__(self) -> Iterator[bytes]:
        read = decoded = 0
        for piece in self._inner:
            read += len(piece)
            if read > self._limit:
                raise WireBoundExceeded(self._limit)
            for part in self._decoder.decode(piece):
                decoded += len(part)
                if decoded > self._limit:
                    raise WireBoundExceeded(self._limit)
                yield part
        for part in self._decoder.flush():
            decoded += len(part)
            if decoded > self._limit:
                raise WireBoundExceeded(self._limit)
            yield part

    def close(self) -> None:
        self._inner.close()


def _decoder(response: httpx2.Response) -> ContentDecoder:
    """The decoder of the response's ``Content-Encoding`` (as httpx2 would pick it), the header then taken away."""
    encodings = [value.strip().lower() for value in response.headers.get_list("content-encoding", split_commas=True)]
    encodings = [encoding for encoding in encodings if encoding != "identity"]
    if not encodings:
        return IdentityDecoder()
    del response.headers["content-encoding"]  # decoded here: httpx2 must not decode it again
    return MultiDecoder(encodings)


def bounded_responses(limit: int) -> dict[str, list]:  # type: ignore[type-arg]
    """``event_hooks`` for an ``httpx2.Client`` (the SDK's) whose every response body is cut at ``limit`` bytes.

    Read or decoded: the body is decoded here, so that a compressed one is bounded by what it decodes to.
    """

    def bound(response: httpx2.Response) -> None:
        decoder = _decoder(response)
        response.stream = _BoundedStream(response.stream, decoder, limit)  # type: ignore[arg-type]

    return {"response": [bound]}
