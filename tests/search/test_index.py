"""ToolIndex mechanics, without a real model: lexical search, namespaces, updates, toolbox events.

The HashingEmbedder (bag of words, no meaning) stands in where a test needs the dense path to run
but not to understand anything; what the index finds by meaning is tested with MiniLM in
test_seed_search.py.
"""

import threading
from typing import Annotated

import pytest
from pydantic import Field

from maitre import Toolbox, UserError
from maitre.embeddings import HashingEmbedder
from maitre.search import SearchHit, ToolEntry, ToolIndex

from .conftest import catalogue, orders_box


def lexical_index() -> tuple[Toolbox, ToolIndex]:
    box = catalogue()
    return box, ToolIndex(box, embedder=None)


def test_lexical_search_finds_tools_by_name_words_description_and_parameters():
    _, index = lexical_index()
    assert index.mode == "lexical"
    assert index.search("ticket status")[0].name == "support.get_ticket_status"
    assert index.search("refund")[0].name == "orders.issue_refund"
    # "wrong_item" only appears as an enum value of issue_refund's reason parameter.
    assert index.search("they sent the wrong item")[0].name == "orders.issue_refund"
    # camelCase query words are split like tool names are.
    assert index.search("startExport")[0].name == "reports.start_export"


def test_hits_carry_scores_ranks_and_the_description():
    _, index = lexical_index()
    hits = index.search("export", k=2)
    assert {h.name for h in hits} == {"reports.start_export", "reports.check_export"}
    first = hits[0]
    assert isinstance(first, SearchHit)
    assert first.score == 1.0 and first.lexical_rank == 1 and first.dense_rank is None
    assert first.lexical_score and first.lexical_score > 0
    assert "export" in first.description.lower()
    assert hits[1].score <= hits[0].score


def test_lexical_only_abstains_when_no_query_word_matches_any_tool():
    _, index = lexical_index()
    assert index.search("what is the capital of France") == []
    assert index.search("   ") == []
    assert index.search("refund", k=0) == []


def test_namespace_filter_keeps_only_that_namespace_in_both_retrievers():
    box = catalogue()
    for embedder in (None, HashingEmbedder()):
        index = ToolIndex(box, embedder=embedder, min_similarity=-1.0)
        everywhere = {h.name for h in index.search("check the status of a ticket or an export job", k=10)}
        assert any(n.startswith("support.") for n in everywhere)
        assert any(n.startswith("reports.") for n in everywhere)
        only = index.search("check the status of a ticket or an export job", k=10, namespace="reports")
        assert only and all(h.name.startswith("reports.") for h in only)
        both = index.search("status", k=10, namespace=["reports", "support"])
        assert {h.name.split(".")[0] for h in both} <= {"reports", "support"}
        assert index.search("refund", namespace="nowhere") == []
        index.close()


def test_nested_namespaces_match_their_parent():
    index = ToolIndex(embedder=None)
    index.add(ToolEntry(name="crm.contacts.find_contact", description="Find a contact by email"))
    index.add(ToolEntry(name="crmx.find_lead", description="Find a lead by email"))
    index.add_many(ToolEntry(name=f"other.tool_{i}", description=f"Unrelated thing {i}") for i in range(5))
    assert [h.name for h in index.search("find by email", namespace="crm")] == ["crm.contacts.find_contact"]


def test_removal_takes_a_tool_out_of_both_retrievers_and_its_slot_is_reused():
    box = catalogue()
    index = ToolIndex(box, embedder=HashingEmbedder(), min_similarity=-1.0)
    assert "orders.issue_refund" in index
    assert index.remove("orders.issue_refund") is True
    assert index.remove("orders.issue_refund") is False
    assert "orders.issue_refund" not in index
    for k in (1, 5, 30):
        assert all(h.name != "orders.issue_refund" for h in index.search("refund a damaged order", k=k))
    before = len(index)
    index.add(ToolEntry(name="orders.cancel_order", description="Cancel an order that has not shipped"))
    assert len(index) == before + 1
    assert index.search("cancel an order")[0].name == "orders.cancel_order"


