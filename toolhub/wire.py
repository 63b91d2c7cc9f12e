"""A bound on the bytes an endpoint sends, whatever they hold: the transport's own limit on data from outside.

Every HTTP client toolhub reads outside answers with takes it: the model endpoints' (the SDK's, sync) and the
remote MCP servers' (async), whose answers were otherwise read whole before their size was checked.
``StreamedTurn`` bounds what it interprets (text, reasoning, calls), so a stream of chunks heavy with fields it
does not read (an unknown field, a ``reasoning`` object, one ``data:`` line without end that the SDK's decoder
keeps whole in memory) or a whole answer of any size (read into memory before it is parsed) passed it unchecked,
read until the deadline. The client's response body is wrapped here, before the SDK reads a byte of it.

The body is decoded here too (``Content-Encoding``, which the client asks for): counted only as it came off the
socket, a few kilobytes of gzip were decoded into any size (a gzip bomb is a thousand to one). The bound counts
the bytes read and the bytes they decode to, and the response is then handed on as not encoded.

The model client lives for many turns, so each of its answers has a count of its own. The MCP client is made for
one use of a server (``mcp_client.remote``), which reads many answers (a listing of up to 100 pages, the call, the
SDK's GET stream): they share one count, or a server paging its listing had 100 times the bound read and kept.
"""

from collections.abc import AsyncIterator, Iterator

import httpx2
from httpx2._decoders import ContentDecoder, IdentityDecoder, MultiDecoder

__all__ = ["WIRE_BYTES_PER_ANSWER_BYTE", "WireBoundExceeded", "bounded_async_responses", "bounded_responses"]

#: How many bytes on the wire an answer's byte (``MAX_EXTERNAL_RESULT_BYTES``) may take: a streamed token is a
#: chunk of some 150 to 250 bytes of JSON around its few characters, so an answer at ``MAX_EXTERNAL_RESULT_BYTES``
#: is let through, while one of nothing but overhead is cut at this multiple of it.
WIRE_BYTES_PER_ANSWER_BYTE = 64


class WireBoundExceeded(Exception):
    """The endpoint sent more bytes than the bound; what it sent so far is given up."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"The endpoint sent more than {limit:,} bytes ({WIRE_BYTES_PER_ANSWER_BYTE} times "
            "TOOLHUB['MAX_EXTERNAL_RESULT_BYTES']); it was given up and nothing of it was kept."
        )
        self.limit = limit


class _Tally:
    """The bytes read and decoded so far by one answer, or by all of a client's; refused past ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._read = self._decoded = 0

    def read(self, size: int) -> None:
        self._read += size
        if self._read > self.limit:
            raise WireBoundExceeded(self.limit)

    def decoded(self, size: int) -> None:
        self._decoded += size
        if self._decoded > self.limit:
            raise WireBoundExceeded(self.limit)


class _Counter:
    """One response's bytes counted on ``tally``, read and decoded; the decoding of ``Content-Encoding`` done here."""

    def __init__(self, decoder: ContentDecoder, tally: _Tally) -> None:
        self._decoder = decoder
        self._tally = tally

    def decode(self, piece: bytes) -> Iterator[bytes]:
        self._tally.read(len(piece))
        yield from self._counted(self._decoder.decode(piece))

    def flush(self) -> Iterator[bytes]:
        yield from self._counted(self._decoder.flush())

    def _counted(self, parts: Iterator[bytes]) -> Iterator[bytes]:
        for part in parts:
            self._tally.decoded(len(part))
            yield part


class _BoundedStream(httpx2.SyncByteStream):
    """The response's bytes as they come, decoded, refused once more than ``limit`` were read or decoded."""

    def __init__(self, inner: httpx2.SyncByteStream, counter: _Counter) -> None:
        self._inner = inner
        self._counter = counter

    def __iter__(self) -> Iterator[bytes]:
        for piece in self._inner:
            yield from self._counter.decode(piece)
        yield from self._counter.flush()

    def close(self) -> None:
        self._inner.close()


class _BoundedAsyncStream(httpx2.AsyncByteStream):
    """``_BoundedStream`` for an ``httpx2.AsyncClient``."""

    def __init__(self, inner: httpx2.AsyncByteStream, counter: _Counter) -> None:
        self._inner = inner
        self._counter = counter

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._inner:
            for part in self._counter.decode(piece):
                yield part
        for part in self._counter.flush():
            yield part

    async def aclose(self) -> None:
        await self._inner.aclose()


def _counter(response: httpx2.Response, tally: _Tally) -> _Counter:
    """A counter decoding the response's ``Content-Encoding`` (as httpx2 would), the header then taken away."""
    encodings = [value.strip().lower() for value in response.headers.get_list("content-encoding", split_commas=True)]
    encodings = [encoding for encoding in encodings if encoding != "identity"]
    if not encodings:
        return _Counter(IdentityDecoder(), tally)
    del response.headers["content-encoding"]  # decoded here: httpx2 must not decode it again
    return _Counter(MultiDecoder(encodings), tally)


def bounded_responses(limit: int) -> dict[str, list]:  # type: ignore[type-arg]
    """``event_hooks`` for an ``httpx2.Client`` (the SDK's) whose every response body is cut at ``limit`` bytes.

    Read or decoded: the body is decoded here, so that a compressed one is bounded by what it decodes to. Each
    response is counted on its own (the SDK's client answers turn after turn, each retry a new response).
    """

    def bound(response: httpx2.Response) -> None:
        response.stream = _BoundedStream(response.stream, _counter(response, _Tally(limit)))  # type: ignore[arg-type]

    return {"response": [bound]}


def bounded_async_responses(limit: int) -> dict[str, list]:  # type: ignore[type-arg]
    """``bounded_responses`` for an ``httpx2.AsyncClient`` made for one use (the MCP client's), its responses together.

    Every response the client reads is counted on one tally, so the bound holds for the use, however many answers
    it takes (pages of a listing, redirects followed, the GET stream reconnected): hooks for one client only.
    """
    tally = _Tally(limit)

    async def bound(response: httpx2.Response) -> None:
        response.stream = _BoundedAsyncStream(response.stream, _counter(response, tally))  # type: ignore[arg-type]

    return {"response": [bound]}
