"""The reports: hostile case text and model output are escaped everywhere; the page is self-contained."""

from __future__ import annotations

import io
import json
import re
from html.parser import HTMLParser

from rich.console import Console

from maitre.evals.report import dumps, load_document, render_html, summary_tables
from maitre.evals.report.html import CSP

from .hostile import CLOSE, IMAGE, MARKUP, SCRIPT, hostile_document


def test_every_hostile_text_is_escaped_in_the_html() -> None:
    page = render_html(hostile_document())
    assert "<script" not in page.lower()
    assert "<img" not in page.lower()
    assert "</pre></details></svg>" not in page  # the closing-tag breakout stays text
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;" in page
    assert page.count("<svg") == page.count("</svg>") >= 4


class Tags(HTMLParser):
    """Every element and attribute of a page, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)


def test_the_page_forbids_scripts_and_loads_nothing_from_outside() -> None:
    page = render_html(hostile_document())
    assert f'content="{CSP}"' in page and "default-src 'none'" in CSP
    parsed = Tags()
    parsed.feed(page)
    assert not parsed.tags & {"script", "img", "iframe", "link", "object", "embed", "image", "use", "a"}
    assert not {a for a in parsed.attributes if a.startswith("on") or a in ("src", "href", "xlink:href")}
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) == {
        "http://www.w3.org/2000/svg"
    }  # a namespace, not a load


def test_the_terminal_summary_prints_case_text_literally() -> None:
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(summary_tables(hostile_document()))
    text = out.getvalue()
    assert MARKUP[:20] in text  # rich markup in a case id is shown, not interpreted


def test_the_json_report_round_trips(tmp_path: object) -> None:
    document = hostile_document()
    path = tmp_path / "r.json"  # type: ignore[operator]
    path.write_text(dumps(document))
    loaded = load_document(path)
    assert loaded == json.loads(dumps(document))
    run = loaded["cases"][0]["runs"][0]
    assert IMAGE in run["final_text"] and CLOSE in run["final_text"]
    assert SCRIPT in loaded["cases"][0]["id"]
