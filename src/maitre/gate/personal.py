"""Personal tools: what the gate writes about their calls, and how a forget reaches it.

A tool declared `personal=True` (`Tool.personal`: the memory tools) has arguments and a result that
are personal data about the calling user. Every store the gate writes keeps them only in a form
that `Stores.erase_subject(tenant, user)` - what `forget` calls - makes unreadable, using that
user's key (`maitre.storage.subject_keys`):

| where                          | kept as                                                        |
|--------------------------------|----------------------------------------------------------------|
| idempotency result             | sealed under the subject's key (`{"sealed": "pd1..."}`)         |
| idempotency key, fingerprint   | HMAC under the master-derived index key (`idkp_...`)            |
| audit `arguments`              | digest mode: subject digest (`pk1...`); redacted: sealed        |
| audit `result_digest`          | subject digest                                                  |
| call hash (approvals, audit)   | HMAC under the index key (`h2:k...`)                            |
| approval request arguments     | sealed (the SQL stores open them for the approver while the key lives) |
| result handle pages            | sealed, opened by `read_result` while the key lives (`res_p_` handles; their reads are audited as personal) |

A replay of a personal call opens its stored result while the key lives; after a forget it returns
a result that says the value was forgotten (never the old value, never an error). The key a call
uses is fetched once, before the tool runs (`prepare`), and kept on the call: a forget erasing the
subject's key *during* the call (`forget_memory` itself) leaves that call's own records sealed under
the erased key, so they are unreadable at once. The audit chain's hashes cover the sealed text, so
`maitre audit verify` still passes after any number of forgets.

Tools that are not personal never reach this module: each use is behind a `tool.personal` check.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ..exceptions import StoreError
from ..jsonutil import compact_json
from ..storage.subject_keys import MemorySubjectKeys, SubjectKey, SubjectKeys, is_sealed
from ..types import ErrorCode, ToolError
from .base import CallContext

__all__ = [
    "FORGOTTEN_TEXT",
    "PERSONAL_HANDLE_PREFIX",
    "forgotten_result",
    "keyed_call_hash",
    "keyed_fingerprint",
    "keyed_idempotency_key",
    "keys",
    "open_page",
    "open_stored",
    "prepare",
    "reads_personal_page",
    "seal_pages",
    "seal_stored",
    "stores_keys",
    "subject_key",
]

logger = logging.getLogger("maitre.gate")

_KEY = "maitre.personal.key"
_RESULT = "idempotency.result"
_PAGE = "handle.page"

FORGOTTEN_TEXT = (
    "[forgotten: this call's result held personal data that the user has since asked to forget, so "
    "it is no longer kept. Nothing ran again. Do not rely on any earlier value; ask the user or "
    "search memory again.]"
)
"""What a replay of a personal call answers once its subject's key is erased."""


def keys(ctx: CallContext) -> SubjectKeys:
    """The gate's subject keys (a stores object that predates them gets in-process ones, kept on it)."""
    return stores_keys(ctx.gate.stores)


def stores_keys(stores: Any) -> SubjectKeys:
    """`stores.subject_keys`, made (in process memory) for a stores object that has none."""
    found: SubjectKeys | None = getattr(stores, "subject_keys", None)
    if found is None:
        found = MemorySubjectKeys()
        stores.subject_keys = found
    return found


async def subject_key(ctx: CallContext) -> SubjectKey:
    """This call's subject key (its principal's), fetched or created once per call."""
    key = ctx.extra.get(_KEY)
    if key is None:
        key = ctx.extra[_KEY] = await keys(ctx).key(ctx.principal.tenant, ctx.principal.user)
    assert isinstance(key, SubjectKey)
    return key


