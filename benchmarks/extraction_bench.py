"""Fact extraction quality: precision and recall on a held-out gold set, RuleExtractor and ModelExtractor.

What it measures (issue 16, item 4): hand-written multi-session conversations between a user and
an assistant (`benchmarks/data/extraction/`, format and scoring in its README) with the facts each
user turn states, including corrections, relocations, diet changes, negations, hypotheticals and
other people's facts. For each extractor, session by session as an application would call
`remember`:

- *precision / recall / F1* of the proposed facts against the gold facts of each turn;
- *state accuracy*: every session's candidates are written to a `MemoryStore` in order, and what is
  current at the end is compared with the gold `final` state (a missed correction leaves a stale
  value current, an invented fact makes a slot wrong);
- per tag: gold facts found, and proposals that are not in the gold (false positives) on turns with
  that tag (for `hypothetical` and `other_person` every proposal is a false positive).

The rows: `gold replay` (the gold facts written through the store: must be 1.00 everywhere, a check
of the set and the scorer), `RuleExtractor`, and `ModelExtractor` with a real model when one is
available: `MAITRE_BENCH_MODEL` = a local server URL (`http://127.0.0.1:8080/v1`, llama.cpp or any
OpenAI-compatible server; `URL#MODEL` names the model), or `anthropic[:MODEL]`, `openai[:MODEL]`;
without it, `ANTHROPIC_API_KEY` or `OPENAI_API_KEY` in the environment picks that provider. With
none, the row says "not run: no model". `MAITRE_BENCH_MODEL_LIMIT=N` runs the model on the first N
conversations of each part only (a CPU model), with the rule extractor's row on the same N beside it;
`MAITRE_BENCH_MODEL_ASK=text` asks for the JSON as text instead of through the tool (a small model
that answers rather than calls).
The scripted model is not a row: it tests parsing in CI, not
quality.

Numbers are quoted on the held-out part; the development part (on which the rules and the prompt
were tuned) is printed beside it for comparison.

`heldout_b` is a second held-out part, written after the rule work had seen the misses of the first
(the baseline run printed them), so one held-out part has never been seen by any tuning.

Usage: `python benchmarks/extraction_bench.py [--split heldout|heldout_b|dev|all] [--verbose]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import unicodedata
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from maitre.embeddings import HashingEmbedder
from maitre.memory import DEFAULT_VOCABULARY, Candidate, ConversationTurn, MemoryStore, RuleExtractor
from maitre.memory.model import DEFAULT_MULTI_VALUED, normalise_key

__all__ = ["Conversation", "GoldFact", "Scores", "load", "main", "score", "value_fold"]

DATA = Path(__file__).resolve().parent / "data" / "extraction"
SPLITS = ("heldout", "heldout_b", "dev")
"""`heldout` and `heldout_b` are reported; `dev` is where the rules and the prompt were tuned."""
TAGS = ("plain", "correction", "relocation", "diet_change", "negation", "hypothetical", "other_person")
Propose = Callable[[Sequence[ConversationTurn]], Awaitable[list[Candidate]]]


# -- the set -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GoldFact:
    key: str
    values: tuple[str, ...]
    """Accepted spellings, folded."""
    retract: bool = False


@dataclass
class Turn:
    turn: ConversationTurn
    tags: tuple[str, ...] = ()
    facts: list[GoldFact] = field(default_factory=list)
    optional: list[GoldFact] = field(default_factory=list)


@dataclass
class Conversation:
    id: str
    sessions: list[list[Turn]]
    final: dict[str, Any]


def canonical(key: str) -> str:
    return DEFAULT_VOCABULARY.canonical(normalise_key(key))


_ARTICLE = re.compile(r"^(?:a|an|the)\s+")
_PUNCT = re.compile(r"[\"'`.,;:!?()\[\]]+")


def value_fold(value: str) -> str:
    """The scorer's value identity: NFKC, case folded, no punctuation, no leading article or plural s."""
    text = unicodedata.normalize("NFKC", value).casefold().replace("\u2019", "'")
    text = _PUNCT.sub(" ", text.replace("-", " "))
    text = _ARTICLE.sub("", " ".join(text.split()))
    if len(text) > 3 and text.endswith("s") and not text.endswith("ss"):
        text = text[:-1]
    return text


