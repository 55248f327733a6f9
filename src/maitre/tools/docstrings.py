"""Read a tool's docstring: the prose becomes the description the model sees, the parameter section
the descriptions of the schema's properties.

Google (`Args:`), NumPy (`Parameters` underlined) and Sphinx (`:param x:`) styles are parsed by
griffe, so no section ever leaks into the description: a docstring is parsed in each style and the
reading that finds the most parameters (then the most sections) wins, Google on a tie, which
also tells a Sphinx docstring with a `Note:` apart from a Google one. What stays in the description is the text and
the admonitions (`Note:`, `Warning:`); what goes is everything meant for a Python reader instead
(parameters, returns, raises, yields, examples). A docstring with no sections is all description.
"""

from __future__ import annotations

import inspect
import logging
import re

import griffe

__all__ = ["parse_docstring"]

logger = logging.getLogger("maitre.tools")

_STYLES: tuple[griffe.DocstringStyle, ...] = ("google", "numpy", "sphinx")
_KIND = griffe.DocstringSectionKind
_PROSE = frozenset({_KIND.text, _KIND.admonition})
_PARAMETERS = frozenset({_KIND.parameters, _KIND.other_parameters})
_EXAMPLE_TITLES = frozenset({"example", "examples"})
_GOOGLE_HEADER = re.compile(
    r"^(Args|Arguments|Params|Parameters|Keyword Args|Keyword Arguments|Other Parameters|Returns?|"
    r"Raises|Yields|Receives|Warns|Attributes|Examples?|Notes?|Warnings?):\s*$"
)


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Return (description, {parameter: description}) from a docstring of any of the three styles."""
    if not doc:
        return "", {}
    text = _separate_google_headers(inspect.cleandoc(doc))
    best: tuple[tuple[int, int], list[griffe.DocstringSection], dict[str, str]] | None = None
    for style in _STYLES:
        try:
            sections = griffe.Docstring(text).parse(style, warnings=False)
        except Exception:  # a parser bug must not stop a tool from being defined
            logger.debug("griffe could not read a docstring as %s", style, exc_info=True)
            continue
        params = _parameters(sections)
        score = (len(params), sum(1 for s in sections if s.kind not in _PROSE))
        if best is None or score > best[0]:
            best = (score, sections, params)
    if best is None:
        return _tidy(text), {}
    return _tidy("\n\n".join(_prose(best[1]))), best[2]


def _separate_google_headers(text: str) -> str:
    """A blank line before each Google section header: griffe needs one, the old reader did not."""
    lines = text.splitlines()
    out: list[str] = []
    for line in lines:
        if out and out[-1].strip() and _GOOGLE_HEADER.match(line):
            out.append("")
        out.append(line)
    return "\n".join(out)


def _parameters(sections: list[griffe.DocstringSection]) -> dict[str, str]:
    params: dict[str, str] = {}
    for section in sections:
        if section.kind in _PARAMETERS:
            for param in section.value:
                description = " ".join(param.description.split())
                for name in param.name.split(","):  # `host, port: where it is bound`
                    name = name.strip().lstrip("*")
                    if name and description:
                        params[name] = description
    return params


def _prose(sections: list[griffe.DocstringSection]) -> list[str]:
    out: list[str] = []
    for section in sections:
        if section.kind is _KIND.text:
            out.append(section.value)
        elif section.kind is _KIND.admonition:
            title = section.title or section.value.annotation or ""
            if title.strip().lower() in _EXAMPLE_TITLES:
                continue  # an example shows a Python caller, not the model
            body = section.value.description
            out.append(f"{title}: {body}" if "\n" not in body else f"{title}:\n{body}")
    return out


def _tidy(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text.strip())
