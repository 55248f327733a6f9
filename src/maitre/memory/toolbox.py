"""The tool-driven write path: `save_memory`, `search_memory`, `forget_memory` for the model.

Seed 000's second way to run memory: the model decides when to save and search. These are ordinary
maitre tools, so every call passes through the gate (validation, policy, budgets, loop guard, audit)
like any other. Whose memory a call touches comes only from the injected `Principal` (user and
tenant), never from the arguments: the model cannot name another user, and the schema forbids
extra properties.

Metadata, and why:

- `save_memory`: effect `write`, risk `low`. Writing the same fact twice is a no-op in the store.
- `search_memory`: effect `read`.
- `forget_memory`: effect `destructive`, risk `low`. Under the default policy it pauses for
  approval, which is the user saying "yes, forget it". A prompt injection cannot wipe a user's
  memory on its own.

The model chooses `origin`: "stated" when the user said it about themselves, "inferred" when the model
concluded it. An inferred fact never overwrites a stated one (see `maitre.memory.rules`). Secrets are
refused with an error the model can act on. A fact the user asked to forget is not saved again.

All three are `personal=True`: the gate keeps their arguments and results only sealed under the
user's key or as keyed digests (`maitre.gate.personal`), and `forget_memory` destroys that key
(`Stores.erase_subject`), so the gate's idempotency records, audit entries, handles and approval
requests stop holding anything readable about the user - while the audit chain still verifies.
A forget shreds the gate's copies of *all* of the user's personal calls, not only the forgotten
fact's: the memory store keeps the facts themselves, and replays of older calls say "forgotten".
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any, Literal

from pydantic import Field

from ..exceptions import UserError
from ..stores import Stores
from ..tools import Toolbox
from ..types import Principal, ToolError
from .aio import AsyncMemoryStore
from .model import Candidate, Fact, Origin, WriteAction
from .store import MemoryStore

__all__ = ["MemoryKey", "MemoryValue", "SearchQuery", "TopK", "memory_toolbox"]

MemoryKey = Annotated[
    str,
    Field(
        pattern=r"^[a-z][a-z0-9_]{0,63}$",
        description="snake_case name of the fact, e.g. city, diet, allergy, employer, favourite_colour",
    ),
]
MemoryValue = Annotated[str, Field(min_length=1, max_length=500, description="the fact's value, short")]
SearchQuery = Annotated[
    str, Field(min_length=1, max_length=500, description="what you need to know, in words")
]
TopK = Annotated[int, Field(ge=1, le=10, description="how many facts to return")]


def _fact(fact: Fact | None) -> dict[str, Any] | None:
    if fact is None:
        return None
    return {
        "key": fact.key,
        "value": fact.value,
        "valid_from": fact.valid_from.date().isoformat(),
        "source": fact.source,
        "origin": str(fact.origin),
    }


def memory_toolbox(store: MemoryStore | AsyncMemoryStore, *, namespace: str | None = "memory") -> Toolbox:
    """A toolbox over `store`, scoped per call to the injected principal's user and tenant."""
    mem = store if isinstance(store, AsyncMemoryStore) else AsyncMemoryStore(store)
    box = Toolbox(namespace)
    source = f"tool:{namespace}.save_memory" if namespace else "tool:save_memory"

    # idempotent: the memory store itself makes an identical write a no-op ("Already stored."), so the
    # gate mints no key and keeps no stored result - a replay could repeat a value the user has since
    # asked to forget; the store's tombstone answers instead.
    @box.tool(effect="write", risk="low", tags=("memory",), idempotent=True, personal=True)
    async def save_memory(
        key: MemoryKey,
        value: MemoryValue,
        principal: Principal,
        origin: Literal["stated", "inferred"] = "stated",
        valid_from: date | None = None,
    ) -> dict[str, Any]:
        """Save one durable fact about the user to long-term memory (it replaces an older value of the key).

        Use it for preferences, decisions and stable profile data the user told you: where they live,
        diet, allergies, languages, job, names of people and pets. Do not use it for small talk,
        guesses about the future, one-off requests, or secrets such as card numbers or passwords.

        Args:
            key: snake_case name of the fact, e.g. city, diet, allergy, employer.
            value: the value, as short as possible, e.g. "Bengaluru".
            origin: "stated" if the user said it about themselves, "inferred" if you concluded it.
            valid_from: the date it became true, if the user said so (e.g. "I moved in March").
        """
        try:
            outcome = await mem.apply(
                principal.user,
                Candidate(key=key, value=value, valid_from=valid_from, source=source, origin=Origin(origin)),
                tenant=principal.tenant,
            )
        except UserError as exc:
            raise ToolError("INVALID_ARGUMENTS", f"Not saved: {exc}") from None
        if outcome.action == WriteAction.BLOCKED:
            raise ToolError(
                "INVALID_STATE",
                f"Not saved: the user asked to forget this {key!r} fact, so it is not stored again. Do not retry.",
            )
        saved = outcome.action not in (WriteAction.DUPLICATE, WriteAction.IGNORED)
        note = {
            WriteAction.STORED_SUPERSEDED: "Kept as history only: a newer or user-stated value is current.",
            WriteAction.DUPLICATE: "Already stored.",
        }.get(outcome.action, "Saved.")
        return {"saved": saved, "note": note, "current": _fact(outcome.current)}

    @box.tool(effect="read", tags=("memory",), personal=True)
    async def search_memory(
        query: SearchQuery,
        principal: Principal,
        k: TopK = 5,
        as_of: date | None = None,
        before: date | None = None,
        after: date | None = None,
        conversation: bool = False,
    ) -> dict[str, Any]:
        """Search the user's long-term memory for facts relevant to a request, now or at a past date.

        Use it before answering anything that depends on the user's details you do not see in the
        conversation (their city, diet, allergies, people, preferences). Returns at most k facts, best
        first; an empty list means nothing relevant is stored, so say you do not know rather than guess.
        For the past ("where did I live before I moved?"), give as_of or before.

        Args:
            query: what you need to know, e.g. "which city does the user live in".
            k: how many facts to return (1-10).
            as_of: the facts that were true on this date instead of the current ones.
            before: the facts true just before this date (e.g. the date of a move).
            after: only facts that became true on or after this date.
            conversation: also return what was said in earlier conversations that matches.
        """
        user, tenant = principal.user, principal.tenant
        try:
            hits = await mem.retrieve(user, query, k, tenant=tenant, as_of=as_of, before=before, after=after)
            said = (
                await mem.search(
                    user, query, k, tenant=tenant, facts=False, as_of=as_of, before=before, after=after
                )
                if conversation
                else []
            )
        except UserError as exc:
            raise ToolError("INVALID_ARGUMENTS", f"Not searched: {exc}") from None
        result: dict[str, Any] = {"facts": [_fact(h.fact) for h in hits]}
        if conversation:
            result["conversation"] = [
                {"said": h.text, "on": h.at.date().isoformat() if h.at is not None else None} for h in said
            ]
        if not hits and not said:
            result["note"] = "Nothing relevant is stored for this user."
        return result

    @box.tool(effect="destructive", risk="low", tags=("memory",), personal=True)
    async def forget_memory(
        key: MemoryKey, principal: Principal, stores: Stores, value: str | None = None
    ) -> dict[str, Any]:
        """Forget a fact about the user everywhere (all its history), because the user asked you to.

        Use it only when the user asks to delete or forget something. Give the value too to forget
        just one value of a key that holds several (e.g. one allergy).

        Args:
            key: snake_case name of the fact to forget, e.g. city.
            value: only this value of the key; omit to forget the whole key.
        """
        try:
            report = await mem.delete(principal.user, key, value, tenant=principal.tenant)
        except UserError as exc:
            raise ToolError("INVALID_ARGUMENTS", f"Not forgotten: {exc}") from None
        if report.facts == 0:
            keys = sorted({f.key for f in await mem.facts(principal.user, tenant=principal.tenant)})
            raise ToolError(
                "NOT_FOUND",
                f"Nothing stored under {key!r}" + (f" with value {value!r}" if value else "") + ".",
                suggestions=keys[:10],
            )
        # The gate's copies too: every record a personal tool left for this user is sealed under
        # the user's key; destroying it makes all of them unreadable (this call's own included).
        await stores.erase_subject(principal.tenant, principal.user)
        return {"forgotten": report.facts, "summaries_removed": report.summaries_removed}

    return box
