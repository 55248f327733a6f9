"""Personal tools (`Tool.personal`) against the attacks on their copies in the gate's stores.

Each test is an attack that must fail: another user of the tenant reading or opening a sealed
record, a sealed value moved to another row, a replay after a forget, a client that omits fields
or sends invalid ones, ids with separators, a server store without a secret, a wrong secret, a
database copy testing a guess against a plain digest - and the cost rule: calls of tools that are
not personal never touch the subject keys.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest

from maitre import Gate, Principal, ToolCall
from maitre.audit import verify_store
from maitre.audit.canonical import canonical_json, hash_text
from maitre.exceptions import StoreError
from maitre.gate.personal import FORGOTTEN_TEXT
from maitre.storage import MemoryStores, PostgresStores, SQLiteStores, Stores
from maitre.storage.subject_keys import SEALED_PREFIX, SUBJECT_DIGEST_PREFIX, MemorySubjectKeys, SubjectKey
from maitre.tools import Toolbox

ASHA = Principal(user="asha", tenant="acme")
RAVI = Principal(user="ravi", tenant="acme")
PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def personal_box(calls: dict[str, int] | None = None) -> Toolbox:
    seen = calls if calls is not None else {}
    box = Toolbox()

    @box.tool(effect="write", personal=True)
    def remember(place: str, note: str = "") -> dict[str, str]:
        """Remember a place for the user."""
        seen["remember"] = seen.get("remember", 0) + 1
        return {"place": place, "note": note}

    @box.tool(effect="write")
    def plain_write(text: str) -> str:
        """Not personal."""
        seen["plain_write"] = seen.get("plain_write", 0) + 1
        return f"wrote {text}"

    return box


async def call(gate: Gate, who: Principal, name: str, run_id: str | None = "r1", **arguments: Any):  # type: ignore[no-untyped-def]
    return await gate.call(ToolCall(id="c1", name=name, arguments=arguments, run_id=run_id), who)


def key_file(path: Path) -> tuple[int, str] | None:
    """(mode, text) of the key file beside `path`, or None when there is none."""
    beside = Path(f"{path}.key")
    if not beside.exists():
        return None
    return stat.S_IMODE(os.stat(beside).st_mode), beside.read_text().strip()


def dump(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return repr({t: conn.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables})


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["digest", "redacted"])
async def test_every_gate_table_holds_only_sealed_or_keyed_values(tmp_path: Path, mode: str) -> None:
    stores = SQLiteStores(tmp_path / "g.db")
    gate = Gate(personal_box(), stores=stores, audit_arguments=mode)  # type: ignore[arg-type]
    first = await call(gate, ASHA, "remember", place="Pune-marker-77")
    assert not first.is_error and "Pune-marker-77" in first.content
    text = dump(tmp_path / "g.db")
    assert "Pune-marker-77" not in text
    arguments = hash_text({"note": "", "place": "Pune-marker-77"})
    assert hashlib.sha256(arguments.encode()).hexdigest() not in text  # the plain audit digest
    [entry] = await stores.audit.entries()
    prefix = SEALED_PREFIX if mode == "redacted" else SUBJECT_DIGEST_PREFIX
    assert entry.arguments is not None and entry.arguments.startswith(prefix)
    assert entry.result_digest is not None and entry.result_digest.startswith(SUBJECT_DIGEST_PREFIX)
    assert (await verify_store(stores.audit)).ok
    await stores.close()


@pytest.mark.anyio
async def test_another_user_of_the_tenant_cannot_open_or_replay_a_sealed_result() -> None:
    stores = MemoryStores()
    calls: dict[str, int] = {}
    gate = Gate(personal_box(calls), stores=stores)
    await call(gate, ASHA, "remember", place="Pune")
    asha_key = await stores.subject_keys.key("acme", "asha")
    ravi_key = await stores.subject_keys.key("acme", "ravi")
    assert asha_key is not None and ravi_key is not None and asha_key.key_id != ravi_key.key_id
    sealed = asha_key.seal("Pune", "idempotency.result")
    assert ravi_key.open(sealed, "idempotency.result") is None  # not his key: nothing opens
    # Asha's key material under Ravi's subject (a row copied across): the AEAD refuses it.
    forged = SubjectKey(asha_key.key_id, asha_key.material, ravi_key.subject)
    with pytest.raises(StoreError):
        forged.open(sealed, "idempotency.result")
    with pytest.raises(StoreError):  # another purpose (a result passed off as an audit field)
        asha_key.open(sealed, "audit.arguments")
    # Ravi sending Asha's exact call runs his own (nothing of hers replays to him).
    theirs = await call(gate, RAVI, "remember", place="Pune")
    assert not theirs.replayed and calls["remember"] == 2


@pytest.mark.anyio
async def test_a_replay_after_the_forget_says_forgotten_and_runs_nothing(tmp_path: Path) -> None:
    stores = SQLiteStores(tmp_path / "g.db")
    calls: dict[str, int] = {}
    gate = Gate(personal_box(calls), stores=stores)
    await call(gate, ASHA, "remember", place="Pune")
    await call(gate, RAVI, "remember", place="Chennai")
    assert (await call(gate, ASHA, "remember", place="Pune")).replayed
    assert await stores.erase_subject("acme", "asha") is True
    assert await stores.erase_subject("acme", "asha") is False  # nothing left to erase
    gate = Gate(personal_box(calls), stores=stores)  # a new process, say (no loop-guard counts)
    again = await call(gate, ASHA, "remember", place="Pune")
    assert again.replayed and not again.is_error and calls["remember"] == 2
    assert "Pune" not in again.content and again.content == FORGOTTEN_TEXT
    assert again.structured == {"forgotten": True}
    theirs = await call(gate, RAVI, "remember", place="Chennai")  # untouched
    assert theirs.replayed and "Chennai" in theirs.content
    # A new call after the forget gets a new key and works as before.
    fresh = await call(gate, ASHA, "remember", place="Goa")
    assert not fresh.replayed and "Goa" in fresh.content
    assert (await verify_store(stores.audit)).ok
    assert stores.subject_keys.wait_erased(5.0)  # type: ignore[attr-defined]
    await stores.close()


@pytest.mark.anyio
async def test_omitted_and_invalid_fields_never_reach_the_audit_in_the_clear() -> None:
    stores = MemoryStores()
    gate = Gate(personal_box(), stores=stores, audit_arguments="redacted")
    ok = await call(gate, ASHA, "remember", place="Pune")  # note omitted: its default is used
    assert not ok.is_error
    bad = await call(gate, ASHA, "remember", place="Pune-secret-9", extra="Pune-secret-9")
    assert bad.is_error and bad.error is not None and bad.error.code == "INVALID_ARGUMENTS"
    missing = await call(gate, ASHA, "remember", note="Pune-secret-9")  # required field omitted
    assert missing.is_error
    broken = await gate.call(ToolCall(id="c", name="remember", arguments='{"place": "Pune-secret-9"'), ASHA)
    assert broken.is_error
    for entry in await stores.audit.entries():
        text = canonical_json(entry.to_dict())
        assert "Pune" not in text, text
    assert (await verify_store(stores.audit)).ok


@pytest.mark.anyio
async def test_ids_with_separators_are_different_subjects() -> None:
    stores = MemoryStores()
    keys = stores.subject_keys
    one = await keys.key("a", "b\x1fc")
    other = await keys.key("a\x1fb", "c")
    colon = await keys.key("a:b", "c")
    colon2 = await keys.key("a", "b:c")
    assert one is not None and other is not None and colon is not None and colon2 is not None
    assert len({one.key_id, other.key_id, colon.key_id, colon2.key_id}) == 4
    assert await keys.erase("a", "b\x1fc")
    assert await keys.key("a\x1fb", "c", create=False) is not None  # the other is untouched
    # Through the gate: NUL and lone surrogates in ids are escaped, and still kept apart.
    gate = Gate(personal_box(), stores=stores)
    odd = Principal(user="x\x00y", tenant="t")
    assert not (await call(gate, odd, "remember", place="P")).is_error
    assert not (await call(gate, Principal(user="x\\x00y", tenant="t"), "remember", place="P")).is_error


@pytest.mark.anyio
async def test_a_tool_that_is_not_personal_never_touches_the_subject_keys() -> None:
    class Refusing(MemorySubjectKeys):
        async def key(self, tenant: str, user: str, *, create: bool = True) -> SubjectKey | None:
            raise AssertionError("a non-personal call asked for a subject key")

        def index_digest(self, text: str, purpose: str) -> str:
            raise AssertionError("a non-personal call derived a keyed digest")

    stores = MemoryStores()
    stores.subject_keys = Refusing()
    gate = Gate(personal_box(), stores=stores)
    assert not (await call(gate, ASHA, "plain_write", text="hello")).is_error
    assert (await call(gate, ASHA, "plain_write", text="hello")).replayed


@pytest.mark.anyio
async def test_a_server_store_without_a_secret_refuses_personal_calls_before_they_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for env in (
        "MAITRE_GATE_SECRET",
        "MAITRE_GATE_SECRET_FILE",
        "MAITRE_MEMORY_SECRET",
        "MAITRE_MEMORY_SECRET_FILE",
    ):
        monkeypatch.delenv(env, raising=False)
    try:
        stores: Stores = await PostgresStores.open(PG_DSN, schema="maitre_personal_nosecret")
    except Exception as exc:  # pragma: no cover - no server
        pytest.skip(f"PostgreSQL not reachable: {exc}")
    try:
        calls: dict[str, int] = {}
        gate = Gate(personal_box(calls), stores=stores)
        refused = await call(gate, ASHA, "remember", place="Pune-nosecret", run_id=None)
        assert refused.is_error and "not executed" in refused.content
        assert refused.error is not None and refused.error.details == {"stage": "personal"}
        assert calls.get("remember", 0) == 0
        assert not (await call(gate, ASHA, "plain_write", text="fine", run_id=None)).is_error
        for entry in await stores.audit.entries():
            assert "Pune-nosecret" not in canonical_json(entry.to_dict())
        with pytest.raises(StoreError, match="MAITRE_GATE_SECRET"):
            await stores.subject_keys.key("acme", "asha")
    finally:
        import psycopg

        await stores.close()
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute('DROP SCHEMA IF EXISTS "maitre_personal_nosecret" CASCADE')


@pytest.mark.anyio
async def test_the_key_file_is_made_beside_the_database_on_first_use_and_a_wrong_secret_fails_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for env in (
        "MAITRE_GATE_SECRET",
        "MAITRE_GATE_SECRET_FILE",
        "MAITRE_MEMORY_SECRET",
        "MAITRE_MEMORY_SECRET_FILE",
    ):
        monkeypatch.delenv(env, raising=False)
    path = tmp_path / "g.db"
    stores = SQLiteStores(path)
    gate = Gate(personal_box(), stores=stores)
    await call(gate, ASHA, "plain_write", text="x")
    assert key_file(path) is None  # nothing personal yet: no key file, no table
    await call(gate, ASHA, "remember", place="Pune")
    found = key_file(path)
    assert found is not None
    mode, secret = found
    assert mode == 0o600 and secret.startswith("hex:")
    assert secret[4:] not in dump(path)  # the secret is not in the database
    await stores.close()

    # Reopened with the key file: the record replays. With another secret: refused, never "forgotten".
    reopened = SQLiteStores(path)
    assert (
        "Pune" in (await call(Gate(personal_box(), stores=reopened), ASHA, "remember", place="Pune")).content
    )
    await reopened.close()
    monkeypatch.setenv("MAITRE_GATE_SECRET", "hex:" + "11" * 32)
    wrong = SQLiteStores(path)
    calls: dict[str, int] = {}
    refused = await call(Gate(personal_box(calls), stores=wrong), ASHA, "remember", place="Goa")
    assert refused.is_error and calls.get("remember", 0) == 0
    with pytest.raises(StoreError, match="not the one"):
        await wrong.subject_keys.key("acme", "asha")
    await wrong.close()


@pytest.mark.anyio
async def test_a_saved_run_with_its_user_is_sealed_and_gone_after_the_forget(tmp_path: Path) -> None:
    stores = SQLiteStores(tmp_path / "g.db")
    state = json.dumps({"messages": ["I live in Pune-run-5"]})
    await stores.runs.save("run-a", tenant="acme", status="finished", state_json=state, user="asha")
    await stores.runs.save("run-b", tenant="acme", status="finished", state_json=state, user="ravi")
    await stores.runs.save("run-c", tenant="acme", status="finished", state_json=state)  # as before
    with sqlite3.connect(tmp_path / "g.db") as conn:
        rows = dict(conn.execute("SELECT run_id, state_json FROM runs").fetchall())
    assert "Pune-run-5" not in rows["run-a"] and "Pune-run-5" not in rows["run-b"]
    loaded = await stores.runs.load("run-a", tenant="acme")
    assert loaded is not None and loaded.state_json == state
    assert await stores.runs.load("run-a", tenant="other") is None
    await stores.erase_subject("acme", "asha")
    assert await stores.runs.load("run-a") is None
    theirs = await stores.runs.load("run-b")
    assert theirs is not None and theirs.state_json == state
    await stores.close()


@pytest.mark.anyio
async def test_an_approval_of_a_personal_call_is_sealed_edits_too_and_forgotten_after_the_forget(
    tmp_path: Path,
) -> None:
    stores = SQLiteStores(tmp_path / "g.db")
    box = Toolbox()

    @box.tool(effect="destructive", risk="high", personal=True)
    def wipe(place: str) -> str:
        """Wipe a place."""
        return f"wiped {place}"

    gate = Gate(box, stores=stores)
    asked = await call(gate, ASHA, "wipe", place="Pune-apr-3")
    assert asked.error is not None and asked.error.code == "APPROVAL_REQUIRED"
    approval_id = asked.error.details["approval_id"]  # type: ignore[index]
    request = await gate.approvals.get(approval_id)
    assert request is not None and request.arguments == {"place": "Pune-apr-3"} and request.personal
    assert request.call_hash.startswith("h2:k")
    await gate.approvals.approve(approval_id, "admin", {"place": "Goa-apr-4"})
    text = dump(tmp_path / "g.db")
    assert "Pune-apr-3" not in text and "Goa-apr-4" not in text
    decided = await gate.approvals.get(approval_id)
    assert decided is not None and decided.edited_arguments == {"place": "Goa-apr-4"}
    ran = await gate.call(
        ToolCall(id="c2", name="wipe", arguments={"place": "Pune-apr-3"}, run_id="r1"),
        ASHA,
        approval_id=approval_id,
    )
    assert not ran.is_error and "Goa-apr-4" in ran.content
    await stores.erase_subject("acme", "asha")
    gone = await gate.approvals.get(approval_id)
    assert gone is not None and gone.arguments == {"$forgotten": True}
    assert gone.edited_arguments == {"$forgotten": True}
    listed = await gate.approvals.list(status=None)
    assert [r.arguments for r in listed] == [{"$forgotten": True}]
    assert (await verify_store(stores.audit)).ok
    await stores.close()


def _in_files(path: Path, needle: bytes) -> bool:
    return any(p.exists() and needle in p.read_bytes() for p in (path, Path(f"{path}-wal")))


@pytest.mark.anyio
async def test_an_erased_key_leaves_the_file_and_the_wal_without_waiting_for_a_reader(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    stores = SQLiteStores(path)
    gate = Gate(personal_box(), stores=stores)
    await call(gate, ASHA, "remember", place="Pune")
    with sqlite3.connect(path) as conn:
        [(wrapped,)] = conn.execute(
            "SELECT wrapped FROM maitre_subject_keys WHERE subject != 'check'"
        ).fetchall()
    needle = str(wrapped).encode()
    assert _in_files(path, needle)
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT * FROM maitre_subject_keys").fetchall()
    try:
        assert await stores.erase_subject("acme", "asha")  # returns at once, the reader still open
        assert not stores.subject_keys.wait_erased(0.2)  # type: ignore[attr-defined]
    finally:
        reader.execute("COMMIT")
        reader.close()
    assert stores.subject_keys.wait_erased(5.0)  # type: ignore[attr-defined]
    assert not _in_files(path, needle), "the wrapped key is still in the file or the WAL"
    await stores.close()
