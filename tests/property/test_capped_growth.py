"""A capped relation carried forward as its frame grows is a capped form of the grown frame: at most k
rows per key, all of a key's rows when it has fewer than k, every row one of the frame's. A kept
projection grown by batches is the projection of every row."""

from __future__ import annotations

from collections import Counter
from typing import Any
from unittest.mock import patch

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from streamdetect.checks.k_anonymity.kept_relations import KeptRelations, projected
from streamdetect.checks.seen_rows import SeenRows
from streamdetect.relational import linked_values
from streamdetect.relational.linked_values import KeptCaps, cap_grown, cap_per_key

SCHEMA = {"A": pl.UInt32, "B": pl.UInt32, "T": pl.UInt32}


@st.composite
def growth(draw: st.DrawFn) -> tuple[pl.DataFrame, list[pl.DataFrame], list[str], int]:
    """Distinct rows over few values (keys repeat), split into a first frame and appended batches."""
    # The target anywhere among the columns: a capped form keeps its frame's order or puts the keys first.
    columns = draw(st.sampled_from([["A", "T"], ["A", "B", "T"], ["T"], ["T", "A"], ["A", "T", "B"]]))
    cell = st.integers(0, 3)
    rows = draw(st.lists(st.tuples(*[cell for _ in columns]), unique=True, max_size=40))
    cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=4)))
    parts = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True)]
    frames = [pl.DataFrame(part, schema={c: SCHEMA[c] for c in columns}, orient="row") for part in parts]
    return frames[0], frames[1:], columns, draw(st.integers(1, 4))


def _assert_capped(capped: pl.DataFrame, frame: pl.DataFrame, target: str, k: int) -> None:
    keys = [c for c in frame.columns if c != target]
    rows = set(frame.rows())
    assert sorted(capped.columns) == sorted(frame.columns)
    capped = capped.select(frame.columns)
    assert capped.height == capped.unique().height  # distinct
    assert set(capped.rows()) <= rows
    have = Counter(tuple(row[i] for i, c in enumerate(frame.columns) if c in keys) for row in capped.rows())
    total = Counter(tuple(row[i] for i, c in enumerate(frame.columns) if c in keys) for row in rows)
    for key, count in total.items():
        assert have[key] == min(k, count), (key, have[key], count)


@settings(max_examples=300, deadline=None)
@given(growth(), st.lists(st.booleans(), min_size=6, max_size=6))
def test_a_cap_carried_through_appends_caps_the_grown_frame(
    case: tuple[pl.DataFrame, list[pl.DataFrame], list[str], int], in_numpy: list[bool]
) -> None:
    """Each cap made or carried in numpy (a batch's few rows of codes) or by polars' queries (more rows),
    in any mix: the first cap by either, then each growth by either."""
    first, appended, columns, k = case
    keys = [c for c in columns if c != "T"]
    frame = first
    with patch.object(linked_values, "CODE_ARRAYS_ROWS", linked_values.CODE_ARRAYS_ROWS if in_numpy[0] else -1):
        capped = linked_values._cap_holder(first, "T", k) if in_numpy[-1] else cap_per_key(first, keys, k)
    for fresh, numpy in zip(appended, in_numpy[1:], strict=False):
        frame = pl.concat([frame, fresh])
        with patch.object(linked_values, "CODE_ARRAYS_ROWS", linked_values.CODE_ARRAYS_ROWS if numpy else -1):
            capped = cap_grown(capped, fresh, "T", k)
        _assert_capped(capped, frame, "T", k)


def test_kept_caps_follow_a_grown_frame() -> None:
    kept = KeptCaps()
    old = pl.DataFrame({"A": [0, 0, 1], "T": [1, 2, 1]}, schema={"A": pl.UInt32, "T": pl.UInt32})
    kept.put(old, "T", 2, cap_per_key(old, ["A"], 2))
    fresh = pl.DataFrame({"A": [0, 1, 2], "T": [3, 2, 1]}, schema={"A": pl.UInt32, "T": pl.UInt32})
    new = kept.grown(old, fresh)
    assert new.equals(pl.concat([old, fresh]))
    # Grown again before anyone asked: both batches of rows are carried.
    more = pl.DataFrame({"A": [2, 3], "T": [2, 1]}, schema={"A": pl.UInt32, "T": pl.UInt32})
    newest = kept.grown(new, more)
    carried = kept.get(newest, "T", 2)
    assert carried is not None
    _assert_capped(carried, newest, "T", 2)
    # A's value 0 had its two values already: the fresh row of it is left out.
    assert (0, 3) not in set(carried.rows())
    assert kept.get(newest, "T", 3) is None  # only the caps that were kept are carried
    assert kept.get(newest, "T", 2) is carried  # carried once, then kept


@settings(max_examples=200, deadline=None)
@given(growth(), st.booleans())
def test_a_frame_grown_from_its_codes_is_the_rows_appended_and_shares_their_memory(
    case: tuple[pl.DataFrame, list[pl.DataFrame], list[str], int], coded: bool
) -> None:
    """A frame grown by batches (``KeptCaps.grown``) is the frames concatenated, the frames before unchanged;
    once its codes were asked for (``coded``), every frame grown after is a view of its grown codes (one
    copy of the rows, not two)."""
    first, appended, _, _ = case
    kept = KeptCaps()
    frame, expected, before = first, first, []
    if coded:
        kept.codes(first)
    for fresh in appended:
        before.append((frame, frame.clone()))
        frame = kept.grown(frame, fresh.select(reversed(fresh.columns)))  # columns in any order
        expected = pl.concat([expected, fresh])
        assert frame.equals(expected)
        if coded and fresh.height:
            relation = kept.codes(frame)
            for column in frame.columns:
                assert np.shares_memory(frame.get_column(column).to_numpy(), relation.column(column))
    for then, copy in before:
        assert then.equals(copy)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(0, 3) | st.none(), st.integers(0, 3), st.integers(0, 2)), max_size=40),
    cuts=st.lists(st.integers(0, 40), max_size=5),
)
def test_a_kept_projection_grown_by_batches_is_the_projection_of_every_row(
    rows: list[tuple[int | None, int, int]], cuts: list[int]
) -> None:
    """A stored view's projection kept between batches (no positions: a set) and grown by each batch holds
    the distinct projections of every row, nulls left out, each once; the view's new projections
    (``novel``) are those it did not hold before the batch."""
    seen, kept = SeenRows(), KeptRelations()
    on = ["A", "B"]
    bounds = sorted(min(cut, len(rows)) for cut in cuts)
    holding: set[tuple[Any, ...]] = set()
    for start, end in zip([0, *bounds], [*bounds, len(rows)], strict=True):
        frame = pl.DataFrame(rows[start:end], schema={"A": pl.Int64, "B": pl.Int64, "C": pl.Int64}, orient="row")
        new, positions = seen.add("v", frame, ["A", "B", "C"])
        grown = kept.relation(seen, "v", on, False)
        expected = set(projected(seen.rows["v"], on, None).rows())
        assert grown.height == len(expected)
        assert set(grown.rows()) == expected
        assert set(kept.novel(seen, "v", (on, ()), new, positions).rows()) == expected - holding
        holding = expected
