"""The numpy relations of codes against polars, and the elimination run in numpy, in polars, and mixed,
against a brute-force join (Dou & Coulondre's linked sets, section 3.4)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamdetect.relational import code_arrays
from streamdetect.relational import linked_values as lv
from streamdetect.relational.code_arrays import CodeRelation

ATTRIBUTES = ("E", "T", "A", "B", "C")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def frame(draw: st.DrawFn, columns: tuple[str, ...] | None = None, max_size: int = 30) -> pl.DataFrame:
    if columns is None:
        columns = tuple(draw(st.lists(st.sampled_from(ATTRIBUTES), min_size=1, max_size=4, unique=True)))
    # Few values per column so that joins match; sometimes a huge code, so keys overflow 64 bits.
    top = draw(st.sampled_from([3, 6, 2**32 - 2]))
    value = st.integers(0, 4) | st.just(top)
    rows = draw(st.lists(st.tuples(*[value] * len(columns)), max_size=max_size))
    return pl.DataFrame(rows, schema=dict.fromkeys(columns, pl.UInt32), orient="row")


def _set(frame: pl.DataFrame) -> list[tuple[Any, ...]]:
    return sorted(set(frame.select(sorted(frame.columns)).rows()))


def _bag(frame: pl.DataFrame) -> list[tuple[Any, ...]]:
    return sorted(frame.select(sorted(frame.columns)).rows())


def _natural(frames: list[pl.DataFrame]) -> pl.DataFrame:
    joined = frames[0]
    for other in frames[1:]:
        on = [c for c in other.columns if c in joined.columns]
        joined = joined.join(other, on=on) if on else joined.join(other, how="cross")
    return joined


#: Lookups of equal keys (code_arrays.matching_runs) by two searches per key, and sorted from the first key.
LOOKUPS = pytest.mark.parametrize("sorted_from", [None, 0])


@contextmanager
def lookups(sorted_from: int | None) -> Iterator[None]:
    if sorted_from is None:
        yield
    else:
        with mock.patch.object(code_arrays, "_SORTED_LOOKUPS", sorted_from):
            yield


@SETTINGS
@LOOKUPS
@given(st.lists(st.integers(0, 6), max_size=40), st.lists(st.integers(0, 8), max_size=40))
def test_matching_runs_are_the_runs_of_equal_keys(
    sorted_from: int | None, present: list[int], wanted: list[int]
) -> None:
    ordered = np.sort(np.array(present, dtype=np.uint64))
    with lookups(sorted_from):
        low, counts = code_arrays.matching_runs(ordered, np.array(wanted, dtype=np.uint64))
    for key, start, count in zip(wanted, low.tolist(), counts.tolist(), strict=True):
        assert count == present.count(key)
        if count:
            assert ordered[start : start + count].tolist() == [key] * count


@SETTINGS
@LOOKUPS
@given(st.lists(frame(), min_size=1, max_size=4))
def test_join_all_is_the_natural_join_as_a_bag(sorted_from: int | None, frames: list[pl.DataFrame]) -> None:
    with lookups(sorted_from):
        got = code_arrays.join_all([CodeRelation.from_frame(f) for f in frames]).to_frame()
    expected = _natural(sorted(frames, key=lambda f: f.height))
    assert sorted(got.columns) == sorted(expected.columns)
    if expected.height:
        assert _bag(got) == _bag(expected)
    else:
        assert got.is_empty()


@SETTINGS
@given(frame(), st.data())
def test_unique_and_heads_per_key_are_polars(relation: pl.DataFrame, data: st.DataObject) -> None:
    codes = CodeRelation.from_frame(relation)
    assert _bag(code_arrays.unique(codes).to_frame()) == _bag(relation.unique())
    keys = data.draw(st.lists(st.sampled_from(relation.columns), unique=True))
    k = data.draw(st.integers(1, 3))
    capped = code_arrays.head_per_key(code_arrays.unique(codes), keys, k).to_frame()
    # Which rows a group keeps is not defined: the distinct rows, at most k per key, and as many as polars.
    assert set(capped.rows()) <= set(relation.rows())
    assert capped.height == relation.unique().pipe(lambda f: lv.cap_per_key(f, keys, k)).height
    if keys:
        assert max(capped.group_by(keys).len().get_column("len").to_list(), default=0) <= k
        # Distinct counts, by flags where the values are few (a huge code: by sorting), are polars'.
        assert codes.n_unique(keys) == relation.select(keys).n_unique()
        assert code_arrays.count_distinct(codes, keys) == relation.select(keys).n_unique()


def test_row_keys_fold_past_64_bits() -> None:
    # Radix 2**32 - 1 in each of three columns: packed without folding, (1, 2, 1) and (0, 0, 0) would
    # wrap to one key modulo 2**64.
    top = 2**32 - 2
    columns = [np.array(values, dtype=np.uint32) for values in ([0, 1, top], [0, 2, top], [0, 1, top])]
    keys = code_arrays.row_keys(columns)
    assert len(set(keys.tolist())) == 3
    again = code_arrays.row_keys([c[[1, 2, 1]] for c in columns])
    assert again[0] == again[2] != again[1]


@contextmanager
def _numpy_rows(value: int) -> Iterator[None]:
    """Set the numpy engine's threshold for a block (a fixture would be shared by hypothesis' examples)."""
    before = lv.CODE_ARRAYS_ROWS
    lv.CODE_ARRAYS_ROWS = value
    try:
        yield
    finally:
        lv.CODE_ARRAYS_ROWS = before


@st.composite
def publication(draw: st.DrawFn) -> tuple[dict[str, pl.DataFrame], int]:
    frames = draw(st.lists(frame(max_size=12), min_size=1, max_size=4))
    columns = {c for f in frames for c in f.columns}
    if "E" not in columns:
        frames.append(draw(frame(("E", "A"), 8)))
    if "T" not in columns:
        frames.append(draw(frame(("T", "A"), 8)))
    return {f"r{i}": f.unique() for i, f in enumerate(frames)}, draw(st.integers(1, 3))


@pytest.mark.parametrize("numpy_rows", [-1, 3, 10**9], ids=["polars", "mixed", "numpy"])
@SETTINGS
@given(publication())
def test_linked_values_of_every_engine_equal_brute_force(
    numpy_rows: int, case: tuple[dict[str, pl.DataFrame], int]
) -> None:
    relations, k = case
    with _numpy_rows(numpy_rows):
        got = lv.linked_values(relations, "E", "T", k)
    joined = _natural(list(relations.values())).select("E", "T").unique()
    truth: dict[int, set[int]] = {}
    for e, t in joined.rows():
        truth.setdefault(e, set()).add(t)
    found: dict[int, set[int]] = {}
    for e, t in got.rows():
        found.setdefault(e, set()).add(t)
    assert got.height == got.unique().height
    assert found.keys() == truth.keys()
    for e, values in truth.items():
        # Exact below k; k of the true values otherwise.
        assert found[e] == values if len(values) < k else (len(found[e]) == k and found[e] <= values)


@SETTINGS
@given(frame(("A", "B", "C"), 12), frame(("A", "B", "D"), 60), st.sampled_from([["A"], ["B"], ["A", "B"]]))
def test_shown_is_the_semi_join(rows: pl.DataFrame, large: pl.DataFrame, on: list[str]) -> None:
    mask = code_arrays.shown(CodeRelation.from_frame(rows), CodeRelation.from_frame(large), on)
    partners = set(large.select(on).rows())
    assert mask.tolist() == [row in partners for row in rows.select(on).rows()]


@SETTINGS
@given(frame(("A", "B"), 20), frame(("A", "B"), 20), st.integers(1, 3))
def test_fresh_heads_are_the_capped_merge(earlier: pl.DataFrame, fresh: pl.DataFrame, k: int) -> None:
    # The earlier rows as a capped set (distinct, at most k per A), then the fresh rows merged after them
    # by the query the merge replaced: dedup keeping the first, k per key in order.
    earlier = earlier.unique(maintain_order=True).group_by("A", maintain_order=True).head(k)
    merged = (
        pl.concat([earlier.with_columns(pl.lit(False).alias("new")), fresh.with_columns(pl.lit(True).alias("new"))])
        .unique(["A", "B"], keep="first", maintain_order=True)
        .group_by("A", maintain_order=True)
        .head(k)
    )
    picked = code_arrays.fresh_heads(CodeRelation.from_frame(earlier), CodeRelation.from_frame(fresh), ["A"], k)
    # The same rows, each once (the merge lists them by key, fresh_heads in their order in ``fresh``).
    assert sorted(fresh[picked].rows()) == sorted(merged.filter(pl.col("new")).select("A", "B").rows())
    assert len(set(fresh[picked].rows())) == len(picked)


@SETTINGS
@LOOKUPS
@given(frame(("A", "B"), 12), frame(("A", "B", "C"), 40))
def test_positions_in_find_the_equal_row(sorted_from: int | None, rows: pl.DataFrame, large: pl.DataFrame) -> None:
    with lookups(sorted_from):
        positions = code_arrays.positions_in(CodeRelation.from_frame(rows), CodeRelation.from_frame(large), ["A", "B"])
    keys = large.select("A", "B").rows()
    for row, position in zip(rows.rows(), positions.tolist(), strict=True):
        if position < 0:
            assert row not in keys
        else:
            assert keys[position] == row


@SETTINGS
@given(frame(("A", "B"), 20), st.lists(st.tuples(st.integers(0, 5), frame(("B", "A"), 10)), max_size=8))
def test_a_grown_relation_is_the_rows_appended_and_leaves_the_others_unchanged(
    first: pl.DataFrame, growths: list[tuple[int, pl.DataFrame]]
) -> None:
    # Each growth appends to one of the relations made so far: the last in its line (in place) or an
    # earlier one (a branch: copied), and every relation keeps its rows.
    relations = [(CodeRelation.from_frame(first), first)]
    for which, rows in growths:
        base, frame_of_base = relations[which % len(relations)]
        grown = base.grown(CodeRelation.from_frame(rows))
        relations.append((grown, pl.concat([frame_of_base, rows.select(frame_of_base.columns)])))
        for relation, expected in relations:
            assert relation.to_frame().rows() == expected.rows()
            assert relation.height == expected.height
            for column in expected.columns:
                top = expected.get_column(column).max()
                assert relation.radix(column) == (0 if top is None else int(top) + 1)  # type: ignore[arg-type]


@SETTINGS
@given(st.lists(st.integers(0, 5) | st.integers(0, 2**64 - 1), max_size=60))
def test_stable_order_and_first_positions_are_numpys(keys: list[int]) -> None:
    # Few values so that keys repeat; sometimes a huge one, past where positions fold in below the keys.
    array = np.array(keys, dtype=np.uint64)
    assert code_arrays.stable_order(array).tolist() == np.argsort(array, kind="stable").tolist()
    assert code_arrays.first_positions(array).tolist() == np.unique(array, return_index=True)[1].tolist()
    order, starts = code_arrays.distinct_runs(array)
    counted = np.diff(np.append(starts, order.size))
    assert counted.tolist() == np.unique(array, return_counts=True)[1].tolist()
