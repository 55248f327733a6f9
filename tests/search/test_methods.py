"""Retrieval methods of issue 17: query decomposition, example requests, namespace context."""

from __future__ import annotations

import pytest

from maitre import UserError
from maitre.embeddings import HashingEmbedder
from maitre.search import ToolEntry, ToolIndex
from maitre.search.decompose import MAX_PARTS, split_request
from maitre.search.text import embedding_text, example_request, first_sentence

from .conftest import catalogue, needs_minilm


@pytest.mark.parametrize(
    ("request_text", "parts"),
    [
        (
            "search the web for reviews, summarise them and post the summary in #hardware",
            ["search the web for reviews summarise them", "post the summary in #hardware"],
        ),
        ("find the email from the recruiter, then put the interview on my calendar", None),
        ("read the contract PDF, pull out the payment terms and write them into a Word document", None),
        ("check whether the build failed and if so post the logs in the ticket", None),
        ("Look up the weather. After that, book a table for two", None),
    ],
)
def test_multi_step_requests_split_into_their_steps(request_text, parts):
    got = split_request(request_text)
    assert len(got) >= 2
    if parts is not None:
        assert got == parts
    assert all(len(p.split()) >= 2 for p in got)


@pytest.mark.parametrize(
    "text",
    [
        "black and white photos of cats",
        "Where is my order A1042?",
        "find flights from Paris to Rome and hotels",  # "hotels" starts no step
        "refund and",
        "",
    ],
)
def test_single_requests_stay_whole(text):
    assert split_request(text) == [text]


def test_at_most_four_parts():
    text = "; ".join(f"send report number {i} to the board" for i in range(7))
    parts = split_request(text)
    assert len(parts) == MAX_PARTS
    assert "number 6" in parts[-1]


def test_decomposition_brings_the_later_steps_tool_into_the_answer():
    box = catalogue()
    request = "export the sales dataset and then send an email message to the finance recipient"
    plain = ToolIndex(box, embedder=HashingEmbedder(), min_similarity=-1.0, decompose=False)
    split = ToolIndex(box, embedder=HashingEmbedder(), min_similarity=-1.0, decompose=True)
    for index in (plain, split):
        names = [h.name for h in index.search(request, k=2)]
        assert len(names) == 2
    names = [h.name for h in split.search(request, k=2)]
    assert set(names) == {"reports.start_export", "misc.send_email"}
    assert [h.name for h in plain.search(request, k=2, decompose=True)] == names  # per-search override


def test_lexical_only_index_decomposes_too():
    index = ToolIndex(catalogue(), embedder=None, decompose=True)
    names = [h.name for h in index.search("check the status of ticket T-000123, then refund the order", k=2)]
    assert set(names) == {"support.get_ticket_status", "orders.issue_refund"}


def test_example_request_is_short_and_keeps_what_the_tool_does():
    schema = {"type": "object", "properties": {"channel_id": {}, "text": {}, "thread": {}, "extra": {}}}
    text = example_request(
        "slack.slack_post_message", "Post a new message to a Slack channel. Long details follow.", schema
    )
    assert text == "slack post message: Post a new message to a Slack channel. (channel id, text, thread)"
    assert first_sentence("One two.\nThree") == "One two."
    assert "[google workspace]" in example_request("x", "d", None, namespace="google-workspace")
    assert embedding_text("a", "b", None, namespace="aws-billing").endswith("(from: aws billing)")


def test_examples_add_a_second_vector_that_can_win_and_follows_removal():
    box = catalogue()
    index = ToolIndex(box, embedder=HashingEmbedder(), examples=True, min_similarity=-1.0)
    assert index._examples is not None
    hit = index.search("get weather")[0]
    assert hit.name == "planner.get_weather"
    box.remove("planner.get_weather")
    assert "planner.get_weather" not in [h.name for h in index.search("get weather", k=20)]


def test_namespace_context_places_the_server_name_where_asked():
    entry = ToolEntry(name="slack.post_message", description="Post a message.")
    texts = {
        mode: ToolIndex(embedder=HashingEmbedder(), namespace_context=mode).embedding_text(entry)
        for mode in ("name", "suffix", "none")
    }
    assert texts["name"].startswith("slack.post_message (slack post message): Post a message.")
    assert texts["suffix"] == "post_message (post message): Post a message. (from: slack)"
    assert texts["none"] == "post_message (post message): Post a message."
    with pytest.raises(UserError):
        ToolIndex(embedder=None, namespace_context="prefix")  # type: ignore[arg-type]


def test_a_server_the_request_names_lifts_its_tools():
    tools = [
        ToolEntry(name=f"post_message_{n}", namespace=ns, description="Post a message to a channel.")
        for n, ns in (("a", "teams"), ("b", "slack"), ("c", "google-chat"))
    ]
    scores = {}
    for boost in (0.0, 0.1):
        index = ToolIndex(embedder=HashingEmbedder(), namespace_boost=boost, min_similarity=-1.0)
        index.add_many(tools)
        hits = index.search("post a message in slack", k=3)
        scores[boost] = {h.name: h.score for h in hits}
        if boost:
            assert hits[0].name == "post_message_b"
            assert index.search("post a message in google chat", k=1)[0].name == "post_message_c"
    assert scores[0.1]["post_message_b"] == pytest.approx(scores[0.0]["post_message_b"] + 0.1)
    assert scores[0.1]["post_message_a"] == pytest.approx(scores[0.0]["post_message_a"])


def test_a_dotted_name_alone_is_not_a_server_to_boost():
    index = ToolIndex(embedder=HashingEmbedder())
    index.add_definitions([{"name": "weather.get", "description": "Weather"}])
    index.add_definitions([{"name": "get", "description": "Weather"}], namespace="weather")
    assert index.search("weather")  # builds the namespace words
    boosted = index._boosted(["weather"])
    assert boosted is not None and len(boosted) == 1
    assert {index._by_slot[int(s)].entry.namespace for s in boosted} == {"weather"}


@needs_minilm
def test_the_shipped_default_finds_both_steps_of_a_seed_task(minilm_catalogue_index):
    box, _ = minilm_catalogue_index
    index = ToolIndex(box, decompose=True)
    names = [
        h.name for h in index.search("Where is my order A1042? Then email the customer about the delay", k=5)
    ]
    assert "orders.get_order" in names and "misc.send_email" in names
