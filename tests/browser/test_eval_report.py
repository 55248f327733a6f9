"""The `maitre eval` HTML report in headless Chromium: it renders its charts, and the hostile case
text and model output inside it stay text - nothing runs, nothing is fetched - with JavaScript on."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evals.hostile import SCRIPT, hostile_document  # tests/ is on sys.path: its packages import by name
from maitre.evals.report import render_html

from .conftest import ARTEFACTS


def test_the_report_renders_and_no_hostile_text_runs(browser: Any, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    with ThreadPoolExecutor(1) as worker:  # Playwright's sync API holds this thread's event loop
        document = worker.submit(hostile_document).result(timeout=60)
    report.write_text(render_html(document), encoding="utf-8")
    context = browser.new_context(java_script_enabled=True)
    page = context.new_page()
    requests: list[str] = []
    dialogs: list[str] = []
    violations: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.on("console", lambda message: violations.append(message.text))
    try:
        page.goto(report.as_uri())
        assert page.title() == f"maitre eval - {SCRIPT}"  # the file name, as text: no script set it
        assert requests == [report.as_uri()]  # the page itself, and nothing else
        assert dialogs == []
        assert page.evaluate("document.querySelectorAll('script, img, iframe, object, embed').length") == 0
        assert page.locator("svg").count() >= 4
        assert page.locator("#outcomes rect.pass").count() + page.locator("#outcomes rect.fail").count() == 4
        assert page.locator("#confusion rect").count() >= 1
        summary = page.locator("#cases summary").first
        assert SCRIPT in summary.inner_text()  # shown as the text it is
        summary.click()
        pre = page.locator("#cases details").first.locator("pre").first
        assert "<img src=x onerror=" in pre.inner_text()
        box = page.locator("#metric-bars svg").bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTEFACTS / "eval-report.png"), full_page=True)
        assert page.title() == f"maitre eval - {SCRIPT}"  # still: no script changed it after load
        assert not [v for v in violations if "pwned" in v]
    finally:
        context.close()
