"""A LangChain v1 agent whose order tool waits for a toolhub operator, offline.

Run from the repository root (needs the ``langgraph`` extra: ``pip install -e '.[langgraph]'``) with a
local PostgreSQL (``DATABASE_URL``, default ``postgres://postgres@127.0.0.1:5432/toolhub``):

    python examples/langgraph/approve_an_order.py

It creates a throwaway database beside that one (``test_<name>``, dropped at the end), runs calls in
this process (no broker: the embedded mode), loads the demo data, and scripts the chat model with
LangChain's own fake model, so nothing leaves the machine.
alice's agent orders a 5000 laptop; toolhub's policy holds orders above 1000, so the graph pauses;
the interrupt becomes a toolhub approval request; the operator edits the amount to 900 and approves
(the service behind ``POST /api/v1/approvals/{id}/approve/``); the graph resumes with that decision
and the order is created once, for 900, with the operator's name on the call's audit trail.
"""

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/toolhub")
os.environ.update(DJANGO_SETTINGS_MODULE="toolhub.settings", DJANGO_DEBUG="1")
os.environ.setdefault("DJANGO_EMAIL_BACKEND", "django.core.mail.backends.locmem.EmailBackend")  # no mail printed
os.environ.pop("CELERY_BROKER_URL", None)  # the embedded mode: calls run in this process

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from approvals.services import approval_approve  # noqa: E402
from toolhub.adapters.langgraph import LangGraphToolhub  # noqa: E402
from toolhub.models import AuditEvent, ToolCall  # noqa: E402


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model; it answers from its script and ignores the tools it is given."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
        return self


def main() -> None:
    original = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)  # migrates the throwaway database
    try:
        call_command("load_demo", verbosity=0)
        approve_an_order()
    finally:
        connection.creation.destroy_test_db(original, verbosity=0)


def approve_an_order() -> None:
    alice, operator = User.objects.get(username="alice"), User.objects.get(username="operator")

    hub = LangGraphToolhub(user=alice)
    order = {"name": "create_order", "args": {"product": "Laptop", "amount": "5000"}, "id": "call-1"}
    model = ScriptedChatModel(
        messages=iter([AIMessage(content="", tool_calls=[order]), AIMessage(content="Your order is placed.")])
    )
    agent = create_agent(
        model,
        tools=hub.tools(["create_order"]),
        middleware=[hub.middleware(["create_order"])],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "order-thread-1"}}

    paused = agent.invoke({"messages": [{"role": "user", "content": "Order a laptop."}]}, config, version="v2")
    (review,) = hub.request_approvals(paused.interrupts, config)
    print(f"paused: {paused.interrupts[0].value['name']} {paused.interrupts[0].value['args']}")
    print(f"toolhub approval request {review.approval_id} for call {review.call_id} ({review.status})")

    approval_approve(request_id=review.approval_id, user=operator, arguments={"amount": "900"}, comment="cap at 900")
    command = hub.resume_command(paused.interrupts, config)
    assert command is not None
    print(f"resume with: {command.resume}")

    finished = agent.invoke(command, config, version="v2")
    print(f"tool result: {finished.value['messages'][-2].content}")
    print(f"model: {finished.value['messages'][-1].content}")
    call = ToolCall.objects.get(pk=review.call_id)
    trail = AuditEvent.objects.filter(call_id=call.id).order_by("seq").values_list("event_type", "actor")
    print(f"call {call.id}: {call.status}, arguments {call.arguments}")
    for event_type, actor in trail:
        print(f"  audit: {event_type} by {actor}")


if __name__ == "__main__":
    main()
