"""Tools, playbooks, state machines, chained types and agentic tools the agentic tests register."""

import enum
from dataclasses import dataclass
from typing import Annotated

from toolhub import Param, Risk, ToolResult, tool
from toolhub.agentic import (
    ChainedType,
    PlaybookTool,
    SimpleAgenticTool,
    StateMachineTool,
    Transition,
    Unlock,
)

#: Tool names that ran, in order (a refused call never appears here).
RAN: list[str] = []


@tool(risk=Risk.LOW)
def search(topic: Annotated[str, Param("What to search")]) -> str:
    """Search sources on a topic."""
    RAN.append("search")
    return f"3 sources on {topic}"


@tool(risk=Risk.LOW)
def analyze() -> str:
    """Analyze the sources found."""
    RAN.append("analyze")
    return "analysis"


@tool(risk=Risk.LOW)
def summarize() -> str:
    """Summarize the analysis."""
    RAN.append("summarize")
    return "summary"


@tool(risk=Risk.LOW)
def write_report() -> ToolResult:
    """Write the report as a file."""
    RAN.append("write_report")
    return ToolResult.artifact(b"# report", name="report.md", media_type="text/markdown", text="report stored")


@tool(risk=Risk.LOW)
def publish() -> str:
    """Publish the report."""
    RAN.append("publish")
    return "published"


RESEARCH = PlaybookTool(
    "researcher",
    "Research a topic: search, then analyze, then summarize.",
    tools=[search, write_report],
    locked={
        analyze: Unlock(after_all=["search"]),
        summarize: Unlock(after_any=["analyze"]),
        publish: Unlock(artifacts=["report.md"], when=lambda facts: "summarize" in facts.done, hint="summarize first"),
    },
)


class Order(enum.Enum):
    DRAFT = "draft"
    CONFIRMED = "confirmed"
    SHIPPED = "shipped"


@tool(risk=Risk.LOW)
def add_item(sku: Annotated[str, Param("Product code")]) -> str:
    """Add an item to the order."""
    RAN.append("add_item")
    return f"added {sku}"


@tool(risk=Risk.LOW)
def confirm_order() -> str:
    """Confirm the order."""
    RAN.append("confirm_order")
    return "confirmed"


@tool(risk=Risk.HIGH)
def charge_card() -> str:
    """Charge the customer's card (needs an operator's approval)."""
    RAN.append("charge_card")
    return "charged"


@tool(risk=Risk.LOW)
def ship_order() -> str:
    """Ship the order."""
    RAN.append("ship_order")
    return "shipped"


@tool(risk=Risk.LOW)
def order_status() -> str:
    """The order's status."""
    RAN.append("order_status")
    return "ok"


ORDERS = StateMachineTool(
    "order_processor",
    "Process an order from draft to shipped.",
    Order,
    start=Order.DRAFT,
    states={
        Order.DRAFT: [add_item, Transition(confirm_order, to=Order.CONFIRMED)],
        Order.CONFIRMED: [charge_card, Transition(ship_order, to=Order.SHIPPED)],
    },
    global_tools=[order_status],
)


@dataclass
class Customer:
    id: str
    name: str
    active: bool = True

    @tool(risk=Risk.LOW)
    def profile(self) -> str:
        """The customer's profile."""
        return f"{self.name} ({self.id})"

    @tool(risk=Risk.LOW)
    def greet(self, greeting: Annotated[str, Param("How to greet")]) -> str:
        """Greet the customer."""
        return f"{greeting}, {self.name}"

    @tool(risk=Risk.HIGH)
    def close_account(self) -> str:
        """Close the customer's account (needs an operator's approval)."""
        RAN.append("customer_close_account")
        return f"closed {self.id}"


CUSTOMER = ChainedType.of(Customer, name="customer", predicate=lambda customer: customer.active)

_CUSTOMERS = {"c1": Customer("c1", "Ada"), "c2": Customer("c2", "Grace"), "c3": Customer("c3", "Old", active=False)}


@tool(risk=Risk.LOW)
def find_customer(id: Annotated[str, Param("Customer id")]) -> Customer:  # noqa: A002 - the model's word
    """Find a customer by id."""
    return _CUSTOMERS[id]


@tool(risk=Risk.LOW)
def add(a: Annotated[int, Param("First")], b: Annotated[int, Param("Second")]) -> int:
    """Add two numbers."""
    RAN.append("add")
    return a + b


@tool(risk=Risk.LOW)
def multiply(a: Annotated[int, Param("First")], b: Annotated[int, Param("Second")]) -> int:
    """Multiply two numbers."""
    RAN.append("multiply")
    return a * b


MATH = SimpleAgenticTool(
    "math_orchestrator",
    "Work out an arithmetic expression.",
    tools=[add, multiply],
    prompt="Use the tools; answer with the number only.",
    max_iterations=3,
    agent="math-brain",
)

#: A state machine driven by an inner model instead of the run's.
ORDER_DESK = SimpleAgenticTool(
    "order_desk", "Handle an order.", tools=[ORDERS, search], max_iterations=5, agent="desk-brain"
)

ALL = (RESEARCH, ORDERS, CUSTOMER, find_customer, MATH, ORDER_DESK)
