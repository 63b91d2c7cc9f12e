"""A bound on the bytes an endpoint sends, whatever they hold: the transport's own limit on data from outside.

``StreamedTurn`` bounds what it interprets (text, reasoning, calls), so a stream of chunks heavy with fields it
does not read (an unknown field, a ``reasoning`` object, one ``data:`` line without end that the SDK's decoder
keeps whole in memory) or a whole answer of any size (read into memory before it is parsed) passed it unchecked,
read until the deadline. The client's response body is wrapped here, before the SDK reads a byte of it.
"""

from collections.abc import Iterator

import httpx2

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
    """The response's bytes as they come, refused once more than ``limit`` were read."""

    def __init__(self, inner: httpx2.SyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    def __iter__(self) -> Iterator[bytes]:
        read = 0
        for piece in self._inner:
            read += len(piece)
            if read > self._limit:
                raise WireBoundExceeded(self._limit)
            yield piece

    def close(self) -> None:
        self._inner.close()


def bounded_responses(limit: int) -> dict[str, list]:  # type: ignore[type-arg]
    """``event_hooks`` for an ``httpx2.Client`` (the SDK's) whose every response body is cut at ``limit`` bytes."""

    def bound(response: httpx2.Response) -> None:
        response.stream = _BoundedStream(response.stream, limit)  # type: ignore[arg-type]

    return {"response": [bound]}
