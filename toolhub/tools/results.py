"""Tool results: explicit result values and the JSON serialization of whatever a tool returns."""

import json
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_jsonable_python

__all__ = ["ToolResult", "to_json_value", "result_text_for_model"]


@dataclass(frozen=True)
class ToolResult:
    """An explicit result: plain text for the model, an error message, or an artifact."""

    kind: str
    value: Any = None
    name: str = ""
    media_type: str = ""

    @classmethod
    def text(cls, text: str) -> "ToolResult":
        """Hand the model this text exactly, with no JSON encoding."""
        return cls(kind="text", value=text)

    @classmethod
    def error(cls, message: str) -> "ToolResult":
        """Fail the call with a message meant for the model."""
        return cls(kind="error", value=message)

    @classmethod
    def artifact(cls, data: Any, *, name: str, media_type: str = "application/json") -> "ToolResult":
        """Return data that is stored on the call and summarized, not pasted, to the model."""
        return cls(kind="artifact", value=data, name=name, media_type=media_type)


def to_json_value(value: Any) -> Any:
    """Convert a tool's return value (pydantic models, dataclasses, Decimal, dates, enums) to JSON data."""
    return to_jsonable_python(value)


def result_text_for_model(value: Any) -> str:
    """Render stored JSON result data as the text the model reads."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