def _gold(item: dict[str, Any]) -> GoldFact:
    raw = item["value"]
    values = tuple(value_fold(v) for v in (raw if isinstance(raw, list) else [raw]))
    return GoldFact(key=canonical(item["key"]), values=values, retract=bool(item.get("retract", False)))


def load(split: str) -> list[Conversation]:
    """The conversations of one split (`heldout`, `heldout_b` or `dev`), with turn ids and times."""
    data = json.loads((DATA / f"{split}.json").read_text(encoding="utf-8"))
    out = []
    for conv in data["conversations"]:
        sessions = []
        for s_index, session in enumerate(conv["sessions"], start=1):
            start = datetime.fromisoformat(session["at"].replace("Z", "+00:00")).astimezone(UTC)
            turns = []
            for t_index, turn in enumerate(session["turns"], start=1):
                message = ConversationTurn(
                    role=turn["role"],
                    content=turn["text"],
                    id=f"{conv['id']}-s{s_index}-t{t_index}",
                    at=start + timedelta(minutes=t_index),
                )
                turns.append(
                    Turn(
                        turn=message,
                        tags=tuple(turn.get("tags", ())),
                        facts=[_gold(f) for f in turn.get("facts", [])],
                        optional=[_gold(f) for f in turn.get("optional", [])],
                    )
                )
            sessions.append(turns)
        out.append(Conversation(id=conv["id"], sessions=sessions, final=conv.get("final", {})))
    return out


# -- scoring -------------------------------------------------------------------------------------


def _matches(gold: GoldFact, key: str, value: str, retract: bool) -> bool:
    if gold.key != key or gold.retract != retract:
        return False
    if retract and key not in DEFAULT_MULTI_VALUED:
        return True  # a retraction of a single-valued key ends the slot whatever its value
    return value_fold(value) in gold.values


@dataclass
class Scores:
    proposed: int = 0
    matched: int = 0
    gold: int = 0
    found: int = 0
    slots: int = 0
    slots_right: int = 0
    by_tag: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0, 0]))
    """tag -> [gold facts found, gold facts, false positives] over turns with that tag."""
    misses: list[str] = field(default_factory=list)
    false_positives: list[str] = field(default_factory=list)
    wrong_slots: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def precision(self) -> float:
        return self.matched / self.proposed if self.proposed else 1.0

    @property
    def recall(self) -> float:
        return self.found / self.gold if self.gold else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def state(self) -> float:
        return self.slots_right / self.slots if self.slots else 1.0


def _score_turn(turn: Turn, proposals: list[Candidate], scores: Scores) -> None:
    open_gold = list(turn.facts)
    fps = 0
    for c in proposals:
        key = canonical(c.key)
        hit = next((g for g in open_gold if _matches(g, key, c.value, c.retract)), None)
        if hit is not None:
            open_gold.remove(hit)
            scores.proposed += 1
            scores.matched += 1
        elif any(_matches(g, key, c.value, c.retract) for g in turn.optional):
            continue
        else:
            scores.proposed += 1
            fps += 1
            mark = "retract " if c.retract else ""
            scores.false_positives.append(
                f"{turn.turn.id}: {mark}{key}={c.value!r}  <- {turn.turn.content!r}"
            )
    found = len(turn.facts) - len(open_gold)
    scores.gold += len(turn.facts)
    scores.found += found
    for g in open_gold:
        mark = "retract " if g.retract else ""
        scores.misses.append(f"{turn.turn.id}: {mark}{g.key}={g.values[0]!r}  <- {turn.turn.content!r}")
    for tag in turn.tags:
        cell = scores.by_tag[tag]
        cell[0] += found
        cell[1] += len(turn.facts)
        cell[2] += fps


def _check_state(store: MemoryStore, conv: Conversation, scores: Scores) -> None:
    for raw_key, expected in conv.final.items():
        key = canonical(raw_key)
        scores.slots += 1
        if key in DEFAULT_MULTI_VALUED:
            want = [set(value_fold(v) for v in (e if isinstance(e, list) else [e])) for e in expected or []]
            have = [value_fold(f.value) for f in store.values(conv.id, key)]
            ok = len(have) == len(want) and all(any(h in w for h in have) for w in want)
            ok = ok and all(any(h in w for w in want) for h in have)
        else:
            fact = store.current(conv.id, key)
            if expected is None:
                ok = fact is None
            else:
                accepted = {value_fold(v) for v in (expected if isinstance(expected, list) else [expected])}
                ok = fact is not None and value_fold(fact.value) in accepted
            have = [fact.value] if fact is not None else []
        if ok:
            scores.slots_right += 1
        else:
            scores.wrong_slots.append(f"{conv.id}: {key} is {have!r}, gold {expected!r}")


