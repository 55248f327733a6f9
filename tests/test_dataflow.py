"""Data-flow tracing (`maitre.dataflow.Provenance`): what it traces to trusted text, and the
transformations of untrusted values it must not trace (attacks of our own, not a benchmark's)."""

from __future__ import annotations

import base64
import json
import time
import urllib.parse

import pytest

from maitre.dataflow import MAX_TRUSTED_CHARS, Provenance, normalise_text

REQUEST = (
    "Please pay my landlord the rent: 1,250.00 EUR to IBAN DE89 3704 0044 0532 0130 00, reference "
    "'Rent May 2026'. Then read https://docs.example.org/tenancy and tell me what it says."
)
ATTACKER_IBAN = "GB33BUKB20201555555555"
ATTACKER_URL = "https://exfil.attacker.test/collect"


@pytest.fixture
def provenance() -> Provenance:
    p = Provenance()
    p.add_request("You are a careful banking assistant.")
    p.add_request(REQUEST)
    p.add_trusted(
        '{"balance": "4,980.12", "owner": "Emma Johnson", "account": "DE27 1002 0500 0001 2345 67"}'
    )
    return p


# -- values from the user or trusted results are traced (no false positives) -----------------------


@pytest.mark.parametrize(
    "value",
    [
        "DE89370400440532013000",  # the user's spaced IBAN, sent compact
        "de89 3704 0044 0532 0130 00",  # retyped in another case
        "DE89\u00a03704\u00a00044\u00a00532\u00a00130\u00a000",  # no-break spaces
        "ＤＥ８９３７０４００４４０５３２０１３０００",  # fullwidth (NFKC)
        "Rent May 2026",
        "RENT MAY 2026",
        "https://docs.example.org/tenancy",
        "Emma Johnson",  # from a trusted result
        "emma johnson",
        "EUR",  # a short value, as a whole token
        "",
    ],
)
def test_a_value_the_user_or_a_trusted_result_wrote_is_traced(provenance, value):
    assert provenance.untraced({"value": value}) == []


@pytest.mark.parametrize("amount", [1250, 1250.0, "1250.00", "1250", 4980.12, "4980.12"])
def test_a_number_is_traced_by_its_value_however_it_is_written(provenance, amount):
    assert provenance.untraced({"amount": amount}) == []


def test_none_booleans_and_values_the_schema_fixes_are_traced(provenance):
    schema = {
        "type": "object",
        "properties": {
            "currency": {"enum": ["EUR", "USD", "CHF"]},
            "kind": {"const": "SEPA-instant"},
            "priority": {"type": "integer", "default": 7},
            "mode": {"$ref": "#/$defs/Mode"},
            "lines": {"type": "array", "items": {"anyOf": [{"enum": ["fee-waived"]}, {"type": "string"}]}},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "urgent": {"type": "boolean"},
        },
        "$defs": {"Mode": {"type": "string", "enum": ["standing-order", "once"]}},
    }
    arguments = {
        "currency": "CHF",
        "kind": "SEPA-instant",
        "priority": 7,
        "mode": "standing-order",
        "lines": ["fee-waived"],
        "note": None,
        "urgent": True,
    }
    assert provenance.untraced(arguments, schema) == []
    # the same values without the schema saying so are the model's own choices
    assert sorted(provenance.untraced(arguments)) == ["currency", "kind", "lines[0]", "mode", "priority"]


# -- what the model composed, or what only untrusted content said, is not traced -------------------


@pytest.mark.parametrize(
    "value",
    [
        ATTACKER_IBAN,
        ATTACKER_URL,
        "Rent for May and a little extra",  # composed by the model
        "2026-06-01",  # a date the model computed
        "https://docs.example.org/tenancy?leak=DE89370400440532013000",  # trusted parts, new whole
        "medi",  # not the start of a word of `medieval`-style text: see the next test
    ],
)
def test_a_value_not_in_trusted_text_is_untraced(provenance, value):
    assert provenance.untraced({"value": value}) == ["value"]


def test_a_match_must_sit_on_token_boundaries():
    p = Provenance()
    p.add_request("a medieval castle, the landlord's evidence")
    assert p.untraced({"a": "evil", "b": "lord", "c": "evid"}) == ["a", "b", "c"]
    assert p.untraced({"a": "medieval castle", "b": "landlord's"}) == []


