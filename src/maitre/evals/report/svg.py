"""Small inline SVG charts for the HTML report, written by hand: no library, no script, no asset.

Each function returns one `<svg>` element as text. Every label passes through `esc`, because
case ids, tool names and checks come from case files and model output: untrusted text.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

__all__ = ["confusion_matrix", "esc", "grouped_bars", "outcome_grid", "ratio_bars"]

_FONT = 'font-family="system-ui, sans-serif" font-size="12"'
_PASS, _FAIL, _BAR, _MIN = "#2e7d32", "#c62828", "#3559a8", "#9e9e9e"


def esc(text: object) -> str:
    """`text` safe inside HTML and SVG text and attribute values."""
    return html.escape(str(text), quote=True)


def _clip(text: str, limit: int = 28) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def ratio_bars(rows: Sequence[tuple[str, float | None]], *, title: str) -> str:
    """One horizontal bar per metric with a value between 0 and 1 ("-" for an unmeasured one)."""
    label_w, bar_w, row_h = 210, 360, 22
    height = 28 + row_h * len(rows)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{label_w + bar_w + 70}" height="{height}" '
        f'aria-label="{esc(title)}" {_FONT}>',
        f"<title>{esc(title)}</title>",
    ]
    for index, (name, value) in enumerate(rows):
        y = 20 + index * row_h
        parts.append(f'<text x="{label_w - 8}" y="{y + 13}" text-anchor="end">{esc(_clip(name))}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{bar_w}" height="16" fill="#eeeeee"/>')
        if value is not None:
            width = max(0.0, min(1.0, value)) * bar_w
            parts.append(
                f'<rect x="{label_w}" y="{y}" width="{width:.1f}" height="16" fill="{_BAR}">'
                f"<title>{esc(name)}: {value:.3f}</title></rect>"
            )
        shown = "-" if value is None else f"{value * 100:.1f}%"
        parts.append(f'<text x="{label_w + bar_w + 6}" y="{y + 13}">{esc(shown)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def outcome_grid(rows: Sequence[tuple[str, Sequence[tuple[bool, str]]]]) -> str:
    """A row per case, a square per trial: green passed, red failed (hover: what failed)."""
    label_w, cell, gap = 230, 16, 4
    trials = max((len(t) for _, t in rows), default=1)
    width = label_w + trials * (cell + gap) + 60
    height = 12 + len(rows) * (cell + gap)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" height="{height}" '
        f'aria-label="per-case outcomes" {_FONT}>',
        "<title>per-case outcomes</title>",
    ]
    for index, (case_id, outcomes) in enumerate(rows):
        y = 6 + index * (cell + gap)
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 12}" text-anchor="end"><title>{esc(case_id)}</title>'
            f"{esc(_clip(case_id, 32))}</text>"
        )
        for trial, (ok, why) in enumerate(outcomes):
            x = label_w + trial * (cell + gap)
            tip = f"{case_id} trial {trial + 1}: " + ("passed" if ok else f"failed - {why}")
            parts.append(
                f'<rect class="{"pass" if ok else "fail"}" x="{x}" y="{y}" width="{cell}" height="{cell}" '
                f'fill="{_PASS if ok else _FAIL}"><title>{esc(tip)}</title></rect>'
            )
        passed = sum(ok for ok, _ in outcomes)
        parts.append(
            f'<text x="{label_w + trials * (cell + gap) + 4}" y="{y + 12}">{passed}/{len(outcomes)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def confusion_matrix(
    expected: Sequence[str], chosen: Sequence[str], counts: dict[tuple[str, str], int]
) -> str:
    """Rows: the tool a case expected; columns: the tool the model chose; cells: trials."""
    cell, label_w, head_h = 44, 190, 130
    width = label_w + cell * len(chosen) + 110  # room for the last rotated column label
    height = head_h + cell * len(expected) + 10
    top = max(counts.values(), default=1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" height="{height}" '
        f'aria-label="confusion matrix of chosen versus expected tools" {_FONT}>',
        "<title>chosen (columns) versus expected (rows) tools</title>",
    ]
    for column, name in enumerate(chosen):
        x = label_w + column * cell + cell / 2
        parts.append(
            f'<text transform="translate({x + 4:.0f},{head_h - 6}) rotate(-50)"><title>{esc(name)}</title>'
            f"{esc(_clip(name, 22))}</text>"
        )
    for row, want in enumerate(expected):
        y = head_h + row * cell
        parts.append(
            f'<text x="{label_w - 8}" y="{y + cell / 2 + 4:.0f}" text-anchor="end"><title>{esc(want)}</title>'
            f"{esc(_clip(want, 26))}</text>"
        )
        for column, got in enumerate(chosen):
            count = counts.get((want, got), 0)
            x = label_w + column * cell
            shade = 0.12 + 0.88 * count / top if count else 0.0
            colour = _PASS if want == got else _FAIL
            parts.append(
                f'<rect x="{x}" y="{y}" width="{cell - 2}" height="{cell - 2}" fill="{colour}" '
                f'fill-opacity="{shade:.2f}" stroke="#cccccc"><title>expected {esc(want)}, chose {esc(got)}: '
                f"{count}</title></rect>"
            )
            if count:
                parts.append(
                    f'<text x="{x + cell / 2 - 1:.0f}" y="{y + cell / 2 + 4:.0f}" text-anchor="middle" '
                    f'fill="{"#ffffff" if shade > 0.5 else "#000000"}">{count}</text>'
                )
    parts.append("</svg>")
    return "".join(parts)


def grouped_bars(rows: Sequence[tuple[str, float, float, float, float]]) -> str:
    """Per case: mean calls beside the minimum, mean steps beside the minimum (trajectory lengths)."""
    label_w, bar_h, row_h, plot_w = 230, 7, 38, 320
    top = max((max(r[1:]) for r in rows), default=1.0) or 1.0
    height = 40 + len(rows) * row_h
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{label_w + plot_w + 260}" height="{height}" '
        f'aria-label="trajectory lengths" {_FONT}>',
        "<title>trajectory lengths: calls and steps against the minimum</title>",
        f'<rect x="{label_w}" y="4" width="10" height="8" fill="{_BAR}"/><text x="{label_w + 14}" y="12">calls</text>',
        f'<rect x="{label_w + 60}" y="4" width="10" height="8" fill="#7b1fa2"/>'
        f'<text x="{label_w + 74}" y="12">steps</text>',
        f'<rect x="{label_w + 120}" y="4" width="10" height="8" fill="{_MIN}"/>'
        f'<text x="{label_w + 134}" y="12">minimum</text>',
    ]
    for index, (case_id, calls, min_calls, steps, min_steps) in enumerate(rows):
        y = 24 + index * row_h
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end"><title>{esc(case_id)}</title>'
            f"{esc(_clip(case_id, 32))}</text>"
        )
        for offset, value, colour, what in (
            (0, calls, _BAR, "calls"),
            (bar_h + 1, min_calls, _MIN, "minimum calls"),
            (2 * (bar_h + 1) + 2, steps, "#7b1fa2", "steps"),
            (3 * (bar_h + 1) + 2, min_steps, _MIN, "minimum steps"),
        ):
            width = value / top * plot_w
            parts.append(
                f'<rect x="{label_w}" y="{y + offset}" width="{width:.1f}" height="{bar_h}" fill="{colour}">'
                f"<title>{esc(case_id)}: {what} {value:.2f}</title></rect>"
            )
        parts.append(
            f'<text x="{label_w + plot_w + 8}" y="{y + 16}">{calls:.1f} / {min_calls:.0f} calls, '
            f"{steps:.1f} / {min_steps:.0f} steps</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