async def score(conversations: Sequence[Conversation], propose: Propose) -> Scores:
    """Extract session by session, score each turn, write everything through a store, check `final`."""
    scores = Scores()
    started = time.perf_counter()
    for conv in conversations:
        store = MemoryStore.sqlite(":memory:", embedder=HashingEmbedder())
        try:
            for session in conv.sessions:
                proposals = await propose([t.turn for t in session])
                by_source: dict[str, list[Candidate]] = defaultdict(list)
                for c in proposals:
                    by_source[c.source].append(c)
                for t in session:
                    if t.turn.role == "user":
                        _score_turn(t, by_source.get(f"message:{t.turn.id}", []), scores)
                store.write_candidates(conv.id, proposals)
            _check_state(store, conv, scores)
        finally:
            store.close()
    scores.seconds = time.perf_counter() - started
    return scores


def gold_proposer(conversations: Sequence[Conversation]) -> Propose:
    """Proposes exactly the gold facts (first accepted spelling): the check row."""
    by_id = {t.turn.id: t for conv in conversations for s in conv.sessions for t in s}

    async def propose(turns: Sequence[ConversationTurn]) -> list[Candidate]:
        out = []
        for message in turns:
            for g in by_id[message.id].facts:
                out.append(
                    Candidate(
                        key=g.key,
                        value=g.values[0],
                        valid_from=message.at,
                        source=f"message:{message.id}",
                        retract=g.retract,
                    )
                )
        return out

    return propose


def rule_proposer() -> Propose:
    extractor = RuleExtractor()

    async def propose(turns: Sequence[ConversationTurn]) -> list[Candidate]:
        return extractor.extract(turns)

    return propose


# -- a real model, when one is configured ----------------------------------------------------------


def model_from_env() -> tuple[Any, str] | tuple[None, str]:
    """(model, label) from MAITRE_BENCH_MODEL or a provider key, or (None, why not)."""
    spec = os.environ.get("MAITRE_BENCH_MODEL", "").strip()
    if not spec:
        if os.environ.get("ANTHROPIC_API_KEY"):
            spec = "anthropic"
        elif os.environ.get("OPENAI_API_KEY"):
            spec = "openai"
        else:
            return None, "not run: no model (set MAITRE_BENCH_MODEL or a provider key)"
    if spec.startswith(("http://", "https://")):
        spec = "openai-compatible:" + spec
    kind, _, rest = spec.partition(":")
    if kind == "anthropic":
        from maitre.models import AnthropicModel

        model: Any = AnthropicModel(rest) if rest else AnthropicModel()
    elif kind == "openai":
        from maitre.models import OpenAIChatModel

        model = OpenAIChatModel(rest or "gpt-4.1-mini")
    elif kind == "openai-compatible":
        from maitre.models import OpenAICompatibleModel

        url, _, name = rest.partition("#")
        model = OpenAICompatibleModel(url, name or "local", temperature=0.0, seed=7)
    else:
        return None, f"not run: unknown MAITRE_BENCH_MODEL {spec!r}"
    return model, getattr(model, "name", kind)


# -- report --------------------------------------------------------------------------------------


def _row(label: str, s: Scores | None, note: str = "") -> list[str]:
    if s is None:
        return [label, "-", "-", "-", "-", "-", "-", "-", note]
    return [
        label,
        f"{s.precision:.2f}",
        f"{s.recall:.2f}",
        f"{s.f1:.2f}",
        f"{s.state:.2f}",
        f"{s.matched}/{s.proposed}",
        f"{s.found}/{s.gold}",
        f"{s.seconds:.1f}",
        note,
    ]


