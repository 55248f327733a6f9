"""`ModelExtractor`: candidate facts proposed by a language model, validated before the store sees them.

The model reads the conversation (user turns, with the assistant's turns as context) and answers
with structured facts: by calling the `record_facts` tool whose JSON Schema it is given, or, for a
model or server without tool calls, with the same JSON object as text. Every fact is validated with
pydantic and mapped to the `Candidate`s `RuleExtractor` produces (canonical key, `message:<id>`
source, the message's time as valid_from), so the store's conflict rules, secret filter and
tombstones decide exactly as they do for rules. The model proposes; it cannot invent a source or a
time (a fact citing an id that is not a user turn of the batch is dropped), nor write about someone
else or a hypothetical (facts it marks `about: "other"` or `hypothetical: true` are dropped).

*Corrections are superseding writes.* A corrected value is a new candidate at the later message, so
the conflict order makes it current and keeps the old one as history. A correction of one value of a
multi-valued key ("amoxicillin, not penicillin") also yields a retraction of the wrong value
(`replaces`), placed before the new value. Candidates come out in message order, so within one batch
the later statement is the later write and wins.

*Bad output is counted, never a crash.* A reply that is not the expected JSON yields no candidates;
a fact that fails validation is skipped and the others kept. Each case is logged (counts and field
names, never the values) and counted in `stats`. `on_invalid="raise"` turns both into an
`ExtractionError` instead. A transport failure of the model (`maitre.models.ModelError`) is not bad
output: it propagates, so a caller can retry the batch.

```python
extractor = ModelExtractor(AnthropicModel())            # any maitre Model adapter
outcomes = await AsyncMemoryStore(store).remember("u1", turns, extractor=extractor)
extractor.stats.replies_malformed                        # how many replies were unusable
```

`ModelExtractor(complete)` with an async `complete(prompt) -> str` (the older hook) still works.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..exceptions import MaitreError, UserError
from .model import Candidate, MemoryPolicy, Origin, normalise_key

if TYPE_CHECKING:
    from ..models.base import Model, ModelResponse
    from ..tools import Tool
    from .extract import ConversationTurn

__all__ = [
    "Complete",
    "ExtractionError",
    "ExtractionStats",
    "FactProposal",
    "MODEL_KEY_SYNONYMS",
    "ModelExtractor",
    "SYSTEM_PROMPT",
    "TOOL_NAME",
    "facts_schema",
]

log = logging.getLogger(__name__)

TOOL_NAME = "record_facts"
"""The tool the model is asked to call with its facts."""

Complete = Callable[[str], Awaitable[str]]


class ExtractionError(MaitreError):
    """The model's reply could not be used (only raised with `on_invalid="raise"`)."""


class FactProposal(BaseModel):
    """One fact as the model proposes it (the schema the model is given, item of `facts`)."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    message_id: str = Field(min_length=1, max_length=200, description="id of the user turn that says it")
    key: str = Field(
        min_length=1,
        max_length=64,
        description="short snake_case key: city, diet, allergy, language, employer, occupation, ...",
    )
    value: str = Field(
        default="",
        max_length=300,
        description="the value, short; may be empty only for a retraction of a single-valued key",
    )
    retract: bool = Field(default=False, description="true if the user says this stopped being true")
    replaces: str | None = Field(
        default=None, max_length=300, description="for a correction: the earlier, wrong value it replaces"
    )
    origin: Literal["stated", "inferred"] = Field(
        default="stated", description="stated: the user said it; inferred: you concluded it"
    )
    about: Literal["user", "other"] = Field(
        default="user", description="other: the fact is about another person (it will not be stored)"
    )
    hypothetical: bool = Field(
        default=False, description="true for a wish, plan or 'what if' (it will not be stored)"
    )


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    facts: list[Any] = Field(default_factory=list)


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline_refs(v, defs) for k, v in node.items() if k not in {"$defs", "title"}}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


def facts_schema() -> dict[str, Any]:
    """The JSON Schema of the reply (`{"facts": [FactProposal, ...]}`), with no `$ref`s."""
    item = FactProposal.model_json_schema()
    item = _inline_refs(item, item.get("$defs", {}))
    return {
        "type": "object",
        "properties": {"facts": {"type": "array", "items": item, "description": "every fact found"}},
        "required": ["facts"],
    }


SYSTEM_PROMPT = """You extract durable facts about the USER from a conversation, for long-term memory.

Rules:
1. Only what the user says about themselves in user turns. Assistant turns are context only: never
   cite them, never take a fact from them ("So you live in London?" is not a fact).
2. Facts about other people are not the user's facts: skip "my brother lives in Cairo", "my aunt
   is allergic to soy", "my manager works from Quito". The user's relationships are the user's
   facts: "my wife is Mei" -> wife = Mei.