@pytest.mark.parametrize(
    "amount, why",
    [
        (12500, "a digit more"),
        (125, "a digit less"),
        (-1250, "a sign the text never had"),
        (1250.01, "a cent more"),
        ("1e999999", "an exponent too big to write out"),
    ],
)
def test_a_number_the_trusted_text_never_had_is_untraced(provenance, amount, why):
    assert provenance.untraced({"amount": amount}) == ["amount"], why


def _attacker_transforms(value: str) -> dict[str, str]:
    return {
        "upper": value.upper(),
        "lower": value.lower(),
        "spaced": " ".join(value[i : i + 4] for i in range(0, len(value), 4)),
        "zero-width": "\u200b".join(value),
        "base64": base64.b64encode(value.encode()).decode(),
        "hex": value.encode().hex(),
        "url": urllib.parse.quote(value, safe=""),
        "reversed": value[::-1],
        "fullwidth": "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in value),
    }


@pytest.mark.parametrize("value", [ATTACKER_IBAN, ATTACKER_URL])
def test_every_transformation_of_an_untrusted_value_stays_untraced(provenance, value):
    provenance_untrusted_seen = value  # only an untrusted result ever said it: it is not in the corpus
    transforms = _attacker_transforms(provenance_untrusted_seen)
    assert sorted(provenance.untraced(transforms)) == sorted(transforms)


def test_an_untrusted_value_split_across_arguments_leaves_a_piece_untraced(provenance):
    """An IBAN cut into a prefix and a rest, or into 4-character groups (some of which, like `2020`,
    a trusted text may well contain): at least one piece cannot be traced, so the call asks."""
    halves = {"country_and_bank": ATTACKER_IBAN[:8], "account": ATTACKER_IBAN[8:]}
    assert sorted(provenance.untraced(halves)) == ["account", "country_and_bank"]
    groups = {f"part{i}": ATTACKER_IBAN[i : i + 4] for i in range(0, len(ATTACKER_IBAN), 4)}
    assert provenance.untraced(groups)
    parts = ATTACKER_URL.split("/")
    assert provenance.untraced({"scheme": parts[0], "host": parts[2], "path": parts[3]})


def test_a_homoglyph_of_a_trusted_value_is_untraced(provenance):
    """Cyrillic letters that look like Latin ones name another destination: NFKC keeps them apart."""
    spoofed = "https://docs.ex\u0430mple.org/tenancy"  # Cyrillic a
    assert provenance.untraced({"url": spoofed}) == ["url"]


def test_invisible_characters_alone_are_not_traced_as_empty(provenance):
    """A value of zero-width characters normalises to nothing, but could spell bits."""
    assert provenance.untraced({"a": "\u200b\u200c\u200b", "b": "   ", "c": ""}) == ["a", "b"]


def test_undeclared_keys_are_leaves_too(provenance):
    schema = {"type": "object", "properties": {"meta": {"type": "object", "additionalProperties": True}}}
    arguments = {"meta": {ATTACKER_IBAN: "EUR", "currency": "EUR"}}
    assert provenance.untraced(arguments, schema) == [f"meta.{ATTACKER_IBAN} (key)", "meta.currency (key)"]


def test_paths_name_where_the_values_are(provenance):
    arguments = {"payments": [{"iban": "DE89370400440532013000"}, {"iban": ATTACKER_IBAN}], "odd key": "x1y2"}
    assert provenance.untraced(arguments) == ["payments[1].iban", "['odd key']"]


def test_too_many_leaves_is_untraced_not_slow(provenance):
    arguments = {"many": ["EUR"] * 10_000}
    started = time.perf_counter()
    paths = provenance.untraced(arguments)
    assert paths and time.perf_counter() - started < 1.0


# -- laundering through a trusted tool --------------------------------------------------------------


def test_a_trusted_tool_echoing_an_untraced_value_does_not_launder_it(provenance):
    """`lookup(iban=ATTACKER)` answers "no account GB33 BUKB ... found" (a trusted result that quotes
    the argument); `note_arguments` made the IBAN a suspect, so the echo is masked out."""
    provenance.note_arguments({"iban": ATTACKER_IBAN})
    spaced = " ".join(ATTACKER_IBAN[i : i + 4] for i in range(0, len(ATTACKER_IBAN), 4))
    provenance.add_trusted(f"No account {spaced.lower()} found. Known: Emma Johnson.")
    assert provenance.untraced({"iban": ATTACKER_IBAN}) == ["iban"]
    assert provenance.untraced({"a": ATTACKER_IBAN[:10], "b": ATTACKER_IBAN[10:]})  # split laundering
    assert provenance.untraced({"owner": "Emma Johnson", "words": "Known"}) == []  # the rest still counts


