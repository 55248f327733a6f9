"""The seeds' questions find the seeds' tools with the shipped index (BM25 + offline MiniLM)."""

import pytest

from maitre.search import ToolIndex

from .conftest import catalogue, needs_minilm

pytestmark = needs_minilm

SEED_QUESTIONS = [
    # seed 000: the order lookup and the refund
    ("Where is my order A1042?", "orders.get_order"),
    ("The parcel for order A1042 arrived broken, I want my money back", "orders.issue_refund"),
    ("refund a damaged order", "orders.issue_refund"),
    # seed 001: the weekend planner needs the weather and the events
    ("Plan my Saturday in Pune. Budget 1,000 rupees. I love being outdoors.", "planner.get_weather"),
    ("Plan my Saturday in Pune. Budget 1,000 rupees. I love being outdoors.", "planner.find_events"),
    ("what's on this weekend in Pune under 1000 rupees", "planner.find_events"),
    # seed 003: the ticket server
    ("What's the status of ticket T-000123?", "support.get_ticket_status"),
    ("open a support ticket about a billing problem", "support.create_ticket_draft"),
    # seed 004: the export handles
    ("export the sales dataset", "reports.start_export"),
    ("is my export job_1 finished yet?", "reports.check_export"),
    # seed 000: memory as tools
    ("save a user preference to memory", "memory.save_memory"),
]

UNRELATED = [
    "What is the capital of France?",
    "tell me a joke",
    "Write a haiku about autumn leaves",
    "how tall is mount everest",
]


@pytest.mark.parametrize(("question", "tool"), SEED_QUESTIONS)
def test_each_seed_question_finds_its_tool_in_the_top_three(minilm_catalogue_index, question, tool):
    _, index = minilm_catalogue_index
    hits = index.search(question, k=3)
    assert tool in [h.name for h in hits], [(h.name, round(h.score, 3)) for h in hits]


def test_the_order_question_puts_get_order_first_with_both_kinds_of_evidence(minilm_catalogue_index):
    _, index = minilm_catalogue_index
    first = index.search("Where is my order A1042?")[0]
    assert first.name == "orders.get_order"
    assert first.lexical_rank is not None and first.dense_rank is not None
    assert first.dense_score is not None and first.score > first.dense_score  # the lexical bonus


@pytest.mark.parametrize("question", UNRELATED)
def test_an_unrelated_question_gets_no_tool(minilm_catalogue_index, question):
    _, index = minilm_catalogue_index
    assert index.search(question) == []


def test_the_namespace_filter_works_with_meaning_too(minilm_catalogue_index):
    _, index = minilm_catalogue_index
    hits = index.search("Plan my Saturday in Pune", k=5, namespace="misc")
    assert all(h.name.startswith("misc.") for h in hits)


def test_a_tool_added_later_is_found_by_meaning():
    box = catalogue()
    index = ToolIndex(box)
    assert all(h.name != "misc.track_parcel" for h in index.search("where is the courier with my package"))

    def track_parcel(tracking_number: str) -> str:
        return tracking_number

    box.add_tool(
        track_parcel,
        name="misc.track_parcel",
        description="Follow a courier shipment by its tracking number and tell where the package is.",
    )
    assert index.search("where is the courier with my package")[0].name == "misc.track_parcel"
    index.close()