async def prepare(ctx: CallContext) -> ToolError | None:
    """Fetch the subject key before the tool runs; an error (nothing runs) when there is none to
    be had (a server store without a master secret): no personal value is then written anywhere."""
    try:
        await subject_key(ctx)
        keys(ctx).index_digest("", "check")  # the index key too (derived from the same secret)
    except StoreError as exc:
        logger.error("personal tool %s refused: %s", ctx.call.name, exc)
        return ToolError(
            ErrorCode.INTERNAL,
            "This tool handles personal data and the runtime cannot store it safely (its encryption "
            "secret is missing or is not the one the store was used with). It was not executed; "
            "tell the user it is unavailable.",
            details={"stage": "personal"},
        )
    return None


def keyed_idempotency_key(ctx: CallContext, plain_key: str) -> str:
    """`idkp_` + 40 hex of an HMAC (master-derived index key) of the minted key: a copy of the
    database cannot confirm a guessed argument by recomputing it."""
    return "idkp_" + keys(ctx).index_digest(plain_key, "idempotency.key")[:40]


def keyed_fingerprint(ctx: CallContext, arguments_text: str) -> str:
    """The idempotency record's fingerprint of a personal call (keyed like its key)."""
    return keys(ctx).index_digest(arguments_text, "idempotency.fingerprint")[:32]


def keyed_call_hash(gate_stores: Any, plain_hash: str) -> str:
    """The call hash of a personal call: `h2:k` + an HMAC of the plain `h2:` hash (still a
    version-2 hash: it starts with `h2:`)."""
    return "h2:k" + stores_keys(gate_stores).index_digest(plain_hash, "call_hash")


async def seal_stored(ctx: CallContext, stored: dict[str, Any]) -> str:
    """The idempotency record's result text for a personal call: sealed under the subject's key."""
    key = await subject_key(ctx)
    return compact_json({"sealed": key.seal(compact_json(stored), _RESULT)})


def forgotten_result() -> dict[str, Any]:
    """The stored-result shape a forgotten personal result replays as."""
    return {"content": FORGOTTEN_TEXT, "structured": {"forgotten": True}, "handle": None}


async def open_stored(ctx: CallContext, text: str) -> dict[str, Any]:
    """A personal call's stored result, opened; `forgotten_result()` once its key is erased (or
    for a record that was not sealed: a personal result is never replayed in the clear)."""
    stored = json.loads(text)
    sealed = stored.get("sealed") if isinstance(stored, dict) else None
    if not isinstance(sealed, str) or not is_sealed(sealed):
        return forgotten_result()
    key = ctx.extra.get(_KEY)
    if key is None:
        key = await keys(ctx).key(ctx.principal.tenant, ctx.principal.user, create=False)
        if key is None:
            return forgotten_result()
        ctx.extra[_KEY] = key
    opened = key.open(sealed, _RESULT)
    if opened is None:
        return forgotten_result()
    result: dict[str, Any] = json.loads(opened)
    return result


PERSONAL_HANDLE_PREFIX = "res_p_"
"""How a personal result's handle starts: `read_result` of it is audited like a personal call."""


def reads_personal_page(ctx: CallContext) -> bool:
    """True for a `read_result` of a personal result's handle (its page is personal data too)."""
    tool = ctx.tool
    if tool is None or tool.name != "read_result" or "builtin" not in tool.tags:
        return False
    handle = (ctx.arguments or {}).get("handle")
    return isinstance(handle, str) and handle.startswith(PERSONAL_HANDLE_PREFIX)


async def seal_pages(ctx: CallContext, pages: list[str]) -> list[str]:
    """A personal result's handle pages, each sealed under the subject's key."""
    key = await subject_key(ctx)
    return [key.seal(page, _PAGE) for page in pages]


async def open_page(subject_keys: SubjectKeys, tenant: str, user: str, page: str) -> str:
    """One handle page: opened if sealed (FORGOTTEN_TEXT once the key is erased), else as stored."""
    if not is_sealed(page):
        return page
    key = await subject_keys.key(tenant, user, create=False)
    opened = key.open(page, _PAGE) if key is not None else None
    return FORGOTTEN_TEXT if opened is None else opened
