"""Reports of an evaluation: the versioned JSON document, the terminal summary, the HTML page."""

from .document import SCHEMA, VERSION, build_document, dumps, load_document
from .html import render_html
from .terminal import comparison_tables, run_header, summary_tables

__all__ = [
    "SCHEMA",
    "VERSION",
    "build_document",
    "comparison_tables",
    "dumps",
    "load_document",
    "render_html",
    "run_header",
    "summary_tables",
]
