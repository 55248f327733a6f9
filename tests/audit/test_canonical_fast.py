"""The C-encoder fast path writes exactly RFC 8785's bytes for every value it accepts."""

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from maitre.audit.canonical import _fast_safe, canonical_bytes

leaves = st.none() | st.booleans() | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1) | st.text()
values = st.recursive(
    leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=25,
)


@settings(max_examples=2000, deadline=None)
@given(values)
def test_fast_path_matches_rfc8785(value):
    try:
        expected = rfc8785.dumps(value)
    except Exception:
        expected = None
    if _fast_safe(value):
        assert canonical_bytes(value) == expected


@settings(max_examples=500, deadline=None)
@given(
    st.recursive(
        leaves | st.floats(allow_nan=False, allow_infinity=False),
        lambda c: st.lists(c, max_size=3),
        max_leaves=8,
    )
)
def test_floats_take_the_rfc8785_path(value):
    assert canonical_bytes(value) == rfc8785.dumps(value)


def test_examples_that_differ_between_encoders_fall_back():
    assert not _fast_safe({"a": 1.0})
    assert _fast_safe({"at": 1796010352.1339133, "duration_ms": 0.168})
    assert not _fast_safe({"\U0001f600": 1})  # non-BMP key: UTF-16 order differs
    assert not _fast_safe({"a": 2**60})
    assert canonical_bytes({"b": 1.0, "a": "\n"}) == b'{"a":"\\n","b":1}'


# -- the audit entry's field-by-field writer ----------------------------------------------------------

_texts = st.none() | st.text()
_numbers = st.floats(allow_nan=False, allow_infinity=False) | st.integers(min_value=-(2**60), max_value=2**60)


@settings(max_examples=2000, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "at": _numbers,
            "user": st.text(),
            "tool": st.text(),
            "run_id": _texts,
            "detail": _texts,
            "duration_ms": _numbers,
            "replayed": st.booleans(),
            "seq": st.integers(min_value=0, max_value=2**60),
        }
    )
)
def test_the_audit_payload_writer_matches_rfc8785(fields):
    from maitre.audit.chain import _HASHED_FIELDS, _payload_bytes

    payload = dict.fromkeys(_HASHED_FIELDS, "x") | fields
    try:
        expected = rfc8785.dumps(payload)
    except Exception:  # what RFC 8785 refuses, the writer refuses too
        with pytest.raises((TypeError, UnicodeError)):
            _payload_bytes(payload)
        return
    assert _payload_bytes(payload) == expected
