"""Seed 002's four guards hold when the calls go through maitre's gate."""

import anyio
import guards

from maitre import Gate, GateLimits, Principal
from maitre.tokens import count_tokens


def run(fn):
    gate = Gate(guards.box, limits=GateLimits(retry_backoff_s=0.001))
    return anyio.run(fn, gate, Principal(user="u1"))


def test_timeout_300ms_passes_and_5000ms_is_cut_at_1500ms():
    (fast_ms, fast_waited, fast_code), (slow_ms, slow_waited, slow_code) = run(guards.guard_timeout)
    assert (fast_ms, slow_ms) == (300, 5000)
    assert fast_code == "ok" and 250 < fast_waited < 1000
    assert slow_code == "TIMEOUT" and 1400 < slow_waited < 2500


def test_a_deterministic_error_is_not_retried():
    guards.CALLS["get_price"] = 0
    code, calls = run(guards.guard_error)
    assert code == "NOT_FOUND" and calls == 1


def test_an_11700_token_log_is_kept_to_512_tokens_with_a_handle_for_the_rest():
    assert abs(count_tokens(guards.make_log()) - 11_700) < 100
    result = run(guards.guard_size)
    shown = result.content.split("\n[cut:")[0]
    assert count_tokens(shown) <= 512
    assert result.usage["tokens"] > 11_600 and result.usage["tokens_dropped"] > 11_000
    assert result.handle and "read_result" in result.content
    assert count_tokens(shown) < 5_972  # fits the free budget of seed 002's 8k window


def test_the_repeated_call_is_stopped_at_the_third_time():
    assert run(guards.guard_loop) == ["ok", "ok", "LOOP_DETECTED"]
