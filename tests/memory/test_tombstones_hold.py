"""Tombstones that hold (issue 16): every bypass of the adversarial deletion hunt, as an attack that fails.

A forgotten value comes back spelled differently (a zero-width space, a soft hyphen, a Cyrillic "е",
quotes, case and spacing), under a synonym key, a US spelling or a plural of the key; two scopes whose
ids contain the old separator collide; and a copy of the database confirms guesses because the
secret is stored beside the tombstones. Each test below is one of those attacks.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest

from maitre.embeddings import HashingEmbedder
from maitre.exceptions import UserError
from maitre.memory import Candidate, ConversationTurn, MemoryPolicy, MemoryStore, WriteAction
from maitre.memory.identity import (
    DEFAULT_VOCABULARY,
    legacy_tombstone_digest,
    tombstone_digest,
    value_identity,
)
from maitre.memory.model import normalise_value
from maitre.memory.model import tombstone_digest as v1_digest

from .conftest import _PG_REASON, PG_DSN, Clock, StoreFactory

CITY = "Zorbluxville"

SPELLINGS = {
    "zero-width space": "Zorblux\u200bville",
    "zero-width joiner": "Zorb\u200dluxville",
    "word joiner": "Zorblux\u2060ville",
    "soft hyphen": "Zor\u00adblux\u00adville",
    "BOM inside": "Zorblux\ufeffville",
    "Cyrillic е (U+0435)": "Zorbluxvill\u0435",
    "Cyrillic о (U+043E)": "Z\u043erbluxville",
    "straight double quotes": '"Zorbluxville"',
    "typographic quotes": "\u201cZorbluxville\u201d",
    "single quotes": "'Zorbluxville'",
    "upper case": "ZORBLUXVILLE",
    "spaces and a full stop": "  Zorbluxville. ",
    "fullwidth letters (NFKC)": "Ｚｏｒｂｌｕｘｖｉｌｌｅ",
    "all of them at once": "\u201cZ\u043erblux\u200bvill\u0435\u00ad\u201d",
}


@pytest.mark.parametrize("how", sorted(SPELLINGS))
def test_a_forgotten_value_spelled_differently_stays_forgotten(store: MemoryStore, how: str) -> None:
    store.write("u1", "city", CITY, "2026-03-20", "m1")
    store.delete("u1", "city")
    attack = store.apply("u1", Candidate(key="city", value=SPELLINGS[how], valid_from="2026-03-20"))
    assert attack.action == WriteAction.BLOCKED, how
    assert store.history("u1", "city") == []


@pytest.mark.parametrize(
    ("stored_key", "attack_key"),
    [
        ("city", "home city"),  # a declared synonym
        ("city", "Home-City"),
        ("home_city", "current_city"),  # both aliases of one canonical key
        ("city", "hom\u0435_city"),  # a Cyrillic е inside the key
        ("favourite_colour", "favorite_color"),  # US spelling
        ("favourite_colour", "Favorite Colors"),  # US spelling and a plural
        ("allergy", "allergies"),  # plural
        ("language", "languages"),
        ("employer", "company"),
    ],
)
def test_a_forgotten_value_under_another_spelling_of_its_key_stays_forgotten(
    store: MemoryStore, stored_key: str, attack_key: str
) -> None:
    store.write("u1", stored_key, "Quaxmoor", "2026-03-20", "m1")
    assert store.delete("u1", stored_key).facts == 1
    attack = store.apply("u1", Candidate(key=attack_key, value="quaxmoor", valid_from="2026-04-01"))
    assert attack.action == WriteAction.BLOCKED, attack_key
    assert store.facts("u1", include_history=True) == []


def test_a_synonym_key_is_one_slot_for_writes_reads_and_deletes(store: MemoryStore) -> None:
    store.write("u1", "home city", "Pune", "2026-01-05", "m1")
    store.write("u1", "city", "Bengaluru", "2026-03-20", "m2")
    assert store.current("u1", "current_city").value == "Bengaluru"  # type: ignore[union-attr]
    assert [f.value for f in store.history("u1", "home_city")] == ["Pune", "Bengaluru"]
    assert store.delete("u1", "Home City").facts == 2


def test_a_declared_vocabulary_adds_synonyms(make_store: StoreFactory, clock: Clock) -> None:
    policy = MemoryPolicy(vocabulary=DEFAULT_VOCABULARY.with_synonyms({"abode": "city"}))
    store = make_store(clock=clock, policy=policy)
    store.write("u1", "abode", "Pune", "2026-01-05", "m1")
    assert store.current("u1", "city").value == "Pune"  # type: ignore[union-attr]
    store.delete("u1", "city")
    assert store.write("u1", "abode", "pune", "2026-02-01", "replay") is None


def test_values_are_not_plural_folded(store: MemoryStore) -> None:
    """Only keys are spelling- and plural-folded: forgetting "Paris" must not block "Pari"."""
    store.write("u1", "city", "Agnes", "2026-01-05", "m1")
    store.delete("u1", "city")
    assert store.write("u1", "city", "Agne", "2026-02-01", "m2") is not None


def test_deleting_by_a_spoofed_spelling_finds_the_stored_value(
    make_store: StoreFactory, clock: Clock
) -> None:
    store = make_store(clock=clock)
    store.write("u1", "allergy", "peanuts", "2026-01-05", "m1")
    store.write("u1", "allergy", "shellfish", "2026-01-05", "m1")
    report = store.delete("u1", "allergies", "\u201cp\u0435a\u200bnuts\u201d")
    assert report.facts == 1 and report.tombstones == 1
    assert [f.value for f in store.values("u1", "allergy")] == ["shellfish"]
    assert store.apply("u1", Candidate(key="allergy", value="Peanuts")).action == WriteAction.BLOCKED


def test_reextraction_with_a_look_alike_letter_is_blocked(store: MemoryStore) -> None:
    store.write("u1", "city", CITY, "2026-03-20", "m1")
    store.delete("u1", "city")
    turns = [ConversationTurn(role="user", id="m9", content="I moved to Zorbluxvill\u0435.")]
    assert [o.action for o in store.remember("u1", turns)] == [WriteAction.BLOCKED]


def test_the_digest_is_unambiguous_across_scopes(store: MemoryStore) -> None:
    """tenant `a` / user `b\\x1fc` and tenant `a\\x1fb` / user `c` were one digest with `\\x1f` joins."""
    assert v1_digest(b"k", "a", "b\x1fc", "city", "x") == v1_digest(b"k", "a\x1fb", "c", "city", "x")
    assert tombstone_digest(b"k", "a", "b\x1fc", "city", "x") != tombstone_digest(
        b"k", "a\x1fb", "c", "city", "x"
    )
    assert tombstone_digest(b"k", "a", "b", "c_d", "x") != tombstone_digest(b"k", "a", "b", "c", "d x")
    store.write("b\x1fc", "city", CITY, "2026-03-20", "m1", tenant="a")
    store.delete("b\x1fc", "city", tenant="a")
    other = store.apply("c", Candidate(key="city", value=CITY, valid_from="2026-03-20"), tenant="a\x1fb")
    assert other.action == WriteAction.INSERTED, "another scope's tombstone must not block this one"


def test_the_legacy_digest_is_version_one_byte_for_byte() -> None:
    for value in ("Pune", "  Bengaluru. ", "ＺＯＲＢ", "Dr Mehta!"):
        assert legacy_tombstone_digest(b"s", "t", "u", "city", value) == v1_digest(
            b"s", "t", "u", "city", normalise_value(value)
        )


def test_value_identity_keeps_digits_and_letters_apart() -> None:
    assert value_identity("Flat 10") != value_identity("Flat lO")
    assert value_identity("100") != value_identity("1OO")
    assert value_identity("Bengaluru") == "bengaluru"


# -- the secret lives outside the database -------------------------------------------------------------


def _tombstones_and_meta(path: Path) -> tuple[list[str], list[str]]:
    with sqlite3.connect(path) as conn:
        digests = [r[0] for r in conn.execute("SELECT digest FROM memory_tombstones")]
        meta = [str(r[0]) for r in conn.execute("SELECT value FROM memory_meta")]
    return digests, meta


def test_a_copy_of_the_database_cannot_confirm_a_guessed_forgotten_value(
    tmp_path: Path, clock: Clock
) -> None:
    path = tmp_path / "memory.db"
    store = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock)
    store.write("u1", "city", CITY, "2026-03-20", "m1")
    store.delete("u1", "city")
    assert store.wait_erased(10)
    store.close()
    digests, meta = _tombstones_and_meta(path)
    assert len(digests) == 1
    # The attacker has the file and guesses the value; every string in the database is tried as the key.
    candidates = [m.encode() for m in meta]
    candidates += [
        bytes.fromhex(m) for m in meta if len(m) % 2 == 0 and all(c in "0123456789abcdef" for c in m)
    ]
    for key in candidates:
        assert tombstone_digest(key, "default", "u1", "city", CITY) not in digests
        assert legacy_tombstone_digest(key, "default", "u1", "city", CITY) not in digests
    # The key is in the key file beside the database, readable by its owner only.
    key_file = Path(f"{path}.key")
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    secret = bytes.fromhex(key_file.read_text().strip().removeprefix("hex:"))
    assert secret.hex().encode() not in path.read_bytes() and secret not in path.read_bytes()
    assert tombstone_digest(secret, "default", "u1", "city", CITY) in digests


def test_a_database_without_its_key_file_refuses_to_open(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "memory.db"
    store = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock)
    store.write("u1", "city", CITY, "2026-03-20", "m1")
    store.delete("u1", "city")
    store.close()
    copy = tmp_path / "copy.db"
    shutil.copyfile(path, copy)
    with pytest.raises(UserError, match=r"key file .*copy\.db\.key is missing"):
        MemoryStore.sqlite(copy, embedder=HashingEmbedder(), clock=clock)
    shutil.copyfile(f"{path}.key", f"{copy}.key")  # restored from the backup: forgotten stays forgotten
    reopened = MemoryStore.sqlite(copy, embedder=HashingEmbedder(), clock=clock)
    assert reopened.write("u1", "city", CITY, "2026-03-20", "replay") is None
    reopened.close()


def test_a_wrong_configured_secret_is_refused(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "memory.db"
    MemoryStore.sqlite(path, embedder=HashingEmbedder(), secret="app-secret-one-0123").close()
    with pytest.raises(UserError, match="does not match"):
        MemoryStore.sqlite(path, embedder=HashingEmbedder(), secret="app-secret-two-0123")
    assert not Path(f"{path}.key").exists(), "a configured secret needs no key file"


def test_the_secret_from_the_environment_or_a_secret_file(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_file = tmp_path / "tombstone.secret"
    secret_file.write_text("hex:" + "ab" * 32 + "\n")
    monkeypatch.setenv("MAITRE_MEMORY_SECRET_FILE", str(secret_file))
    path = tmp_path / "memory.db"
    store = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock)
    store.write("u1", "city", CITY, "2026-03-20", "m1")
    store.delete("u1", "city")
    store.close()
    digests, _ = _tombstones_and_meta(path)
    assert digests == [tombstone_digest(bytes.fromhex("ab" * 32), "default", "u1", "city", CITY)]
    monkeypatch.delenv("MAITRE_MEMORY_SECRET_FILE")
    monkeypatch.setenv("MAITRE_MEMORY_SECRET", "hex:" + "ab" * 32)
    reopened = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock)
    assert reopened.apply("u1", Candidate(key="city", value=CITY)).action == WriteAction.BLOCKED
    reopened.close()


@pytest.mark.postgres
def test_a_postgres_store_needs_a_configured_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    if _PG_REASON:
        pytest.skip(_PG_REASON)
    monkeypatch.delenv("MAITRE_MEMORY_SECRET", raising=False)
    monkeypatch.delenv("MAITRE_MEMORY_SECRET_FILE", raising=False)
    schema = "mt_nosecret_" + os.urandom(4).hex()
    try:
        with pytest.raises(
            UserError, match=r"server database needs a tombstone secret.*MAITRE_MEMORY_SECRET"
        ):
            MemoryStore.postgres(PG_DSN, schema=schema, pgvector=False, embedder=HashingEmbedder())
    finally:
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]


def test_first_open_of_a_new_file_just_works_and_two_opens_agree(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    a = MemoryStore(str(path), embedder=HashingEmbedder())
    b = MemoryStore(str(path), embedder=HashingEmbedder())
    a.write("u1", "city", CITY, source="m1")
    b.delete("u1", "city")
    assert a.apply("u1", Candidate(key="city", value=CITY)).action == WriteAction.BLOCKED
    a.close()
    b.close()


# -- tombstones written before this change ---------------------------------------------------------------


def _make_version_one_store(path: Path, clock: Clock) -> bytes:
    """A store as version 1 left it: the secret in `memory_meta.hmac_secret`, v1 tombstones, no key file."""
    store = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock)
    store.write("u1", "city", "Pune", "2026-01-05", "m1")
    store.close()
    os.unlink(f"{path}.key")
    old_secret = os.urandom(32)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM memory_meta WHERE name IN ('secret_check', 'tombstone_identity')")
        conn.execute("INSERT INTO memory_meta (name, value) VALUES ('hmac_secret', ?)", (old_secret.hex(),))
        for value in (CITY, "Quaxmoorton"):
            digest = hmac.new(
                old_secret, "\x1f".join(("default", "u1", "city", value.lower())).encode(), hashlib.sha256
            ).hexdigest()
            conn.execute("INSERT INTO memory_tombstones (digest, created_at) VALUES (?, 0)", (digest,))
    return old_secret


def test_version_one_tombstones_keep_blocking_and_the_secret_moves_out(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "v1.db"
    old_secret = _make_version_one_store(path, clock)
    assert old_secret.hex().encode() in path.read_bytes() + Path(f"{path}-wal").read_bytes()

    store = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock)
    # Migrated: they cannot be re-digested without their values, so the old digest is checked too.
    assert store.apply("u1", Candidate(key="city", value=CITY)).action == WriteAction.BLOCKED
    assert store.apply("u1", Candidate(key="city", value="QUAXMOORTON")).action == WriteAction.BLOCKED
    assert store.current("u1", "city").value == "Pune"  # type: ignore[union-attr]
    # New deletions write the new digest, which holds against the new attacks.
    store.write("u1", "diet", "vegan", "2026-01-01", "m2")
    store.delete("u1", "diet")
    assert store.apply("u1", Candidate(key="diet", value="v\u0435gan")).action == WriteAction.BLOCKED
    assert store.wait_erased(10)
    # The secret left the database, its file bytes and its WAL, and is now in the key file.
    assert Path(f"{path}.key").read_text().strip() == f"hex:{old_secret.hex()}"
    _, meta = _tombstones_and_meta(path)
    assert old_secret.hex() not in meta
    for suffix in ("", "-wal"):
        f = Path(f"{path}{suffix}")
        assert not f.exists() or old_secret.hex().encode() not in f.read_bytes(), suffix
    store.close()
    reopened = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock)
    assert reopened.apply("u1", Candidate(key="city", value=CITY)).action == WriteAction.BLOCKED
    reopened.close()


@pytest.mark.postgres
def test_a_version_one_postgres_store_must_configure_its_secret_then_it_moves_out(
    monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    if _PG_REASON:
        pytest.skip(_PG_REASON)
    import psycopg

    monkeypatch.delenv("MAITRE_MEMORY_SECRET", raising=False)
    monkeypatch.delenv("MAITRE_MEMORY_SECRET_FILE", raising=False)
    schema = "mt_v1_" + os.urandom(4).hex()
    old_secret = os.urandom(32)
    first = MemoryStore.postgres(
        PG_DSN, schema=schema, pgvector=False, embedder=HashingEmbedder(), clock=clock, secret=os.urandom(32)
    )
    first.close()
    digest = hmac.new(
        old_secret, "\x1f".join(("default", "u1", "city", "pune")).encode(), hashlib.sha256
    ).hexdigest()
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(
            f'DELETE FROM "{schema}".memory_meta WHERE name IN (%s, %s)',
            ("secret_check", "tombstone_identity"),
        )  # type: ignore[arg-type]
        conn.execute(f'INSERT INTO "{schema}".memory_meta VALUES (%s, %s)', ("hmac_secret", old_secret.hex()))  # type: ignore[arg-type]
        conn.execute(f'INSERT INTO "{schema}".memory_tombstones VALUES (%s, 0)', (digest,))  # type: ignore[arg-type]
    try:
        with pytest.raises(UserError, match=r"inside the database.*hmac_secret"):
            MemoryStore.postgres(
                PG_DSN, schema=schema, pgvector=False, embedder=HashingEmbedder(), clock=clock
            )
        monkeypatch.setenv("MAITRE_MEMORY_SECRET", f"hex:{old_secret.hex()}")
        store = MemoryStore.postgres(
            PG_DSN, schema=schema, pgvector=False, embedder=HashingEmbedder(), clock=clock
        )
        assert store.apply("u1", Candidate(key="city", value="Pune")).action == WriteAction.BLOCKED
        store.close()
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            names = {r[0] for r in conn.execute(f'SELECT name FROM "{schema}".memory_meta')}  # type: ignore[arg-type]
        assert "hmac_secret" not in names and "secret_check" in names
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]


def test_processes_opening_a_new_file_at_once_agree_on_one_key(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "race.db"
    script = (
        "import sys\n"
        "from maitre.embeddings import HashingEmbedder\n"
        "from maitre.memory import MemoryStore\n"
        "s = MemoryStore.sqlite(sys.argv[1], embedder=HashingEmbedder())\n"
        "s.write(sys.argv[2], 'city', 'Zorbluxville', source='m')\n"
        "s.delete(sys.argv[2], 'city')\n"
        "s.close()\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), f"user{i}"]) for i in range(3)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    store = MemoryStore.sqlite(path, embedder=HashingEmbedder())
    for i in range(3):
        assert store.apply(f"user{i}", Candidate(key="city", value=CITY)).action == WriteAction.BLOCKED
    store.close()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
