"""Whether data dependencies hold in a relation: functional (X -> Y), multivalued (X ->> Y) and
k-multiset (X ->k Y, Huang et al. 2014, Definition 7).

Each check groups the rows by X once (polars) and reports the X-values (for a K-MSD, the (X, Y)-values)
that break it: how many, and the first few. Null is a value like any other. Pure: frames in, answers out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

#: Breaking values kept as examples.
EXAMPLES = 3


@dataclass(frozen=True)
class Verdict:
    """One dependency: whether it holds, how many groups break it, and a few of them (attribute -> value)."""

    dependency: str
    holds: bool
    broken: int
    examples: tuple[dict[str, Any], ...] = ()


def functional(frame: pl.DataFrame, lhs: Sequence[str], rhs: Sequence[str]) -> Verdict:
    """X -> Y: every X-value has one Y-value. O(rows) (a group-by)."""
    grouped = frame.group_by(list(lhs)).agg(pl.struct(list(rhs)).n_unique().alias("_values"))
    broken = grouped.filter(pl.col("_values") > 1).sort(list(lhs), nulls_last=True)
    return _verdict(f"{', '.join(lhs)} -> {', '.join(rhs)}", broken, list(lhs))


def multivalued(frame: pl.DataFrame, lhs: Sequence[str], rhs: Sequence[str]) -> Verdict:
    """X ->> Y over the relation's attributes U (Z = U - X - Y): for every X-value x, the Y-values
    with x do not depend on the Z-value, i.e. |Y(x)| * |Z(x)| = |YZ(x)| over distinct rows (set
    semantics, as the definition's Y_R(xz) = Y_R(x)). O(rows) (group-bys)."""
    x, y = list(lhs), [a for a in rhs if a not in lhs]
    z = [a for a in frame.columns if a not in x and a not in y]
    if not y or not z:  # trivial: X ->> Y holds when Y is within X or X and Y cover U
        return Verdict(f"{', '.join(lhs)} ->> {', '.join(rhs)}", True, 0)
    distinct = frame.unique()
    counts = distinct.group_by(x).agg(
        pl.struct(y).n_unique().alias("_y"), pl.struct(z).n_unique().alias("_z"), pl.len().alias("_yz")
    )
    broken = counts.filter(pl.col("_y") * pl.col("_z") != pl.col("_yz")).sort(x, nulls_last=True)
    return _verdict(f"{', '.join(lhs)} ->> {', '.join(rhs)}", broken, x)


def k_multiset(frame: pl.DataFrame, lhs: Sequence[str], rhs: Sequence[str], k: int) -> Verdict:
    """X ->k Y (Definition 7): for every X-value, each Y-value with it appears at least k times, i.e.
    every (X, Y)-value counts at least k rows (Theorem 2: then T[X, Y] is k-anonymous). O(rows)."""
    both = list(dict.fromkeys([*lhs, *rhs]))
    counts = frame.group_by(both).agg(pl.len().alias("_count"))
    broken = counts.filter(pl.col("_count") < k).sort(both, nulls_last=True)
    return _verdict(f"{', '.join(lhs)} ->{k} {', '.join(rhs)}", broken, both)


def _verdict(name: str, broken: pl.DataFrame, columns: list[str]) -> Verdict:
    examples = tuple(broken.head(EXAMPLES).select(columns).to_dicts())
    return Verdict(name, broken.height == 0, broken.height, examples)
