"""A tiny OpenAI-compatible HTTP server on 127.0.0.1 that plays queued answers and records requests."""

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int
    body: bytes
    content_type: str = "application/json"
    #: Seconds to wait before answering at all (a slow endpoint).
    delay: float = 0.0
    #: Seconds between two bytes of the body (an endpoint that drips its answer; 0: all at once).
    drip: float = 0.0
    #: A streamed answer: these pieces, each flushed, ``chunk_delay`` seconds apart; the body is ignored
    #: and the connection closes after the last piece.
    chunks: list[bytes] | None = None
    chunk_delay: float = 0.0
    #: Further response headers (``Content-Encoding: gzip`` beside a body compressed by the test).
    headers: dict[str, str] | None = None


def completion(
    *, content: str | None = None, tool_calls: list[dict[str, Any]] | None = None, prompt: int = 11, done: int = 7
) -> Reply:
    """A valid chat completion; ``tool_calls`` items are ``{"id", "name", "arguments"}``."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in tool_calls
        ]
    body = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [{"index": 0, "finish_reason": "tool_calls" if tool_calls else "stop", "message": message}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done},
    }
    return Reply(200, json.dumps(body).encode())


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n".encode()


def streamed(
    *,
    content: list[str] = (),  # type: ignore[assignment]
    tool_calls: list[dict[str, Any]] = (),  # type: ignore[assignment]
    finish: bool = True,
    chunk_delay: float = 0.0,
    prompt: int = 11,
    done: int = 7,
) -> Reply:
    """A streamed chat completion (SSE) as OpenAI sends it: text pieces, then tool-call deltas.

    ``tool_calls`` items are ``{"index", "id"?, "name"?, "arguments"}`` deltas, sent in order. Without
    ``finish`` the stream stops after the deltas: no finish reason, no usage, no ``[DONE]``.
    """
    pieces = [_chunk({"role": "assistant", "content": ""})]
    pieces += [_chunk({"content": text}) for text in content]
    for call in tool_calls:
        delta: dict[str, Any] = {"index": call["index"], "function": {"arguments": call.get("arguments", "")}}
        if "id" in call:
            delta["id"], delta["type"] = call["id"], "function"
        if "name" in call:
            delta["function"]["name"] = call["name"]
        pieces.append(_chunk({"tool_calls": [delta]}))
    if finish:
        pieces.append(_chunk({}, finish="tool_calls" if tool_calls else "stop"))
        usage = {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}
        pieces += [_chunk({}, usage=usage), b"data: [DONE]\n\n"]
    return Reply(200, b"", content_type="text/event-stream", chunks=pieces, chunk_delay=chunk_delay)


@dataclass
class FakeModel:
    """Answers ``POST .../chat/completions`` with the queued replies, then with ``fallback``."""

    replies: deque[Reply] = field(default_factory=deque)
    requests: list[dict[str, Any]] = field(default_factory=list)
    fallback: Reply = field(default_factory=lambda: Reply(500, b'{"error": {"message": "no reply queued"}}'))
    port: int = 0
    #: Answers the client hung up on before they were complete.
    abandoned: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)


@contextmanager
def serve(model: FakeModel) -> Iterator[FakeModel]:
    """Serve ``model`` on its port (0: any free one) until the block ends."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            model.requests.append(
                {
                    "path": self.path,
                    "body": json.loads(raw or b"{}"),
                    "authorization": self.headers.get("Authorization"),
                }
            )
            reply = model.replies.popleft() if model.replies else model.fallback
            time.sleep(reply.delay)
            if reply.chunks is not None:
                self._stream(reply)
                return
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for header, value in (reply.headers or {}).items():
                self.send_header(header, value)
            self.end_headers()
            try:
                if not reply.drip:
                    self.wfile.write(reply.body)
                for byte in reply.body if reply.drip else b"":
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(reply.drip)
            except (BrokenPipeError, ConnectionResetError):
                model.abandoned += 1  # the client gave up on this answer

        def _stream(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Cache-Control", "no-cache")
            for header, value in (reply.headers or {}).items():
                self.send_header(header, value)
            self.end_headers()  # no length: the answer ends when the connection closes (HTTP/1.0)
            try:
                for piece in reply.chunks or ():
                    self.wfile.write(piece)
                    self.wfile.flush()
                    time.sleep(reply.chunk_delay)
            except (BrokenPipeError, ConnectionResetError):
                model.abandoned += 1

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            pass

    server = ThreadingHTTPServer(("127.0.0.1", model.port), Handler)
    model.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield model
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
