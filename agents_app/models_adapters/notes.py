"""Where notes for the model (rollbacks, policies) go in the conversation a provider is sent.

The run keeps each note where it happened, as a ``system`` message after the tool results (the
record). Many chat templates (several Llama and Mistral ones, some proxies) accept only one leading
system message and refuse or mangle a later one, so what the model is sent is rebuilt from the
record each turn, by the provider's ``note_placement``:

- ``tool_result`` (the default): appended to the tool result just before it, which every template
  accepts; a note with no tool result before it becomes a user-role note.
- ``user``: a user-role message where it happened, marked as coming from toolhub.
- ``system``: gathered into the leading system message.
"""

from typing import Any

__all__ = ["NOTE_PREFIX", "messages_for_model"]

#: How a user-role note tells the model that the user did not write it.
NOTE_PREFIX = "Note from toolhub (not from the user): "


def messages_for_model(messages: list[dict[str, Any]], placement: str) -> list[dict[str, Any]]:
    """``messages`` with every note (a system message after the first other message) moved per ``placement``.

    Pure: the stored conversation is not changed. Raises ``ValueError`` for an unknown placement.
    """
    if placement not in ("tool_result", "user", "system"):
        raise ValueError(f"Unknown note placement {placement!r}; use tool_result, user or system.")
    leading: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    notes: list[str] = []
    for message in messages:
        if message.get("role") == "system" and not rest:
            leading.append(message)
            continue
        if message.get("role") != "system":
            rest.append(message)
            continue
        note = str(message.get("content") or "")
        if placement == "system":
            notes.append(note)
        elif placement == "tool_result" and rest and rest[-1].get("role") == "tool":
            previous = rest[-1]
            rest[-1] = {**previous, "content": f"{previous.get('content') or ''}\n\n{note}"}
        else:
            rest.append({"role": "user", "content": NOTE_PREFIX + note})
    if notes:
        prompt = "\n\n".join(str(m.get("content") or "") for m in leading)
        leading = [{"role": "system", "content": "\n\n".join(part for part in (prompt, *notes) if part)}]
    return [*leading, *rest]
