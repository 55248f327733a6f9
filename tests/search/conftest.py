"""The seeds' tools, in namespaces, plus distractors: the catalogue every tool-search test searches."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal

import pytest
from pydantic import Field

from maitre import Toolbox
from maitre.embeddings import missing_embedding_packages

OrderId = Annotated[str, Field(pattern=r"^A[0-9]{4}$", description="Order id, for example A1042")]
City = Annotated[str, Field(pattern=r"^[A-Za-z .'-]{2,40}$", description="City name, e.g. 'Pune'")]

HAS_MINILM = not missing_embedding_packages()
needs_minilm = pytest.mark.skipif(not HAS_MINILM, reason="maitre[embeddings] is not installed")


def orders_box() -> Toolbox:
    box = Toolbox("orders")

    @box.tool
    def get_order(order_id: OrderId) -> str:
        """Look up one order by its id. Use it when the user asks about status or delivery date.
        Do not use it to search by customer name."""
        return f"Order {order_id}: shipped, arrives Friday, total 1200 INR."

    @box.tool(effect="write", risk="medium")
    def issue_refund(
        order_id: OrderId,
        amount: Annotated[Decimal, Field(ge=1, le=5000, decimal_places=2, description="INR, 1 to 5000")],
        reason: Annotated[Literal["damaged", "wrong_item", "late"], Field(description="why")],
    ) -> str:
        """Refund an order. Use only after the policy check passed. Do not use it to look up an order."""
        return f"Refund of {amount} INR queued for {order_id} ({reason})."

    return box


def planner_box() -> Toolbox:
    box = Toolbox("planner")

    @box.tool
    def get_weather(city: City) -> dict[str, str]:
        """Get Saturday's weather forecast for a city. Use before suggesting outdoor plans."""
        return {"city": city, "sky": "sunny"}

    @box.tool
    def find_events(
        city: City,
        max_price_inr: Annotated[
            int, Field(ge=0, description="Only events at or below this price in INR")
        ] = 100_000,
    ) -> list[str]:
        """List events happening on Saturday in a city, optionally under a maximum price."""
        return ["Sunrise trek"]

    return box


def support_box() -> Toolbox:
    box = Toolbox("support")

    @box.tool
    def get_ticket_status(
        ticket_id: Annotated[str, Field(pattern=r"^T-[0-9]{6}$", description="Ticket id like T-000123")],
    ) -> dict[str, str]:
        """Query ticket status. Read-only operation; does not mutate ticket state."""
        return {"ticket_id": ticket_id, "status": "open"}

    @box.tool(effect="write")
    def create_ticket_draft(
        title: Annotated[
            str, Field(min_length=5, max_length=120, description="Short summary of the problem")
        ],
        category: Literal["billing", "technical", "other"] = "other",
    ) -> dict[str, str]:
        """Create a support ticket draft without submitting it; the user confirms submission in the UI."""
        return {"draft_id": "D-000001", "title": title, "category": category}

    return box


def reports_box() -> Toolbox:
    box = Toolbox("reports")

    @box.tool(effect="write")
    def start_export(
        dataset: Annotated[str, Field(max_length=40, description="Dataset name, e.g. sales")],
    ) -> str:
        """Begin an export of a dataset. Returns a job handle to pass to check_export."""
        return "job_1"

    @box.tool
    def check_export(
        job_id: Annotated[str, Field(max_length=40, description="Handle from start_export")],
    ) -> dict:
        """Check an export job by its handle."""
        return {"status": "running"}

    return box


def misc_box() -> Toolbox:
    """Distractors: plausible tools that answer none of the seed questions."""
    box = Toolbox("misc")
    specs = {
        "send_email": "Send an email message to a recipient address.",
        "search_flights": "Search flights between two airports on a date.",
        "book_hotel": "Book a hotel room in a city for a range of nights.",
        "translate_text": "Translate text from one language to another.",
        "convert_currency": "Convert an amount of money between two currencies at today's rate.",
        "create_invoice": "Create an invoice for a business customer.",
        "list_employees": "List the employees of a department with their roles.",
        "reset_password": "Send a password reset link to a user account.",
        "get_stock_price": "Get the latest stock price for a ticker symbol.",
        "schedule_meeting": "Schedule a meeting in the shared calendar with a list of attendees.",
    }

    def stub(request: Annotated[str, Field(max_length=200, description="What to do")] = "") -> str:
        return request

    for name, description in specs.items():
        box.add_tool(stub, name=name, description=description)
    return box


def memory_box() -> Toolbox:
    box = Toolbox("memory")

    @box.tool(effect="write")
    def save_memory(
        key: Annotated[str, Field(max_length=60, description="What the fact is about, e.g. city or diet")],
        value: Annotated[str, Field(max_length=500, description="The fact")],
    ) -> str:
        """Save a durable fact about the user (a preference, a decision, profile data) to long-term memory."""
        return "saved"

    @box.tool
    def search_memory(
        query: Annotated[str, Field(max_length=200, description="What to look for")],
    ) -> list[str]:
        """Search the user's long-term memory for stored facts relevant to a request."""
        return []

    return box


def catalogue() -> Toolbox:
    """All the above in one toolbox, namespaces kept (orders.get_order, planner.get_weather, ...)."""
    box = Toolbox()
    for part in (orders_box(), planner_box(), support_box(), reports_box(), memory_box(), misc_box()):
        box.include(part)
    return box


@pytest.fixture(scope="session")
def minilm_catalogue_index():
    """One MiniLM index over the catalogue for the read-only tests (embedding it once)."""
    from maitre.search import ToolIndex

    box = catalogue()
    index = ToolIndex(box)
    yield box, index
    index.close()
