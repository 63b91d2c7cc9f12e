"""An OpenAI Agents SDK agent using toolhub's tools, paused for an operator's approval, resumed on the decision.

Runs offline: the embedded default (SQLite in a temporary directory, eager tasks, the demo data) and a
scripted OpenAI-compatible endpoint on 127.0.0.1 stand in for a real deployment and model. From the
repository root, with the ``openai-agents`` extra installed::

    python examples/openai_agents/run.py

The agent asks for an order of 2,500 (orders above 1,000 need approval in the demo); the operator
approves it with the amount edited to 1,200; the run resumes and the order is placed once, at 1,200.
"""

import asyncio
import atexit
import json
import os
import shutil
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
_DB_DIR = tempfile.mkdtemp(prefix="toolhub-openai-agents-")
atexit.register(shutil.rmtree, _DB_DIR, ignore_errors=True)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
os.environ["DATABASE_URL"] = f"sqlite:///{_DB_DIR}/example.sqlite3"
os.environ.pop("CELERY_BROKER_URL", None)  # eager tasks: the call runs in this process
os.environ.setdefault("DJANGO_DEBUG", "1")
os.environ.setdefault("TOOLHUB_DEMO", "1")
os.environ.setdefault(
    "DJANGO_EMAIL_BACKEND", "django.core.mail.backends.locmem.EmailBackend"
)  # no approval e-mails printed
os.environ.setdefault("DJANGO_SECRET_KEY", "example-only-secret-key-0123456789-0123456789-0123456789")

import django  # noqa: E402

django.setup()

from agents import Agent, OpenAIChatCompletionsModel, RunConfig  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

from approvals.models import ApprovalRequest  # noqa: E402
from approvals.services import approval_approve  # noqa: E402
from toolhub.adapters.openai_agents import governed_tools, resume_governed, run_governed  # noqa: E402
from toolhub.models import AuditEvent, ToolCall  # noqa: E402

#: What the scripted model answers, in order: a tool call, then a final answer that quotes the tool's result.
SCRIPT: list[dict[str, Any]] = [
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_order_1",
                "type": "function",
                "function": {"name": "create_order", "arguments": json.dumps({"product": "laptops", "amount": "2500"})},
            }
        ],
    },
    {"role": "assistant", "content": "Your order is placed: {tool_result}"},
]


def serve_script() -> ThreadingHTTPServer:
    """A local OpenAI-compatible chat completions endpoint that plays SCRIPT."""
    replies = list(SCRIPT)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            message = dict(replies.pop(0))
            if message.get("content") and "{tool_result}" in message["content"]:
                results = [m["content"] for m in body.get("messages", []) if m.get("role") == "tool"]
                message["content"] = message["content"].format(tool_result=results[-1] if results else "-")
            finish = "tool_calls" if message.get("tool_calls") else "stop"
            answer = {
                "id": "chatcmpl-example",
                "object": "chat.completion",
                "created": 0,
                "model": "scripted",
                "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    call_command("migrate", verbosity=0)
    call_command("load_demo", verbosity=0)
    alice, operator = User.objects.get(username="alice"), User.objects.get(username="operator")
    server = serve_script()
    client = AsyncOpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="unused")
    agent = Agent(
        name="purchasing",
        instructions="Place the orders the user asks for.",
        model=OpenAIChatCompletionsModel(model="scripted", openai_client=client),
        tools=governed_tools(user=alice, names=["create_order", "get_order"]),
    )
    config = RunConfig(tracing_disabled=True)

    outcome = asyncio.run(run_governed(agent, "Order laptops for 2500.", user=alice, run_config=config))
    assert outcome.paused is not None
    request = ApprovalRequest.objects.select_related("call", "requested_by").get(status="pending")
    print(f"paused: run {outcome.paused.pk}; approval request {request.pk}")
    print(f"  the operator sees: {request.call.tool_name} {request.call.arguments} asked by {request.requested_by}")

    # The operator decides in the admin or with POST /api/v1/approvals/{id}/approve/; here, the same service.
    approval_approve(request_id=request.pk, user=operator, comment="1,200 is the budget", arguments={"amount": "1200"})
    resumed = asyncio.run(resume_governed(outcome.paused.pk, agent, user=alice, run_config=config))
    print(f"resumed: {resumed.final_output}")

    call = ToolCall.objects.get(pk=request.call_id)
    print(f"toolhub call {call.pk}: {call.status}, arguments {call.arguments}")
    for event in AuditEvent.objects.filter(call_id=call.pk).order_by("seq"):
        print(f"  audit: {event.event_type:<24} by {event.actor}")
    server.shutdown()


if __name__ == "__main__":
    main()