def _print(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    for r in [header, *rows]:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


async def run(split: str, *, verbose: bool) -> dict[str, Scores | None]:
    conversations = load(split)
    results: dict[str, Scores | None] = {
        "gold replay": await score(conversations, gold_proposer(conversations)),
        "RuleExtractor": await score(conversations, rule_proposer()),
    }
    model, label = model_from_env()
    model_note = label
    if model is not None and split == "dev" and not os.environ.get("MAITRE_BENCH_MODEL_DEV"):
        model, model_note = None, "not run on dev (MAITRE_BENCH_MODEL_DEV=1 runs it)"
    if model is not None:
        from maitre.memory.model_extractor import ModelExtractor

        ask = "text" if os.environ.get("MAITRE_BENCH_MODEL_ASK") == "text" else "tool"
        extractor = ModelExtractor(model, max_output_tokens=1024, ask_with=ask)
        if ask == "text":
            label = f"{label}, JSON as text"
        subset = conversations
        limit = int(os.environ.get("MAITRE_BENCH_MODEL_LIMIT", "0") or 0)
        if limit and limit < len(conversations):  # a CPU model: the first N conversations only
            subset = conversations[:limit]
            label = f"{label}, first {limit} conversations"
            results[f"RuleExtractor (same {limit})"] = await score(subset, rule_proposer())
        try:
            results[f"ModelExtractor ({label})"] = await score(subset, extractor.extract)
            st = extractor.stats
            model_note = (
                f"{label}: {st.calls} calls, {st.replies_malformed} malformed replies, "
                f"{st.facts_invalid} invalid facts, {st.facts_unknown_message} uncited"
            )
        except Exception as exc:  # a model that is down is reported, not fatal to `make bench`
            results["ModelExtractor"] = None
            model_note = f"not run: {type(exc).__name__}: {str(exc)[:120]}"
    else:
        results["ModelExtractor"] = None

    n_turns = sum(1 for c in conversations for s in c.sessions for t in s if t.turn.role == "user")
    header = [
        "extractor",
        "precision",
        "recall",
        "F1",
        "state acc",
        "matched/proposed",
        "found/gold",
        "s",
        "note",
    ]
    rows = [_row(name, s, model_note if s is None else "") for name, s in results.items()]
    _print(f"extraction, {split}: {len(conversations)} conversations, {n_turns} user turns", header, rows)
    if model is not None and model_note:
        print(f"  model: {model_note}")

    tag_header = ["tag", *[name for name, s in results.items() if s is not None and name != "gold replay"]]
    tag_rows = []
    for tag in TAGS:
        cells = [tag]
        for name, s in results.items():
            if s is None or name == "gold replay":
                continue
            found, gold, fps = s.by_tag.get(tag, [0, 0, 0])
            cells.append(f"found {found}/{gold}, false pos {fps}")
        tag_rows.append(cells)
    _print(f"per tag, {split} (gold facts found; proposals not in the gold)", tag_header, tag_rows)

    if verbose:
        for name, s in results.items():
            if s is None or name == "gold replay":
                continue
            for what, items in (
                ("missed", s.misses),
                ("false positive", s.false_positives),
                ("wrong state", s.wrong_slots),
            ):
                for item in items:
                    print(f"  [{name}] {what}: {item}")
    return results


async def amain(splits: Sequence[str], *, verbose: bool) -> int:
    load1, load5, load15 = os.getloadavg()
    print(f"load average: {load1:.2f} {load5:.2f} {load15:.2f}")
    status = 0
    for split in splits:
        results = await run(split, verbose=verbose)
        check = results["gold replay"]
        if check is None or (check.precision, check.recall, check.state) != (1.0, 1.0, 1.0):
            print(f"the gold replay of {split} is not exact: the set or the scorer is wrong", file=sys.stderr)
            if check is not None:
                for item in check.wrong_slots:
                    print(f"  {item}", file=sys.stderr)
            status = 1
    return status


def main(quick: bool = False) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--split", choices=[*SPLITS, "all"], default="all")
    parser.add_argument(
        "--verbose", action="store_true", help="list every miss, false positive and wrong slot"
    )
    parser.add_argument("--quick", action="store_true", help="the same (the set is small)")
    options = parser.parse_args()
    splits = list(SPLITS) if options.split == "all" else [options.split]
    status = anyio.run(lambda: amain(splits, verbose=options.verbose))
    if status:
        raise SystemExit(status)


if __name__ == "__main__":
    main()
