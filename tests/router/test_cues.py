"""Cue phrases come from the development set only, and match whole words."""

from __future__ import annotations

import re

from maitre.routing import Route, dev_requests
from maitre.routing.cues import CUES, cue_hits


def test_every_cue_phrase_occurs_in_the_development_set() -> None:
    """The rule that keeps seed 002's questions held out: no cue was written from them."""
    dev = [case.request for case in dev_requests()]
    for cue in CUES:
        for phrase in cue.phrases:
            pattern = re.compile(
                (r"^\s*" if cue.at_start else "") + r"\b" + re.escape(phrase).replace(r"\ ", r"\s+") + r"\b",
                re.IGNORECASE,
            )
            assert any(pattern.search(text) for text in dev), f"{cue.name}: {phrase!r} is not in the dev set"
        if cue.shape is not None:
            assert any(cue.pattern.search(text) for text in dev), f"{cue.name}: shape unused in the dev set"


def test_the_seeds_own_keywords_are_not_cues() -> None:
    for word in ("current", "tonight", "book", "compute", "trading", "settled", "seats"):
        assert not any(cue.pattern.search(word) for cue in CUES), word


def test_cues_match_whole_words_not_substrings() -> None:
    """The baseline's bug: "book" inside "runbook". Here "up" does not fire inside "support"."""
    assert cue_hits("Who is the escalation contact in the support runbook?")[Route.ACT] == []
    assert cue_hits("Is the checkout service up at the moment?")[Route.ACT] == ["now", "live-state"]
    assert cue_hits("Shorten the email draft I pasted above.")[Route.CONTEXT] == [
        "points-above",
        "i-gave-it",
        "edit-verb",
    ]
