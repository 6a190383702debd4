"""Capped linked values through a natural join, without materialising it.

For relations R_1..R_n, a *source* attribute E and a *target* attribute T, compute for every value e
of E in the join J = R_1 ⋈ ... ⋈ R_n the set L(e) = {t : (e, t) ∈ π_{E,T} J}, capped at k values:
when |L(e)| < k the set is exact, otherwise k of its values stand for "k or more". This is all the
count-equals-one query of Dou & Coulondre (section 3.4) and partial disclosure need.

Method: variable elimination over the join (the message passing of the design notes, section 2, in
the form that also handles cycles). Every attribute other than E and T is existentially quantified
away in turn: the relations holding it are joined and it is projected out. The order is greedy, the
next attribute being the one whose relations join smallest (estimated from distinct counts before
joining; the estimate only orders the work, never changes the result). A relation that is the only
one holding T is capped at k T values per value of its other attributes: a later join with a
relation without T only selects which of its rows take part, so the union of their T sets, capped,
still answers "fewer than k" exactly. On an acyclic channel this is the leaf-to-root pass of
Yannakakis' algorithm; on a cyclic one (BP's v1, v3, v4, v5) the capped T sets travel through the
cycle instead of a large bag being built (design notes: "materialise only the smallest bags").

Cost: the sum of the sizes of the joins performed, each of an attribute's relations; with capped T
sets on BP about linear in the input times k.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl


def cap_per_key(frame: pl.DataFrame, keys: list[str], k: int) -> pl.DataFrame:
    """Distinct rows of ``frame``, at most ``k`` per value of ``keys`` (k overall without keys). O(n)."""
    if not keys:
        return frame.unique().head(k)
    return frame.unique().group_by(keys, maintain_order=False).head(k)


def _join_all(frames: list[pl.DataFrame]) -> pl.DataFrame:
    ordered = sorted(frames, key=lambda frame: frame.height)
    joined = ordered[0]
    for frame in ordered[1:]:
        on = [column for column in joined.columns if column in frame.columns]
        joined = joined.join(frame, on=on) if on else joined.join(frame, how="cross")
    return joined


class _Elimination:
    """The factors of one elimination run, with the bookkeeping of which are original relations."""

    def __init__(self, relations: Mapping[str, pl.DataFrame], source: str, target: str, k: int) -> None:
        self.source, self.target, self.k = source, target, k
        self.factors: dict[str, pl.DataFrame] = dict(relations)
        self.created = 0
        # Factors never change until eliminated, and their names are unique: a cost stays valid.
        self.costs: dict[tuple[str, ...], float] = {}
        self.distinct: dict[tuple[str, ...], int] = {}
        for name in list(self.factors):
            self.factors[name] = self._capped(self.factors[name], name)

    def _capped(self, frame: pl.DataFrame, name: str) -> pl.DataFrame:
        """Cap the sole holder of T at k values per key: exact for "fewer than k" (module docstring)."""
        holders = [other for other, f in self.factors.items() if other != name and self.target in f.columns]
        if self.target in frame.columns and not holders:
            keys = [c for c in frame.columns if c != self.target]
            return frame.group_by(keys).head(self.k) if keys else frame.head(self.k)
        return frame

    def _cost(self, holders: list[str]) -> float:
        if len(holders) == 1:
            return 0.0
        key = tuple(holders)
        if key not in self.costs:
            self.costs[key] = self._measure(holders)
        return self.costs[key]

    def _distinct(self, name: str, on: tuple[str, ...]) -> int:
        key = (name, *on)
        if key not in self.distinct:
            frame = self.factors[name]
            self.distinct[key] = frame.height if set(on) == set(frame.columns) else frame.select(on).n_unique()
        return self.distinct[key]

    def _measure(self, holders: list[str]) -> float:
        """Estimated rows of joining ``holders``: the textbook |L|·|R| / max(ndv) per join, in order.

        Only the order of elimination depends on it, never the result; distinct counts are cached
        per factor, so a step costs one aggregate per new factor.
        """
        first, *others = sorted(holders, key=lambda name: self.factors[name].height)
        size = float(self.factors[first].height)
        columns = set(self.factors[first].columns)
        for position, name in enumerate(others):
            frame = self.factors[name]
            on = tuple(c for c in frame.columns if c in columns)
            left = self._distinct(first, on) if position == 0 else 1
            size = size * frame.height / max(left, self._distinct(name, on), 1)
            columns |= set(frame.columns)
        return size

    def step(self) -> bool:
        """Eliminate the cheapest attribute; False when only E and T remain."""
        variables = sorted(
            {column for frame in self.factors.values() for column in frame.columns} - {self.source, self.target}
        )
        if not variables:
            return False
        best: tuple[float, int, str] | None = None
        for variable in variables:
            holders = [name for name, frame in self.factors.items() if variable in frame.columns]
            candidate = (self._cost(holders), len(holders), variable)
            if best is None or candidate < best:
                best = candidate
        assert best is not None
        variable = best[2]
        holders = [name for name, frame in self.factors.items() if variable in frame.columns]
        joined = _join_all([self.factors.pop(name) for name in holders])
        rest = {column for frame in self.factors.values() for column in frame.columns}
        keep = [c for c in joined.columns if c != variable and (c in (self.source, self.target) or c in rest)]
        self.created += 1
        name = f"\0{self.created}"
        self.factors[name] = self._capped(joined.select(keep).unique(), name)
        return True

    def result(self) -> pl.DataFrame:
        joined = _join_all(list(self.factors.values()))
        return cap_per_key(joined.select(self.source, self.target), [self.source], self.k)


def linked_values(
    relations: Mapping[str, pl.DataFrame],
    source: str,
    target: str,
    k: int,
) -> pl.DataFrame:
    """Frame ``[source, target]``: for each source value in the join, up to ``k`` linked target values.

    ``relations`` must be sets (distinct rows) without nulls, over a connected schema that contains
    ``source`` and ``target``. Exact for "fewer than k or not", and the set itself when fewer than k.
    """
    if any(frame.is_empty() for frame in relations.values()):
        schema: dict[str, pl.DataType] = {}
        for frame in relations.values():
            schema.update(frame.schema)
        return pl.DataFrame(schema={source: schema[source], target: schema[target]})
    elimination = _Elimination(relations, source, target, k)
    while elimination.step():
        pass
    return elimination.result()
