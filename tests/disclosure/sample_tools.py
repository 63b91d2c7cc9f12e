"""Tools, facades and groups the disclosure tests register with ``registry.temporarily``."""

from typing import Annotated, Any

from toolhub import Param, Risk, tool
from toolhub.disclosure import UnfoldingTool, unfolding_tools


@tool(risk=Risk.LOW, always_visible=True, category="time")
def clock() -> str:
    """Tell the current time."""
    return "12:00"


@tool(risk=Risk.LOW, category="weather", tags=("forecast",))
def get_weather(city: Annotated[str, Param("The city")]) -> str:
    """Current weather and forecast for a city."""
    return f"sunny in {city}"


@tool(risk=Risk.LOW, category="mail")
def send_email(address: Annotated[str, Param("Recipient address")]) -> str:
    """Send an email message to an address."""
    return f"sent to {address}"


@tool(risk=Risk.LOW, category="payments", group="payments")
def refund_payment(payment: Annotated[str, Param("The payment id")]) -> str:
    """Refund a customer's payment."""
    return f"refunded {payment}"


@tool(risk=Risk.LOW, category="payments", group="payments")
def list_payments() -> str:
    """List recent payments."""
    return "p1, p2"


@tool(risk=Risk.LOW, group="reports")
def sales_report() -> str:
    """Build the sales report."""
    return "report"


@tool(risk=Risk.LOW)
def query_table(sql: Annotated[str, Param("The SQL query")]) -> str:
    """Run a read-only SQL query."""
    return "5 rows"


@tool(risk=Risk.LOW)
def insert_record(table: Annotated[str, Param("Table name")]) -> str:
    """Insert a record into a table."""
    return "id 123"


@tool(risk=Risk.LOW)
def delete_record(record: Annotated[int, Param("Record id")]) -> str:
    """Delete a record."""
    return "deleted"


DATABASE = UnfoldingTool.of(
    "database_operations",
    "Work with the database. Call to see the operations.",
    [query_table, insert_record, delete_record],
    child_usage_notes="Query before you insert.",
)

PERSONALITY = UnfoldingTool.of(
    "change_personality",
    "Change the assistant's personality.",
    [insert_record],
    exclusive=True,
)

FILES = UnfoldingTool.by_category(
    "file_operations",
    "File operations: pass category 'read' or 'write'.",
    {"read": [query_table], "write": [insert_record, delete_record]},
)


def _level(arguments: dict[str, Any]) -> list[Any]:
    if arguments.get("level") == "admin":
        return [query_table.tool, delete_record.tool]
    return [query_table.tool]


API = UnfoldingTool.selectable(
    "api_operations",
    "API operations: pass level 'basic' or 'admin'.",
    {"level": Annotated[str, Param("basic or admin")]},
    _level,
    tools=[query_table, delete_record],
)


@unfolding_tools(name="admin_operations", description="Administrative operations. Call to see areas.")
class AdminTools:
    @tool(risk=Risk.LOW)
    def status(self) -> str:
        """Get the system status."""
        return "healthy"

    @unfolding_tools(name="user_management", description="User management operations.")
    class UserManagement:
        @tool(risk=Risk.LOW, category="write")
        def create_user(self, username: Annotated[str, Param("User name")]) -> str:
            """Create a user."""
            return f"created {username}"

        @tool(risk=Risk.LOW, category="read")
        def find_user(self, username: Annotated[str, Param("User name")]) -> str:
            """Find a user."""
            return username


ADMIN = UnfoldingTool.from_instance(AdminTools())

PLAIN = [clock, get_weather, send_email, refund_payment, list_payments, sales_report]
FACADES = [DATABASE, PERSONALITY, FILES, API, ADMIN]
