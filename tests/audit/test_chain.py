"""The audit chain detects every kind of tampering and names the first bad entry."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import fields, replace
from decimal import Decimal

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from maitre.audit import (
    GENESIS_HASH,
    REDACTED,
    AuditEntry,
    ChainVerifier,
    canonical_json,
    digest,
    entry_hash,
    redact,
    seal,
    verify,
)


def chain(n: int) -> list[AuditEntry]:
    """n sealed entries, as a store would produce them."""
    out: list[AuditEntry] = []
    prev = GENESIS_HASH
    for i in range(n):
        sealed = seal(
            AuditEntry(
                at=1_700_000_000.5 + i,
                user="ann",
                tenant="acme",
                tool="issue_refund",
                decision="allow" if i % 2 else "deny",
                call_id=f"c{i}",
                duration_ms=0.25 * i,
            ),
            seq=i + 1,
            prev_hash=prev,
        )
        out.append(sealed)
        prev = sealed.hash
    return out


def test_an_intact_chain_verifies_and_reports_its_head() -> None:
    entries = chain(10)
    report = verify(entries)
    assert (report.ok, report.checked, report.first_bad_seq, report.reason) == (True, 10, None, None)
    assert (report.last_seq, report.last_hash) == (10, entries[-1].hash)


def test_an_empty_chain_verifies() -> None:
    report = verify([])
    assert report.ok and report.checked == 0 and report.last_hash == GENESIS_HASH


def test_the_hash_covers_every_field_but_itself() -> None:
    """sha256 over RFC 8785 JSON of all other fields: anyone can recompute it."""
    entry = chain(1)[0]
    payload = {f.name: getattr(entry, f.name) for f in fields(AuditEntry) if f.name != "hash"}
    assert entry.hash == hashlib.sha256(rfc8785.dumps(payload)).hexdigest() == entry_hash(entry)


def test_an_altered_entry_is_named() -> None:
    entries = chain(6)
    entries[3] = replace(entries[3], decision="allow" if entries[3].decision == "deny" else "deny")
    report = verify(entries)
    assert (report.ok, report.first_bad_seq, report.checked) == (False, 4, 4)
    assert "entry 4 was altered" in (report.reason or "")
    assert report.last_seq == 3


def test_an_altered_and_rehashed_entry_breaks_the_next_link() -> None:
    """Recomputing the altered entry's hash moves the break to the link after it."""
    entries = chain(6)
    forged = replace(entries[2], user="mallory", hash="")
    entries[2] = replace(forged, hash=entry_hash(forged))
    report = verify(entries)
    assert (report.ok, report.first_bad_seq) == (False, 4)
    assert "does not link to entry 3" in (report.reason or "")


def test_a_removed_entry_is_named() -> None:
    entries = chain(6)
    del entries[2]
    report = verify(entries)
    assert (report.ok, report.first_bad_seq) == (False, 3)
    assert "expected entry 3 but found entry 4" in (report.reason or "")


def test_removing_the_first_entry_is_detected() -> None:
    report = verify(chain(3)[1:])
    assert (report.ok, report.first_bad_seq) == (False, 1)


def test_a_removed_entry_with_renumbered_successors_is_detected() -> None:
    """Renumbering the tail hides the gap in seq but not in the hash links."""
    entries = chain(5)
    del entries[1]
    entries = [replace(e, seq=i + 1) for i, e in enumerate(entries)]
    report = verify(entries)
    assert (report.ok, report.first_bad_seq) == (False, 2)


def test_reordered_entries_are_detected() -> None:
    entries = chain(6)
    entries[2], entries[3] = entries[3], entries[2]
    report = verify(entries)
    assert (report.ok, report.first_bad_seq) == (False, 3)


def test_a_duplicated_entry_is_detected() -> None:
    entries = chain(4)
    entries.insert(2, entries[1])
    report = verify(entries)
    assert (report.ok, report.first_bad_seq) == (False, 3)


def test_a_forged_tail_that_does_not_link_is_detected() -> None:
    """An appended entry sealed against a made-up previous hash fails at its seq."""
    entries = chain(4)
    entries.append(seal(replace(entries[0], decision="allow"), seq=5, prev_hash="f" * 64))
    report = verify(entries)
    assert (report.ok, report.first_bad_seq) == (False, 5)


def test_an_anchor_catches_a_truncated_log() -> None:
    """Cutting entries off the end leaves a valid chain: only an anchor kept elsewhere shows it."""
    entries = chain(6)
    anchor = (6, entries[5].hash)
    assert verify(entries[:4]).ok
    report = verify(entries[:4], anchor=anchor)
    assert (report.ok, report.first_bad_seq) == (False, 5)
    assert "cut off the end" in (report.reason or "")
    assert verify(entries, anchor=anchor).ok


def test_an_anchor_catches_a_fully_rewritten_history() -> None:
    """Rewriting and re-sealing every entry yields a valid chain, but not the anchored hash."""
    original = chain(5)
    rewritten: list[AuditEntry] = []
    prev = GENESIS_HASH
    for e in original:
        sealed = seal(replace(e, user="mallory" if e.seq == 2 else e.user), seq=e.seq, prev_hash=prev)
        rewritten.append(sealed)
        prev = sealed.hash
    assert verify(rewritten).ok
    report = verify(rewritten, anchor=(3, original[2].hash))
    assert (report.ok, report.first_bad_seq) == (False, 3)


