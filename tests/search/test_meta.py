"""The search_tools meta-tool through the gate: what it reveals becomes callable, and is recorded."""

import pytest

from maitre import Gate, Principal, Toolbox, ToolCall, UserError
from maitre.embeddings import HashingEmbedder
from maitre.search import (
    SEARCH_TOOL_NAME,
    RevealLog,
    RevealRecord,
    ToolIndex,
    ToolVisibility,
    search_tools_toolbox,
)

from .conftest import catalogue, needs_minilm

pytestmark = pytest.mark.anyio

PRINCIPAL = Principal(user="u1")


def setup(index: ToolIndex, tools: Toolbox, **options) -> tuple[Toolbox, Gate, RevealLog]:
    log = RevealLog()
    box = Toolbox().include(tools).include(search_tools_toolbox(index, log=log, **options))
    return box, Gate(box), log


def provider_names(definitions) -> list[str]:
    return [definitions.to_canonical(d.get("function", d)["name"]) for d in definitions]


@needs_minilm
async def test_a_search_reveals_tools_for_the_next_step_and_the_reveal_is_recorded(minilm_catalogue_index):
    tools, index = minilm_catalogue_index
    box, gate, log = setup(index, tools)
    run = gate.new_run(PRINCIPAL)
    view = ToolVisibility(box, core=["orders.get_order"], run=run)

    # Step 1: the model sees the core tool and search_tools, nothing else.
    assert provider_names(view.definitions("anthropic")) == ["orders.get_order", SEARCH_TOOL_NAME]
    refused = await gate.call(ToolCall(id="c1", name="orders.issue_refund", arguments={}), PRINCIPAL, run)
    assert refused.is_error and refused.error.code == "UNKNOWN_TOOL"
    assert "not available in this run yet" in refused.content and "search_tools" in refused.content

    # The model searches.
    found = await gate.call(
        ToolCall(id="c2", name=SEARCH_TOOL_NAME, arguments={"query": "refund a damaged order", "k": 3}),
        PRINCIPAL,
        run,
    )
    assert not found.is_error, found.content
    shown = [t["name"] for t in found.structured["tools"]]
    assert shown[0] == "orders.issue_refund"
    assert all(set(t) == {"name", "description", "score"} for t in found.structured["tools"])
    assert "now callable" in found.structured["note"]

    # Step 2: the revealed tools are in the definitions, and callable.
    step2 = provider_names(view.definitions("openai"))
    assert step2[:1] == ["orders.get_order"] and SEARCH_TOOL_NAME in step2
    assert set(step2) == {"orders.get_order", SEARCH_TOOL_NAME, *shown}
    assert view.revealed == [n for n in box.names() if n in set(shown) - {"orders.get_order"}]
    refund = await gate.call(
        ToolCall(
            id="c3",
            name="orders__issue_refund",
            arguments={"order_id": "A1042", "amount": "1200", "reason": "damaged"},
        ),
        PRINCIPAL,
        run,
    )
    assert not refund.is_error, refund.content

    # The reveal log says what was asked, what was shown with which scores, and what was new.
    (record,) = log.records
    assert isinstance(record, RevealRecord)
    assert record.query == "refund a damaged order" and record.k == 3 and record.run_id == run.run_id
    assert [t.name for t in record.shown] == shown
    assert [round(t.score, 3) for t in record.shown] == [t["score"] for t in found.structured["tools"]]
    assert "orders.issue_refund" in record.newly_visible
    assert "orders.get_order" not in record.newly_visible  # already core
    assert record.to_dict()["shown"][0]["name"] == "orders.issue_refund"
    assert log.for_run(run.run_id) == [record]


@needs_minilm
async def test_an_unrelated_search_reveals_nothing_and_says_what_to_do(minilm_catalogue_index):
    tools, index = minilm_catalogue_index
    box, gate, log = setup(index, tools)
    run = gate.new_run(PRINCIPAL)
    view = ToolVisibility(box, core=[], run=run)
    result = await gate.call(
        ToolCall(id="c1", name=SEARCH_TOOL_NAME, arguments={"query": "tell me a joke"}), PRINCIPAL, run
    )
    assert result.structured["tools"] == []
    assert "No tool matches" in result.structured["note"]
    assert view.visible == {SEARCH_TOOL_NAME}
    assert log.records[0].abstained and log.records[0].newly_visible == ()