3. Skip hypotheticals, wishes, plans, questions and hedges: "if I lived in Tampere", "what if",
   "suppose", "I'd love to", "thinking about", "I can't really say I speak it".
4. A correction or change is a new fact at the message that says it: "seafood is OK for me these
   days" (after vegetarian) -> diet = pescatarian; "new flat, we're in Graz now" -> city = Graz.
   If it corrects one of several values (allergy, language, pet), set "replaces" to the wrong value.
5. Negations retract: "I stopped being keto" -> diet = keto, retract true; "I don't live in X
   anymore" -> city = X, retract true; "I never said I was allergic to mango" -> allergy = mango,
   retract true; "back on steak these days" -> diet (its old value, or empty), retract true; a pet
   that died -> the pet, retract true. A denial of a detail that is not a fact yields nothing.
6. Keys: city, hometown, diet, allergy, language, name, preferred_name, pronouns, timezone,
   occupation, employer, pet, partner, wife, husband, doctor, dentist, hobby, favourite_<thing>.
   Values are short: a diet is one of vegetarian, vegan, pescatarian, eggetarian, halal, kosher,
   keto, gluten-free, lactose-intolerant; an allergy is the allergen ("soy"); a pet is
   "<animal> named <Name>"; an occupation is lower case ("plumber"); names keep their capitals.
7. Never record secrets (card numbers, passwords, codes) or small talk.