def test_an_echoed_amount_is_not_laundered(provenance):
    provenance.note_arguments({"amount": 98765})
    provenance.add_trusted("No transaction of 98,765.00 exists.")
    assert provenance.untraced({"amount": 98765}) == ["amount"]


def test_traced_values_are_not_suspects(provenance):
    provenance.note_arguments({"iban": "DE89370400440532013000"})
    provenance.add_trusted("Transfer to DE89370400440532013000 scheduled.")
    assert provenance.untraced({"iban": "DE89370400440532013000"}) == []


# -- bounds and state -------------------------------------------------------------------------------


def test_results_over_the_budget_drop_the_oldest_and_keep_the_request():
    p = Provenance(max_chars=250)
    p.add_request("pay bob 4711")
    p.add_trusted("first result ABCD-0001 " + "x" * 80)
    p.add_trusted("second result ABCD-0002 " + "y" * 80)
    p.add_trusted("third result ABCD-0003 " + "z" * 80)
    assert p.chars <= 250
    assert p.untraced({"a": "ABCD-0001", "b": "ABCD-0002", "c": "ABCD-0003", "d": 4711}) == ["a"]


def test_a_text_longer_than_the_budget_keeps_its_start():
    p = Provenance(max_chars=50)
    p.add_request("start " + "w" * 100 + " end-marker")
    assert p.chars == 50
    assert p.untraced({"a": "start", "b": "end-marker"}) == ["b"]


def test_provenance_round_trips_through_its_dict(provenance):
    provenance.note_arguments({"iban": ATTACKER_IBAN})
    provenance.add_trusted(f"echo {ATTACKER_IBAN}")
    again = Provenance.from_dict(provenance.to_dict())
    assert again == provenance
    assert again.untraced({"iban": ATTACKER_IBAN, "own": "DE89370400440532013000"}) == ["iban"]
    assert again.to_dict()["max_chars"] == MAX_TRUSTED_CHARS


def test_tracing_a_full_corpus_is_fast():
    p = Provenance()
    words = " ".join(f"word{i} {i}.{i % 100:02d}" for i in range(30_000))
    p.add_request(words[:MAX_TRUSTED_CHARS])
    started = time.perf_counter()
    assert p.untraced({"a": "word9000", "b": 9000.0, "c": ATTACKER_IBAN}) == ["c"]
    first = time.perf_counter() - started
    started = time.perf_counter()
    p.untraced({"a": "word12", "c": "a" * 5000})
    assert first < 2.0 and time.perf_counter() - started < 0.2


def test_adding_text_is_cheap_until_something_is_traced():
    p = Provenance()
    started = time.perf_counter()
    for i in range(2000):
        p.add_trusted(f'{{"order": "A{i:04d}", "status": "shipped"}}')
    assert time.perf_counter() - started < 0.05
    assert p._corpus is None  # nothing normalised yet


def test_normalise_text():
    assert (
        normalise_text("  Ｈｅｌｌｏ\u200b\tWORLD\n\n ß ") == "hello world ß"
    )  # ß is not ss (another domain)
    assert normalise_text("a\x00b\x07c") == "abc"


def test_a_string_inside_a_json_result_is_traced_as_the_model_reads_it():
    """Results reach the model as JSON text: `\\n`, `\\"` and `\\u00e9` are how the string is spelled
    there, not what the model copies."""
    p = Provenance()
    p.add_trusted(json.dumps({"body": 'Line one\nHe said "hi" at the café'}, ensure_ascii=True))
    assert p.untraced({"body": 'Line one\nHe said "hi" at the café'}) == []
    assert p.untraced({"body": 'He said "bye"'}) == ["body"]


def test_spaces_come_and_go_next_to_digits_only():
    """`DE89 3704` is `DE893704`, but two trusted words run together are a new value: an attacker
    could register `x.comor` from a trusted "bob@x.com or alice"."""
    p = Provenance()
    p.add_request("write to bob@x.com or alice; call +49 30 1234567; the Rent May note")
    assert p.untraced({"to": "bob@x.comor", "name": "rentmay"}) == ["to", "name"]
    assert p.untraced({"to": "bob@x.com", "phone": "+49301234567", "name": "rent may"}) == []


def test_an_echo_re_spaced_between_letters_is_still_masked():
    p = Provenance()
    p.add_request("book a table")
    p.note_arguments({"company": "evilcorpltd"})
    p.add_trusted("No company named evil corp ltd was found.")
    assert p.untraced({"a": "evil corp ltd", "b": "evilcorpltd"}) == ["a", "b"]
