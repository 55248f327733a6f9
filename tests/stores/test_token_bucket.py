"""The token bucket computed in SQL (SQLite) agrees with the one computed in Python, on any sequence."""

from __future__ import annotations

import os
import tempfile

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from maitre.stores import MemoryStores, SQLiteStores

steps = st.lists(
    st.tuples(
        st.floats(min_value=-1.0, max_value=5.0, allow_nan=False), st.integers(min_value=1, max_value=4)
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(
    rate=st.floats(min_value=0.1, max_value=10.0, allow_nan=False),
    burst=st.integers(min_value=4, max_value=10),
    sequence=steps,
)
def test_sqlite_and_memory_buckets_give_the_same_answers(rate: float, burst: int, sequence: list) -> None:
    async def run() -> tuple[list[float], list[float]]:
        with tempfile.TemporaryDirectory() as tmp:
            sqlite = SQLiteStores(os.path.join(tmp, "b.db"))
            memory = MemoryStores()
            now = 1000.0
            got_sqlite, got_memory = [], []
            for dt, cost in sequence:
                now += dt  # dt may be negative: clocks do go backwards
                got_sqlite.append(
                    await sqlite.rate_limits.acquire("k", rate_per_s=rate, burst=burst, cost=cost, now=now)
                )
                got_memory.append(
                    await memory.rate_limits.acquire("k", rate_per_s=rate, burst=burst, cost=cost, now=now)
                )
            await sqlite.close()
            return got_sqlite, got_memory

    got_sqlite, got_memory = anyio.run(run)
    assert got_sqlite == pytest.approx(got_memory, abs=1e-9)
    assert [w == 0.0 for w in got_sqlite] == [w == 0.0 for w in got_memory]