Call the record_facts tool once with every fact (an empty list if there is none). If you cannot call
tools, answer with only the JSON object: {"facts": [{"message_id": "...", "key": "...", "value":
"...", "retract": false}]}"""

_LOWER_KEYS = frozenset({"diet", "pronouns", "occupation"})

#: Keys models write for the fact types `RuleExtractor` produces, beyond the store's own vocabulary
#: (applied before it, so a store's declared synonyms still apply).
MODEL_KEY_SYNONYMS: dict[str, str] = {
    "location": "city",
    "lives_in": "city",
    "residence": "city",
    "home": "city",
    "current_location": "city",
    "allergen": "allergy",
    "allergens": "allergy",
    "allergic_to": "allergy",
    "speaks": "language",
    "languages_spoken": "language",
    "diet_type": "diet",
    "dietary_restrictions": "diet",
    "works_at": "employer",
    "works_for": "employer",
    "job_role": "occupation",
    "role": "occupation",
    "preferred_pronouns": "pronouns",
    "time_zone_name": "timezone",
}


@dataclass
class ExtractionStats:
    """What the extractor did, summed over its calls (read it after `extract`)."""

    calls: int = 0
    """Model calls made."""
    replies_malformed: int = 0
    """Replies that held no usable JSON of the expected shape (no facts taken from them)."""
    facts_proposed: int = 0
    """Fact items the model returned, valid or not."""
    facts_invalid: int = 0
    """Items skipped because they failed validation (bad key, empty value, wrong types)."""
    facts_unknown_message: int = 0
    """Items skipped because they cite an id that is not a user turn of the batch."""
    facts_not_about_user: int = 0
    """Items the model marked as about another person (dropped)."""
    facts_hypothetical: int = 0
    """Items the model marked as hypothetical (dropped)."""
    candidates: int = 0
    """Candidates returned (retractions for `replaces` included)."""
    problems: list[str] = field(default_factory=list)
    """The latest problems, newest last (field names and counts, never values; at most 20)."""

    def note(self, problem: str) -> None:
        self.problems.append(problem)
        del self.problems[:-20]


class ModelExtractor:
    """Candidate facts proposed by a model, validated and grounded; the store's rules still decide.

    Args:
        model: any `maitre.models.Model` (Anthropic, OpenAI, an OpenAI-compatible local server, the
            scripted model), or an async `complete(prompt) -> str` function.
        policy: the store's policy: which keys are multi-valued, how keys fold (default policy).
        on_invalid: `"skip"` (the default) counts and logs bad replies and bad facts; `"raise"`
            raises `ExtractionError` for them.
        max_turns: turns per model call; a longer conversation is read in windows of this size.
        max_output_tokens: the reply's token budget per call.
        include_assistant: show the assistant's turns to the model as context (the default: "No,
            peanuts are fine" needs the question it answers). False leaves them out, for hosts whose
            assistant turns may repeat untrusted tool output; they are never citable either way.
        ask_with: `"tool"` (the default) offers the `record_facts` tool; `"text"` offers no tool and
            asks for the JSON object as the reply's text (a model that answers rather than call).
    """

    def __init__(
        self,
        model: Model | Complete,
        *,
        policy: MemoryPolicy | None = None,
        on_invalid: Literal["skip", "raise"] = "skip",
        max_turns: int = 60,
        max_output_tokens: int = 4096,
        include_assistant: bool = True,
        ask_with: Literal["tool", "text"] = "tool",
    ) -> None:
        if on_invalid not in ("skip", "raise"):
            raise UserError(f"on_invalid must be 'skip' or 'raise', not {on_invalid!r}")
        if ask_with not in ("tool", "text"):
            raise UserError(f"ask_with must be 'tool' or 'text', not {ask_with!r}")
        if max_turns < 1:
            raise UserError("max_turns must be at least 1")
        is_model = hasattr(model, "complete") and isinstance(getattr(model, "name", None), str)
        self._model: Model | None = model if is_model else None  # type: ignore[assignment]
        self._complete: Complete | None = None if is_model else model  # type: ignore[assignment]
        if self._model is None and not callable(self._complete):
            raise UserError("ModelExtractor needs a maitre Model or an async complete(prompt) -> str")
        self.policy = policy or MemoryPolicy()
        self._vocabulary = self.policy.vocabulary.with_synonyms(
            {k: v for k, v in MODEL_KEY_SYNONYMS.items() if k not in self.policy.vocabulary.synonyms}
        )
        self.on_invalid = on_invalid
        self.max_turns = max_turns
        self.max_output_tokens = max_output_tokens
        self.include_assistant = include_assistant
        self.ask_with = ask_with
        self.stats = ExtractionStats()
        self._tool: Tool | None = None

    # -- the request --------------------------------------------------------------------------------

    def conversation_text(self, messages: Sequence[ConversationTurn]) -> str:
        """The conversation as the model reads it: one JSON line per user or assistant turn.

        User turns carry their `message_id`; assistant turns carry none (they cannot be cited);
        tool and system turns are left out (what a tool returned is not the user speaking)."""
        lines = []
        for index, msg in enumerate(messages):
            if not msg.content:
                continue
            if msg.role == "user":
                entry = {"message_id": msg.id or f"#{index}", "role": "user", "text": msg.content}
            elif msg.role == "assistant" and self.include_assistant:
                entry = {"role": "assistant", "text": msg.content}
            else:
                continue
            if msg.at is not None:
                entry["at"] = msg.at.isoformat()
            lines.append(json.dumps(entry, ensure_ascii=False))
        return (
            "Conversation (JSON lines):\n"
            + "\n".join(lines)
            + (
                "\n\nDo not answer the conversation. Call record_facts with the durable facts about"
                " the user that the user turns above state (an empty list if none)."
                if getattr(self, "ask_with", "tool") == "tool"
                else '\n\nDo not answer the conversation. Reply with only the JSON object {"facts":'
                " [...]} holding the durable facts about the user that the user turns above state."
            )
        )

    def prompt(self, messages: Sequence[ConversationTurn]) -> str:
        """The whole prompt as one text (what a `complete(prompt)` function receives)."""
        return SYSTEM_PROMPT + "\n\n" + self.conversation_text(messages)

    def tool(self) -> Tool:
        """The `record_facts` tool the model is asked to call (its input schema is `facts_schema()`)."""
        if self._tool is None:
            from ..tools import Tool

            async def handler(arguments: dict[str, Any]) -> Any:
                return arguments  # never executed: the extractor reads the call's arguments

            self._tool = Tool.from_schema(
                name=TOOL_NAME,
                description="Record the durable facts about the user found in the conversation.",
                input_schema=facts_schema(),
                handler=handler,
            )
        return self._tool

    # -- extraction ---------------------------------------------------------------------------------

    async def extract(self, messages: Sequence[ConversationTurn]) -> list[Candidate]:
        """Ask the model (window by window), validate its answer, ground each fact in its message."""
        found: list[tuple[int, int, Candidate]] = []
        for start in range(0, len(messages), self.max_turns):
            window = list(messages[start : start + self.max_turns])
            # ids of the turns as `conversation_text` numbers them (position in the whole batch)
            by_id: dict[str, tuple[int, ConversationTurn]] = {}
            for offset, msg in enumerate(window):
                if msg.role == "user" and msg.content:
                    by_id[msg.id or f"#{start + offset}"] = (start + offset, msg)
            if not by_id:
                continue
            numbered = [
                m if m.id or m.role != "user" else _with_id(m, f"#{start + i}") for i, m in enumerate(window)
            ]
            payload = await self._ask(numbered)
            found.extend(self._candidates(payload, by_id))
        found.sort(key=_order)  # message order, then the model's order within one message
        self.stats.candidates += len(found)
        return [_strip_order(item) for item in found]

    async def _ask(self, window: list[ConversationTurn]) -> Any:
        """The model's reply as parsed JSON (or None when it holds none)."""
        self.stats.calls += 1
        if self._model is not None:
            from ..messages import UserMessage
            from ..models.base import ModelRequest

            response = await self._model.complete(
                ModelRequest(
                    messages=[UserMessage(content=self.conversation_text(window))],
                    tools=[self.tool()] if self.ask_with == "tool" else [],
                    system=SYSTEM_PROMPT,
                    max_output_tokens=self.max_output_tokens,
                )
            )
            return self._from_response(response)
        assert self._complete is not None
        return self._from_text(await self._complete(self.prompt(window)))

    def _from_response(self, response: ModelResponse) -> Any:
        for tool_call in response.tool_calls:
            if tool_call.name == TOOL_NAME:
                return tool_call.arguments
        if response.stop_reason == "max_tokens":
            self._malformed("the reply was cut at max_output_tokens")
            return None
        return self._from_text(response.text)

    def _from_text(self, text: str) -> Any:
        found = _first_json_object(text)
        if found is None:
            self._malformed("the reply holds no JSON object")
        return found

    def _malformed(self, why: str) -> None:
        self.stats.replies_malformed += 1
        self.stats.note(f"reply: {why}")
        log.warning("model extractor: %s; no facts taken from it", why)
        if self.on_invalid == "raise":
            raise ExtractionError(f"The model's reply could not be used: {why}.")

    def _invalid(self, counter: str, why: str) -> None:
        setattr(self.stats, counter, getattr(self.stats, counter) + 1)
        self.stats.note(why)
        log.warning("model extractor: %s; skipped", why)
        if self.on_invalid == "raise" and counter in {"facts_invalid", "facts_unknown_message"}:
            raise ExtractionError(f"The model proposed an unusable fact: {why}.")

    def _candidates(
        self, payload: Any, by_id: dict[str, tuple[int, ConversationTurn]]
    ) -> list[tuple[int, int, Candidate]]:
        if payload is None:
            return []
        try:
            reply = _Reply.model_validate(payload)
        except ValidationError as exc:
            self._malformed(f"the reply is not {{'facts': [...]}} ({exc.error_count()} errors)")
            return []
        out: list[tuple[int, int, Candidate]] = []
        for number, item in enumerate(reply.facts):
            self.stats.facts_proposed += 1
            try:
                fact = FactProposal.model_validate(item)
            except ValidationError as exc:
                fields = sorted({str(e["loc"][0]) for e in exc.errors() if e["loc"]})
                self._invalid("facts_invalid", f"fact {number}: invalid {', '.join(fields) or 'item'}")
                continue
            if fact.about != "user":
                self._invalid("facts_not_about_user", f"fact {number}: about another person")
                continue
            if fact.hypothetical:
                self._invalid("facts_hypothetical", f"fact {number}: hypothetical")
                continue
            found = by_id.get(fact.message_id)
            if found is None:
                self._invalid("facts_unknown_message", f"fact {number}: cites an unknown message id")
                continue
            try:
                key = self._vocabulary.canonical(normalise_key(fact.key))
            except UserError:
                self._invalid("facts_invalid", f"fact {number}: invalid key")
                continue
            multi = key in self.policy.multi_valued
            value = " ".join(fact.value.split()).strip(" .,;!?\"'")
            if key in _LOWER_KEYS:
                value = value.lower()
            if not value and (multi or not fact.retract):
                self._invalid("facts_invalid", f"fact {number}: empty value")
                continue
            position, msg = found
            common: dict[str, Any] = {
                "key": key,
                "valid_from": msg.at,
                "source": f"message:{fact.message_id}",
                "origin": Origin(fact.origin),
            }
            replaced = " ".join((fact.replaces or "").split()).strip(" .,;!?\"'")
            if multi and replaced and not fact.retract and replaced.casefold() != value.casefold():
                out.append((position, len(out), Candidate(value=replaced, retract=True, **common)))
            out.append((position, len(out), Candidate(value=value, retract=fact.retract, **common)))
        return _dedupe(out)


def _with_id(msg: ConversationTurn, mid: str) -> ConversationTurn:
    from .extract import ConversationTurn

    return ConversationTurn(role=msg.role, content=msg.content, id=mid, at=msg.at)


def _order(item: tuple[int, int, Candidate]) -> tuple[int, int]:
    return item[0], item[1]


def _strip_order(item: tuple[int, int, Candidate]) -> Candidate:
    return item[2]


def _dedupe(items: list[tuple[int, int, Candidate]]) -> list[tuple[int, int, Candidate]]:
    seen: set[tuple[str, str, str, bool]] = set()
    out = []
    for item in items:
        c = item[2]
        mark = (c.source, c.key, c.value.casefold(), c.retract)
        if mark not in seen:
            seen.add(mark)
            out.append(item)
    return out


def _first_json_object(text: str) -> Any:
    """The first JSON object in a text (a bare object, fenced in ```json, or after some words)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None
