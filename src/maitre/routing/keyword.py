"""Seed 002's keyword router: the kind a team ships first, kept as the baseline to beat.

The seed prints the router's code (`any(w in q for w in ACT_WORDS)`, then RETRIEVE_WORDS, else
CONTEXT) and its output on 18 questions (12/18), but not its word lists. The lists below are a
reconstruction that reproduces that output row for row, and the seed's two "break this"
experiments too: adding "guide" to ACT_WORDS makes 3 over-calls instead of 2, and deleting "current"
makes 4 under-calls and 11/18 (tests/router/test_keyword.py checks all three).

It matches substrings on purpose, as the seed's does: "book" fires inside "runbook" and
"handbook", the seed's two over-calls. Do not fix that here; it is the point of the baseline.
"""

from __future__ import annotations

from collections.abc import Sequence

from .labels import Decision, Route

__all__ = ["ACT_WORDS", "KeywordRouter", "RETRIEVE_WORDS"]

ACT_WORDS: tuple[str, ...] = ("book", "send", "current", "convert", "compute", "today")
"""Substrings that mean "something has to happen" to the seed's router."""
RETRIEVE_WORDS: tuple[str, ...] = ("policy", "guide", "documented")
"""Substrings that mean "a stored fact will do"."""


class KeywordRouter:
    """ACT if any ACT word occurs as a substring, else RETRIEVE if any RETRIEVE word does, else CONTEXT."""

    name = "keyword"

    def __init__(
        self, act_words: Sequence[str] = ACT_WORDS, retrieve_words: Sequence[str] = RETRIEVE_WORDS
    ) -> None:
        self.act_words = tuple(w.lower() for w in act_words)
        self.retrieve_words = tuple(w.lower() for w in retrieve_words)

    def route(self, request: str) -> Decision:
        """The seed's rule, with the word that fired as the reason."""
        text = request.lower()
        for label, words in ((Route.ACT, self.act_words), (Route.RETRIEVE, self.retrieve_words)):
            hit = next((w for w in words if w in text), None)
            if hit is not None:
                return Decision(
                    request=request,
                    label=label,
                    reason=f"{label.value}: the substring {hit!r} is in the request",
                    evidence={"word": hit},
                )
        return Decision(request=request, label=Route.CONTEXT, reason="CONTEXT: no keyword matched")

    def __repr__(self) -> str:
        return f"KeywordRouter({len(self.act_words)} ACT words, {len(self.retrieve_words)} RETRIEVE words)"
