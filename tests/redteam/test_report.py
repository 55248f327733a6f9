"""The red-team report: the JSON document and its thresholds, the terminal summary, and the HTML
page opened in headless Chromium, where a hostile server's text stays text."""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from maitre.redteam import Attempt, Case, RedteamResult
from maitre.redteam.report import (
    build_document,
    check_thresholds,
    dumps,
    parse_threshold,
    render_html,
    summary,
)

SCRIPT = "<script>alert('pwned')</script>"
IMAGE = "<img src=x onerror=alert('pwned')>"


def _result() -> RedteamResult:
    """Three cases, one of each outcome, with a hostile server's text in every field it can reach."""
    leak = Attempt(
        tool=f"read_file{SCRIPT}",
        arguments={"path": IMAGE},
        response=f"root:x:0:0 {IMAGE}",
        leaked=["root:x:0:0"],
    )
    ran = Attempt(
        tool="refund", arguments={"amount_cents": "100"}, response="refunded", effects=[{"tool": "refund"}]
    )
    refused = Attempt(
        tool="refund", arguments={}, response="no", is_error=True, error_code="INVALID_ARGUMENTS"
    )
    cases = [
        Case(
            plugin="malicious_parameters",
            id=f"malicious_parameters/{SCRIPT}",
            title=SCRIPT,
            outcome="leaked",
            why=IMAGE,
            attempts=[leak],
        ),
        Case(
            plugin="malicious_parameters",
            id="malicious_parameters/wrong",
            title="wrong type",
            outcome="executed",
            why="ran",
            attempts=[ran],
        ),
        Case(
            plugin="unknown_tool",
            id="unknown_tool/x",
            title="unknown",
            outcome="blocked",
            why="refused",
            attempts=[refused],
        ),
    ]
    return RedteamResult(
        target=f"http://127.0.0.1:1/mcp{SCRIPT}",
        kind="mcp-http",
        plugins=["unknown_tool", "malicious_parameters"],
        cases=cases,
        tools=["refund", SCRIPT],
        measured_by="the side channel and the replies",
        started_at=1_780_000_000.0,
    )


def test_the_document_counts_what_got_through_and_holds_thresholds() -> None:
    document = build_document(_result())
    metrics = document["metrics"]
    assert (metrics["blocked"], metrics["executed"], metrics["leaked"]) == (1, 1, 1)
    assert metrics["attack_success_rate"] == pytest.approx(2 / 3)
    assert metrics["malicious_parameters.leaked"] == 1 and metrics["unknown_tool.executed"] == 0
    results = check_thresholds(document, [])  # the default: executed=0, leaked=0
    assert [(r.metric, r.ok) for r in results] == [("executed", False), ("leaked", False)]
    results = check_thresholds(document, [parse_threshold("unknown_tool.executed=0")])
    assert [r.ok for r in results] == [True] and document["thresholds"][0][
        "metric"
    ] == "unknown_tool.executed"
    assert json.loads(dumps(document)) == document


def test_a_plugin_without_cases_is_measured_as_zero_not_missing() -> None:
    result = _result()
    result.plugins.append("cross_tenant")
    result.notes["cross_tenant"] = "no --foreign-id"
    document = build_document(result)
    assert document["metrics"]["cross_tenant.executed"] == 0
    assert document["metrics"]["cross_tenant.attack_success_rate"] is None
    row = next(p for p in document["plugins"] if p["name"] == "cross_tenant")
    assert row["cases"] == 0 and row["note"] == "no --foreign-id"


def test_the_terminal_summary_prints_server_text_literally() -> None:
    document = build_document(_result())
    check_thresholds(document, [])
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(summary(document))
    text = out.getvalue()
    assert "2 attack(s) got through" in text and "MISSED" in text
    assert "[script]" not in text and "<script>" in text  # not read as markup, not dropped


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    path = shutil.which("chromium")
    if path is None:
        why = "no `chromium` on PATH (apt-get install -y chromium)"
        if os.environ.get("MAITRE_BROWSER_TESTS") == "required":
            pytest.fail(why)
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with ThreadPoolExecutor(1) as worker:  # Playwright's sync API wants a thread without an event loop
        p = worker.submit(lambda: sync_playwright().start()).result(timeout=60)
        browser = worker.submit(
            lambda: p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        ).result(timeout=60)
        try:
            yield worker, browser
        finally:
            worker.submit(browser.close).result(timeout=60)
            worker.submit(p.stop).result(timeout=60)


def _inspect(browser: Any, page_file: Path) -> dict[str, Any]:
    context = browser.new_context(java_script_enabled=True)
    page = context.new_page()
    requests: list[str] = []
    dialogs: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    try:
        page.goto(page_file.as_uri())
        page.locator("#cases summary").first.click()
        seen = {
            "title": page.title(),
            "requests": list(requests),
            "dialogs": list(dialogs),
            "active": page.evaluate("document.querySelectorAll('script, img, iframe, object, embed').length"),
            "svgs": page.locator("svg").count(),
            "squares": page.locator("#outcomes rect.pass").count()
            + page.locator("#outcomes rect.fail").count(),
            "cases": page.locator("#cases details").count(),
            "outcomes": page.eval_on_selector_all("#cases details", "els => els.map(e => e.dataset.outcome)"),
            "first": page.locator("#cases details").first.inner_text(),
            "totals": page.locator("#totals").inner_text(),
            "bars": page.locator("#plugin-bars svg").bounding_box(),
        }
        return seen
    finally:
        context.close()


def test_the_html_report_renders_in_chromium_and_nothing_hostile_runs(chromium: Any, tmp_path: Path) -> None:
    worker, browser = chromium
    document = build_document(_result())
    check_thresholds(document, [])
    page_file = tmp_path / "redteam.html"
    page_file.write_text(render_html(document), encoding="utf-8")
    seen = worker.submit(_inspect, browser, page_file).result(timeout=60)
    assert seen["title"] == f"maitre redteam - http://127.0.0.1:1/mcp{SCRIPT}"  # as text: no script set it
    assert seen["requests"] == [page_file.as_uri()]  # the page, and nothing it fetched
    assert seen["dialogs"] == [] and seen["active"] == 0
    assert seen["svgs"] >= 2 and seen["squares"] == 3
    assert seen["cases"] == 3 and seen["outcomes"] == ["leaked", "executed", "blocked"]
    assert SCRIPT in seen["first"] and IMAGE in seen["first"] and "root:x:0:0" in seen["first"]
    assert seen["totals"] == "1 blocked, 1 executed, 1 leaked"
    assert seen["bars"] is not None and seen["bars"]["width"] > 300