def test_a_slice_verifies_from_a_known_predecessor() -> None:
    entries = chain(8)
    assert verify(entries[4:], after_seq=4, after_hash=entries[3].hash).ok
    assert not verify(entries[4:], after_seq=4, after_hash=GENESIS_HASH).ok


def test_the_verifier_stops_at_the_first_break() -> None:
    entries = chain(5)
    entries[1] = replace(entries[1], tool="other")
    entries[3] = replace(entries[3], tool="other")
    verifier = ChainVerifier()
    results = [verifier.feed(e) for e in entries]
    assert results == [True, False, False, False, False] and verifier.broken
    assert verifier.report().first_bad_seq == 2


@given(
    index=st.integers(min_value=0, max_value=7),
    field=st.sampled_from(
        [
            "at",
            "user",
            "tenant",
            "tool",
            "decision",
            "call_id",
            "duration_ms",
            "replayed",
            "error_code",
            "arguments",
            "prev_hash",
        ]
    ),
)
def test_changing_any_field_of_any_entry_is_caught_at_that_entry(index: int, field: str) -> None:
    entries = chain(8)
    value = getattr(entries[index], field)
    if isinstance(value, bool):
        changed: object = not value
    elif isinstance(value, float):
        changed = value + 0.001
    elif value is None:
        changed = "x"
    else:
        changed = value + "x"
    entries[index] = replace(entries[index], **{field: changed})
    report = verify(entries)
    assert not report.ok and report.first_bad_seq == index + 1


# ---------------------------------------------------------------------------------------- canonical forms


def test_digest_is_sha256_of_rfc8785_json_and_ignores_key_order() -> None:
    a = {"b": [1, 2.5, None, True], "a": "café", "n": 1.0}
    b = {"n": 1, "a": "café", "b": [1, 2.5, None, True]}
    assert digest(a) == digest(b) == hashlib.sha256(rfc8785.dumps(a)).hexdigest()
    assert canonical_json(a) == '{"a":"café","b":[1,2.5,null,true],"n":1}'
    assert len(digest("x")) == 64


def test_canonical_json_refuses_values_json_cannot_represent_exactly() -> None:
    """A Decimal must be dumped to JSON first (pydantic mode="json"), never hashed through a float."""
    with pytest.raises(TypeError, match="mode='json'"):
        canonical_json({"amount": Decimal("12.50")})
    with pytest.raises(TypeError):
        canonical_json({"n": float("nan")})


@pytest.mark.parametrize(
    "hostile",
    [
        '{"a": NaN}',
        '{"a": -Infinity}',
        '{"a": 1e400}',
        '{"a": 123456789012345678901234567890}',
        '{"a": "\\ud800"}',
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    ],
)
def test_digest_never_fails_on_what_a_model_can_send(hostile: str) -> None:
    """json.loads accepts these; RFC 8785 does not. The audit digest still works, deterministically."""
    value = json.loads(hostile)
    assert digest(value) == digest(json.loads(hostile))
    assert len(digest(value)) == 64
    assert canonical_json(redact(value))  # the redacted mode is always canonicalisable


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@given(json_like)
def test_digest_and_redacted_json_are_total_on_json_like_values(value: object) -> None:
    assert digest(value) == digest(copy.deepcopy(value))
    assert canonical_json(redact(value)) == canonical_json(redact(copy.deepcopy(value)))


def test_fallback_digests_never_collide_with_canonical_ones() -> None:
    assert digest({"a": Decimal("1.5")}) != digest({"a": "1.5"})
    assert digest({"a": 2**60}) != digest({"a": str(2**60)})
    assert digest({"a": Decimal("1.5")}) != digest({"a": Decimal("1.50")})


def test_redaction_turns_unrepresentable_leaves_into_strings() -> None:
    assert redact({"a": float("nan"), "b": 2**60, "c": Decimal("1.50"), "d": (1, 2), "e": 1.5}) == {
        "a": "nan",
        "b": str(2**60),
        "c": "1.50",
        "d": [1, 2],
        "e": 1.5,
    }


def test_redaction_hides_sensitive_values_at_any_depth_and_keeps_the_shape() -> None:
    value = {
        "user": "ann",
        "auth": {"X-Api-Key": "sk-1", "access_token": "t", "mode": "bearer"},
        "items": [{"Password": "p", "qty": 2}, "plain"],
        "clientSecret": "s",
    }
    redacted = redact(value)
    assert redacted == {
        "user": "ann",
        "auth": {"X-Api-Key": REDACTED, "access_token": REDACTED, "mode": "bearer"},
        "items": [{"Password": REDACTED, "qty": 2}, "plain"],
        "clientSecret": REDACTED,
    }
    assert value["auth"]["X-Api-Key"] == "sk-1"  # the input is untouched
    assert redact({"order_id": "ORD-1", "email": "a@b"}, keys=("email",)) == {
        "order_id": "ORD-1",
        "email": REDACTED,
    }
