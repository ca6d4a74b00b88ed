"""The length checks' running tally (bench/step_tallies.py): a batch's columns at once give the state that adding
its rows one by one gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from switchover.bench.step_tallies import LengthTally

count = st.one_of(st.none(), st.integers(0, (1 << 31) - 1), st.integers(0, 300))
row = st.tuples(
    count, st.one_of(st.none(), st.integers(1, 300)), st.one_of(st.none(), st.integers(1, 300)), count, count
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(row, max_size=40), max_size=4))
def test_adding_a_batch_of_columns_equals_adding_its_rows_one_by_one(batches):
    one, many = LengthTally(), LengthTally()
    for rows in batches:
        for r in rows:
            one.add_values(*r)
        many.add_columns(*([r[k] for r in rows] for k in range(5)))
    assert vars(many) == vars(one)
    assert many.check() == one.check()