async def test_reveals_are_per_run_and_survive_serialisation():
    tools = catalogue()
    index = ToolIndex(tools, embedder=None)
    box, gate, log = setup(index, tools)
    run_a, run_b = gate.new_run(PRINCIPAL), gate.new_run(PRINCIPAL)
    view_a = ToolVisibility(box, core=["orders.get_order"], run=run_a)
    view_b = ToolVisibility(box, core=["orders.get_order"], run=run_b)
    await gate.call(ToolCall(id="1", name=SEARCH_TOOL_NAME, arguments={"query": "export"}), PRINCIPAL, run_a)
    assert "reports.start_export" in view_a.visible
    assert "reports.start_export" not in view_b.visible
    from maitre import RunContext

    resumed = RunContext.from_dict(run_a.to_dict())
    assert "reports.start_export" in ToolVisibility(box, core=["orders.get_order"], run=resumed).visible
    assert [r.run_id for r in log] == [run_a.run_id]


async def test_the_search_tool_never_returns_itself_and_honours_a_namespace():
    tools = catalogue()
    index = ToolIndex(embedder=HashingEmbedder(), min_similarity=-1.0)
    log = RevealLog()
    search_box = search_tools_toolbox(index, log=log, namespace="reports")
    box = Toolbox().include(tools).include(search_box)
    index.add_many(box.tools())  # the index even contains search_tools itself
    gate = Gate(box)
    run = gate.new_run(PRINCIPAL)
    ToolVisibility(box, run=run)
    result = await gate.call(
        ToolCall(id="1", name=SEARCH_TOOL_NAME, arguments={"query": "search tools status export", "k": 10}),
        PRINCIPAL,
        run,
    )
    names = [t["name"] for t in result.structured["tools"]]
    assert names and SEARCH_TOOL_NAME not in names
    assert all(n.startswith("reports.") for n in names)
    assert log.records[0].namespace == "reports"


async def test_the_model_cannot_ask_for_too_many_tools_or_an_empty_query():
    tools = catalogue()
    _, gate, _ = setup(ToolIndex(tools, embedder=None), tools)
    for arguments in ({"query": "export", "k": 50}, {"query": ""}, {"k": 3}):
        run = gate.new_run(PRINCIPAL)  # a fresh run each: the gate also caps invalid calls per run
        result = await gate.call(ToolCall(id="1", name=SEARCH_TOOL_NAME, arguments=arguments), PRINCIPAL, run)
        assert result.is_error and result.error.code == "INVALID_ARGUMENTS"


def test_the_meta_tool_is_a_low_risk_read_and_its_definition_says_when_to_use_it():
    tool = search_tools_toolbox(ToolIndex(embedder=None)).get(SEARCH_TOOL_NAME)
    assert tool.effect == "read" and tool.risk == "low"
    assert "run" not in tool.input_schema["properties"]  # injected, never from the model
    assert set(tool.input_schema["properties"]) == {"query", "k"}
    assert "Use it when" in tool.description and "empty list means no tool fits" in tool.description


def test_visibility_rejects_unknown_core_tools_and_ignores_unknown_reveals():
    box = catalogue()
    with pytest.raises(UserError):
        ToolVisibility(box, core=["orders.nope"])
    view = ToolVisibility(box, core=["orders.get_order"])
    assert view.reveal(["planner.get_weather", "nope", "planner.get_weather"]) == ["planner.get_weather"]
    assert view.is_visible("planner.get_weather") and not view.is_visible("nope")
    assert view.revealed == ["planner.get_weather"]
    defs = view.definitions("mcp")
    assert [d["name"] for d in defs] == ["orders.get_order", "planner.get_weather"]
    assert defs.total_tokens == sum(defs.tokens.values()) > 0


def test_reveal_log_listeners_get_every_record():
    log = RevealLog()
    seen: list[RevealRecord] = []
    stop = log.subscribe(seen.append)
    record = RevealRecord(query="q", k=5, shown=(), newly_visible=())
    log.append(record)
    stop()
    log.append(RevealRecord(query="q2", k=5, shown=(), newly_visible=()))
    assert seen == [record] and len(log) == 2


async def test_tools_the_principal_lacks_scopes_for_are_never_revealed():
    tools = catalogue()

    def purge_customer(customer_id: str) -> str:
        return customer_id

    tools.add_tool(
        purge_customer,
        name="admin.purge_customer",
        description="Delete every order of a customer for good.",
        effect="destructive",
        scopes={"admin"},
    )
    index = ToolIndex(tools, embedder=None)
    _, gate, _ = setup(index, tools)
    query = {"query": "delete every order of a customer", "k": 10}
    for principal, expected in (
        (PRINCIPAL, False),
        (Principal(user="root", scopes=frozenset({"admin"})), True),
    ):
        run = gate.new_run(principal)
        result = await gate.call(ToolCall(id="1", name=SEARCH_TOOL_NAME, arguments=query), principal, run)
        names = [t["name"] for t in result.structured["tools"]]
        assert ("admin.purge_customer" in names) is expected, names
