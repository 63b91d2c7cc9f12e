"""Looking for a secret everywhere a call leaves traces: its row, artifacts, audit events, its run."""

import json
from typing import Any

from agents_app.models import AgentRun
from toolhub.models import AuditEvent, ToolCall, ToolCallArtifact
from toolhub.tools.secrets import SECRET_MARKER

#: The secret the leaky tool receives: URL encoding changes it, so both forms must be absent.
SECRET = "sk-live/AbC+dEf=12345"
SECRET_FORMS = (SECRET, "sk-live%2FAbC%2BdEf%3D12345", "AbC+dEf=12345")


def traces_of(call: ToolCall) -> str:
    """Everything stored about a call (row, artifacts with their bytes, audit events, its run) as one text."""
    row = ToolCall.objects.filter(pk=call.pk).values().get()
    artifacts = list(ToolCallArtifact.objects.filter(call_id=call.pk).values())
    for artifact in artifacts:
        content = bytes(artifact.pop("content"))
        artifact["content_utf8"] = content.decode("utf-8", "replace")
        artifact["content_utf16"] = content.decode("utf-16-le", "replace")
    events = list(AuditEvent.objects.filter(call_id=call.pk).values())
    runs = list(AgentRun.objects.filter(pk=call.run_id).values("messages", "output", "error")) if call.run_id else []
    return json.dumps({"call": row, "artifacts": artifacts, "events": events, "runs": runs}, default=str)


def assert_no_secret(*texts: str) -> None:
    """No form of the secret in any of ``texts``."""
    for text in texts:
        for form in SECRET_FORMS:
            assert form not in text, f"secret form {form!r} leaked in: ...{_around(text, form)}..."


def _around(text: str, form: str) -> str:
    at = text.index(form)
    return text[max(0, at - 80) : at + len(form) + 80]


def shown(value: Any) -> bool:
    """Whether the marker shows where the secret was."""
    return SECRET_MARKER in json.dumps(value, default=str)
