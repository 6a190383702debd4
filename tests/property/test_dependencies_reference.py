"""Functional, multivalued and k-multiset dependencies against their definitions (Huang et al. 2014,
section 4), by brute force over random small relations."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from streamdetect.relational.dependencies import functional, k_multiset, multivalued

COLUMNS = ("X", "Y", "Z", "W")
relations = st.lists(st.tuples(*(st.sampled_from([0, 1, 2, None]) for _ in COLUMNS)), min_size=0, max_size=25)


def _frame(rows: list[tuple[Any, ...]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=dict.fromkeys(COLUMNS, pl.Int64), orient="row")


@settings(max_examples=300, deadline=None)
@given(relations, st.integers(2, 4))
def test_dependencies_match_their_definitions(rows: list[tuple[Any, ...]], k: int) -> None:
    frame = _frame(rows)
    # X -> Y: each X-value with at most one Y-value.
    ys: dict[Any, set[Any]] = defaultdict(set)
    for x, y, *_ in rows:
        ys[x].add(y)
    assert functional(frame, ["X"], ["Y"]).holds == all(len(v) <= 1 for v in ys.values())
    # X ->> Y (Z = {Z, W}): for every xz that appears, Y(xz) = Y(x).
    y_of_x: dict[Any, set[Any]] = defaultdict(set)
    y_of_xz: dict[tuple[Any, ...], set[Any]] = defaultdict(set)
    for x, y, z, w in rows:
        y_of_x[x].add(y)
        y_of_xz[(x, z, w)].add(y)
    expected = all(ys_xz == y_of_x[xz[0]] for xz, ys_xz in y_of_xz.items())
    assert multivalued(frame, ["X"], ["Y"]).holds == expected
    # X ->k Y (Definition 7): each Y-value with a given X-value appears at least k times.
    pairs = Counter((x, y) for x, y, *_ in rows)
    verdict = k_multiset(frame, ["X"], ["Y"], k)
    assert verdict.holds == all(n >= k for n in pairs.values())
    assert verdict.broken == sum(1 for n in pairs.values() if n < k)
