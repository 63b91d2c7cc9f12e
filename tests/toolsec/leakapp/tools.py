"""A tool that tries to leak its secret through every way out of a tool, chosen by ``channel``."""

import logging
import sys
from typing import Annotated, Literal
from urllib.parse import quote

from pydantic import BaseModel

from toolhub import Param, Progress, Risk, Secret, ToolError, ToolResult, tool

#: The environment variable the secret comes from.
SECRET_ENV = "TOOLSEC_LEAKY_API_KEY"

logger = logging.getLogger(__name__)

Channel = Literal[
    "exception",
    "tool_error",
    "error_result",
    "result",
    "text",
    "progress",
    "text_artifact",
    "json_artifact",
    "binary_artifact",
    "clean_binary_artifact",
    "unserializable",
]


class Credentials(BaseModel):
    user: str
    token: str


class Opaque:
    """A value no JSON encoder knows; its repr quotes the secret."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __repr__(self) -> str:
        return f"Opaque(token={self.token!r})"


@tool(risk=Risk.LOW, presets={"api_key": Secret(SECRET_ENV)})
def leaky(
    channel: Annotated[Channel, Param("Which way to leak the secret.")], api_key: str, progress: Progress
) -> object:
    """Leak the API key through the chosen channel, and through the logs every time."""
    logger.warning("calling upstream with key %s (url-encoded %s)", api_key, quote(api_key, safe=""))
    print(f"debug print: key={api_key}", file=sys.stderr)  # a worker redirects this into its log
    if channel == "exception":
        try:
            raise ConnectionError(f"upstream said 401 for {api_key}")
        except ConnectionError:
            logger.exception("upstream call failed")
        raise RuntimeError(f"request failed: headers={{'Authorization': 'Bearer {api_key}'}}, raw={api_key.encode()!r}")
    if channel == "tool_error":
        raise ToolError(f"The service refused key {api_key}; url https://svc.example/?key={quote(api_key, safe='')}")
    if channel == "error_result":
        return ToolResult.error(f"refused: {api_key}")
    if channel == "result":
        return {
            "key": api_key,
            "nested": [{"deep": f"x{api_key}y"}, [api_key]],
            api_key: "the key as a key",
            "model": Credentials(user="bot", token=api_key),
        }
    if channel == "text":
        return ToolResult.text(f"key={api_key}")
    if channel == "progress":
        progress.update(f"authenticated with {api_key}", current=1, total=2)
        progress.update("x" * 490 + api_key, current=2, total=2)  # the cut at 500 characters falls inside it
        return "done"
    if channel == "text_artifact":
        return ToolResult.artifact(
            f"name,token\nbot,{api_key}\n", name=f"keys-{api_key}.csv", media_type="text/csv", text=f"see {api_key}"
        )
    if channel == "json_artifact":
        return ToolResult.artifact({"token": api_key, "list": [api_key]}, name="keys.json")
    if channel == "binary_artifact":
        return ToolResult.artifact(
            b"\x89PNG\r\n\x1a\n\x00" + api_key.encode() + b"\xff\x00", name="img.png", media_type="image/png"
        )
    if channel == "clean_binary_artifact":
        return ToolResult.artifact(b"\x89PNG\r\n\x1a\n\x00\xff\x00", name="clean.png", media_type="image/png")
    return {"value": Opaque(api_key)}
