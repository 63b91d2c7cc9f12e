"""A Pydantic AI agent on toolhub's governed tools, offline: its FunctionModel plays the model.

Run against the demo database (``make run`` once, or ``manage.py migrate && manage.py load_demo``):

    DJANGO_DEBUG=1 .venv/bin/python examples/pydantic_ai/order_approval.py
    DJANGO_DEBUG=1 .venv/bin/python examples/pydantic_ai/order_approval.py --wait-for-operator

The agent (acting for ``alice``) orders a laptop for 5000; toolhub's rule holds orders above 1000 for
an operator, so the run ends with ``DeferredToolRequests``. By default the script then plays the
operator (approving with the amount edited to 900, as the admin's or the API's edit does); with
``--wait-for-operator`` it waits for a real one to decide in the admin (/admin/, operator/operator)
or with ``POST /api/v1/approvals/{id}/approve/``. The run resumes with the decision and the order
is created once, with the operator's amount, and audited with the operator's name.
"""

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from pydantic_ai import Agent, DeferredToolRequests  # noqa: E402
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from approvals.services import approval_approve  # noqa: E402
from toolhub.adapters.pydantic_ai import ToolhubToolset, operator_decisions, pending_approvals  # noqa: E402


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Orders the laptop, then reports what the tool answered."""
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(f"Done: {part.model_response_str()}")])
    return ModelResponse(parts=[ToolCallPart("create_order", {"product": "laptop", "amount": "5000"})])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wait-for-operator", action="store_true", help="wait for an operator instead of playing one")
    options = parser.parse_args()

    alice = User.objects.get(username="alice")
    agent = Agent(
        FunctionModel(model),
        toolsets=[ToolhubToolset(user=alice, tools={"create_order", "get_order"})],
        output_type=[str, DeferredToolRequests],
    )
    first = agent.run_sync("Order a laptop for 5000.")
    if not isinstance(first.output, DeferredToolRequests):
        print("The call ran without approval:", first.output)
        return
    for pending in pending_approvals(first.output):
        print(
            f"Waiting for an operator: approval request #{pending.approval_id}, {pending.tool_name}{pending.arguments}"
        )
        if not options.wait_for_operator:
            approval_approve(
                request_id=pending.approval_id,
                user=User.objects.get(username="operator"),
                arguments={"amount": "900"},
                comment="Laptops are capped at 900.",
            )

    decisions = operator_decisions(first.output, user=alice)
    while not decisions.complete:
        decisions = operator_decisions(first.output, user=alice, wait_seconds=30)
    print("Decisions:", decisions.results.approvals, "answered by", decisions.results.answered_by)
    resumed = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=decisions.results)
    print("Agent:", resumed.output)


if __name__ == "__main__":
    main()
