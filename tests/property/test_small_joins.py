"""The cut-down joins of a few rows with a large relation give polars' joins, row for row (as bags)."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamdetect.relational import small_joins

COLUMNS = ("A", "B", "C")


@st.composite
def frame(draw: st.DrawFn, columns: tuple[str, ...], max_size: int) -> pl.DataFrame:
    # Few values per column (so joins match) and some nulls (seen rows may hold them).
    value = st.one_of(st.none(), st.integers(0, 4)) if draw(st.booleans()) else st.integers(0, 4)
    rows = draw(st.lists(st.fixed_dictionaries(dict.fromkeys(columns, value)), max_size=max_size))
    return pl.DataFrame(rows, schema=dict.fromkeys(columns, pl.UInt32))


def _bag(frame: pl.DataFrame) -> list[tuple[Any, ...]]:
    return sorted(frame.select(sorted(frame.columns)).rows(), key=repr)


@pytest.fixture(autouse=True)
def _tiny_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 60-row side counts as large against a few rows, so the cut is exercised on small examples.
    monkeypatch.setattr(small_joins, "LARGE_ROWS", 4)
    monkeypatch.setattr(small_joins, "RATIO", 2)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    frame(("A", "B", "C"), 60),
    frame(("A", "B"), 6),
    st.sampled_from(["inner", "semi", "anti"]),
    st.booleans(),
    st.booleans(),
    st.sampled_from([["A"], ["B"], ["A", "B"], ["B", "A"]]),
)
def test_cut_join_equals_polars_join(
    large: pl.DataFrame, small: pl.DataFrame, how: Any, swap: bool, nulls_equal: bool, on: list[str]
) -> None:
    small = small.with_columns(pl.lit(1, dtype=pl.UInt32).alias("D"))
    left, right = (small, large) if swap else (large, small)
    expected = left.join(right, on=on, how=how, nulls_equal=nulls_equal)
    got = small_joins.join(left, right, on, how, nulls_equal=nulls_equal)
    assert got.columns == expected.columns
    assert _bag(got) == _bag(expected)


def test_the_cut_keeps_only_rows_sharing_a_key() -> None:
    large = pl.DataFrame({"A": list(range(50)) * 2, "B": [0, 1] * 50}, schema={"A": pl.UInt32, "B": pl.UInt32})
    small = pl.DataFrame({"A": [3, 7], "B": [1, 1]}, schema={"A": pl.UInt32, "B": pl.UInt32})
    cut = small_joins.rows_sharing_key(large, small, ["B", "A"])
    # A, where the small side shows more values, goes first and already leaves few rows.
    assert sorted(cut.get_column("A").to_list()) == [3, 3, 7, 7]
