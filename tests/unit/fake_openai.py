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
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
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