def test_incremental_add_is_searchable_at_once_and_adding_a_name_again_replaces_it():
    index = ToolIndex(embedder=HashingEmbedder(), min_similarity=-1.0)
    index.add({"name": "get_order", "description": "Look up one order by its id"})
    assert index.search("order")[0].name == "get_order"
    index.add({"name": "get_order", "description": "Fetch a customer's invoice"})
    assert len(index) == 1
    assert index.entry("get_order").description == "Fetch a customer's invoice"
    assert all(h.lexical_rank is None for h in index.search("order"))  # the old words are gone
    assert index.search("invoice")[0].name == "get_order"


def test_the_index_follows_its_toolbox_including_included_toolboxes():
    orders = orders_box()
    app = Toolbox().include(orders)
    index = ToolIndex(app, embedder=HashingEmbedder(), min_similarity=-1.0)
    assert sorted(index.names()) == ["orders.get_order", "orders.issue_refund"]

    @orders.tool
    def cancel_order(order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")]) -> str:
        """Cancel an order that has not shipped yet."""
        return order_id

    assert "orders.cancel_order" in index
    assert index.search("cancel my order")[0].name == "orders.cancel_order"
    orders.remove("orders.get_order")
    assert "orders.get_order" not in index
    index.close()  # stops following
    app.remove("orders.issue_refund")
    assert "orders.issue_refund" in index


def test_exclude_never_returns_the_named_tools():
    _, index = lexical_index()
    hits = index.search("export", k=5, exclude=("reports.start_export",))
    assert hits and all(h.name != "reports.start_export" for h in hits)
    hashed = ToolIndex(catalogue(), embedder=HashingEmbedder(), min_similarity=-1.0)
    assert all(
        h.name != "reports.check_export" for h in hashed.search("export", exclude={"reports.check_export"})
    )


def test_entries_come_from_every_common_definition_shape():
    schema = {"type": "object", "properties": {"city": {"type": "string", "description": "City"}}}
    shapes = [
        {"name": "w", "description": "d", "inputSchema": schema},  # MCP
        {"name": "w", "description": "d", "input_schema": schema},  # Anthropic
        {"type": "function", "function": {"name": "w", "description": "d", "parameters": schema}},  # OpenAI
        {"name": "w", "description": "d", "parameters": schema},  # BFCL
    ]
    for shape in shapes:
        entry = ToolEntry.from_mapping(shape)
        assert (entry.name, entry.description, entry.input_schema) == ("w", "d", schema)
    assert ToolEntry(name="a.b.c").effective_namespace == "a.b"
    assert ToolEntry(name="c", namespace="x").effective_namespace == "x"


def test_misuse_is_reported():
    with pytest.raises(UserError):
        ToolIndex(embedder="minilm")  # type: ignore[arg-type]
    index = ToolIndex(embedder=None)
    with pytest.raises(UserError):
        index.add(42)  # type: ignore[arg-type]


def test_concurrent_searches_and_updates_do_not_corrupt_the_index():
    box = catalogue()
    index = ToolIndex(box, embedder=HashingEmbedder(), min_similarity=-1.0)
    errors: list[BaseException] = []

    def searcher() -> None:
        try:
            for _ in range(200):
                for hit in index.search("order refund ticket export", k=5):
                    assert hit.name
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def writer() -> None:
        try:
            for i in range(100):
                index.add(ToolEntry(name=f"tmp.tool_{i}", description=f"temporary order tool {i}"))
                if i % 2:
                    index.remove(f"tmp.tool_{i - 1}")
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=searcher) for _ in range(3)] + [threading.Thread(target=writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len([n for n in index.names() if n.startswith("tmp.")]) == 50
