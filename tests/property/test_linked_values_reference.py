"""Capped linked values against the natural join they stand for, brute force.

For relations whose join holds a source E and a target T, ``linked_values`` gives per E value its T values
when fewer than k, else k of them. The strategy draws joins where a large relation without T meets two or
more small ones holding it (the elimination joins the holders first and caps them before the fan-out), and
joins without that shape.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from streamdetect.relational.linked_values import linked_values

ATTRIBUTES = ("E", "T", "X", "Y")


@st.composite
def joins(draw: st.DrawFn) -> tuple[dict[str, pl.DataFrame], int]:
    def relation(attributes: tuple[str, ...], rows: int) -> pl.DataFrame:
        drawn = draw(st.lists(st.tuples(*(st.integers(0, 3) for _ in attributes)), min_size=1, max_size=rows))
        return pl.DataFrame(drawn, schema=dict.fromkeys(attributes, pl.Int64), orient="row").unique()

    relations = {"source": relation(("E", "X", "Y"), 40)}  # the larger side, without T
    holders = draw(
        st.sampled_from(
            [(("T", "X", "Y"), ("T", "X")), (("T", "X"), ("T", "X", "Y")), (("T", "X"), ("T", "Y")), (("T", "Y"),)]
        )
    )
    for i, attributes in enumerate(holders):
        relations[f"holder{i}"] = relation(attributes, 6)
    if draw(st.booleans()):
        relations["other"] = relation(("X", "Y"), 10)
    return relations, draw(st.sampled_from([1, 2, 3]))


def _reference(relations: dict[str, pl.DataFrame]) -> dict[Any, set[Any]]:
    def natural(left: pl.DataFrame, right: pl.DataFrame) -> pl.DataFrame:
        on = [c for c in left.columns if c in right.columns]
        return left.join(right, on=on) if on else left.join(right, how="cross")

    joined = reduce(natural, relations.values())
    linked: dict[Any, set[Any]] = {}
    for source, target in joined.select("E", "T").unique().iter_rows():
        linked.setdefault(source, set()).add(target)
    return linked


@settings(max_examples=300, deadline=None)
@given(joins())
def test_linked_values_are_the_joins_capped(case: tuple[dict[str, pl.DataFrame], int]) -> None:
    relations, k = case
    expected = _reference(relations)
    found: dict[Any, set[Any]] = {}
    for source, target in linked_values(relations, "E", "T", k).iter_rows():
        found.setdefault(source, set()).add(target)
    assert found.keys() == expected.keys()
    for source, values in found.items():
        if len(expected[source]) < k:
            assert values == expected[source]
        else:
            assert len(values) == k
            assert values <= expected[source]
