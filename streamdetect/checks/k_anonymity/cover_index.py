"""The minimal association covers of the join-based method, kept between batches.

A projection fact p of a holder view *gives* the cover Π_{ID,P} w(p) when its capped identifier set has one
value and its capped sensitive set fewer than k (:mod:`.association_covers`). The minimal covers are the
covers no smaller cover of the same identifier value contains. Recomputing them groups every capped set
whole; under arrivals only the projection facts a batch's joins reached can change what they give, so the
index keeps, per (holder, identifier, sensitive), what each projection fact gives, per cover how many
projection facts of each holder give it, and per identifier value its covers: a batch costs the projection
facts it touched and the minimality of their values. A withdrawal, or a view's first rows, rebuild it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

#: (identifier attribute, sensitive attribute, identifier code, value codes)
CoverCodes = tuple[str, str, int, frozenset[int]]
#: (holder view, identifier attribute, sensitive attribute)
Giver = tuple[str, str, str]
_ID = "\0id"
_VALUES = "\0values"
_COUNT = "\0n"
#: Versions of the minimal covers, unique across indexes (a rebuilt index never repeats one).
_VERSIONS = itertools.count()


def _tally(given: pl.DataFrame) -> Iterable[tuple[int, frozenset[int], int]]:
    """(identifier code, value codes, how many projection facts give it) per distinct cover of ``given``."""
    for code, codes, count in given.group_by(_ID, _VALUES).len(_COUNT).iter_rows():
        yield code, frozenset(codes), count


@dataclass
class CoverIndex:
    """What each projection fact gives, how often each cover is given per holder, the covers of each
    identifier value, and the minimal covers with the holders giving them."""

    k: int
    pf: str
    #: The (holder, identifier, sensitive) triples indexed, in the state's released views.
    givers: tuple[Giver, ...]
    given: dict[Giver, pl.DataFrame] = field(default_factory=dict)
    counts: dict[CoverCodes, dict[str, int]] = field(default_factory=dict)
    covers: dict[tuple[str, str, int], set[frozenset[int]]] = field(default_factory=dict)
    minimal: dict[CoverCodes, frozenset[str]] = field(default_factory=dict)
    #: Per identifier value, its covers in ``minimal``.
    kept: dict[tuple[str, str, int], set[frozenset[int]]] = field(default_factory=dict)
    #: Changes whenever ``minimal`` does (a cover or its holders): equal versions, equal minimal covers.
    version: int = field(default_factory=lambda: next(_VERSIONS))
    #: Per giver, its ``given`` frame with the PF and identifier columns in numpy (while it is that frame).
    _arrays: dict[Giver, tuple[pl.DataFrame, Any, Any]] = field(default_factory=dict, repr=False)

    @classmethod
    def build(
        cls, sets: Mapping[tuple[str, str, str, str], pl.DataFrame], givers: Sequence[Giver], k: int, pf: str
    ) -> CoverIndex:
        """The index of every projection fact of ``sets`` (keyed (holder, identifier, sensitive, target))."""
        index = cls(k, pf, tuple(givers))
        touched = set()
        for giver in givers:
            frames = index._frames(sets, giver)
            if frames is None:
                continue
            given = index._given(frames, (giver[1], giver[2]), None)
            index.given[giver] = given
            touched |= index._count(giver, given, 1)
        index._minimise(touched)
        return index

    def refresh(
        self,
        sets: Mapping[tuple[str, str, str, str], pl.DataFrame],
        touched: Mapping[Giver, pl.Series],
        eligible: Callable[[Giver, pl.Series], pl.Series] | None = None,
    ) -> None:
        """Bring the index up to ``sets`` after a batch whose joins reached the projection facts
        ``touched`` (per giver; a superset of those whose sets grew). ``eligible(giver, pfs)``, when given,
        keeps those of ``pfs`` whose set sizes let them give a cover (one identifier value, fewer than k
        sensitive ones): only those are read from the sets, and only those that gave one are taken back."""
        values: set[tuple[str, str, int]] = set()
        for giver, reached in touched.items():
            frames = self._frames(sets, giver)
            if frames is None:
                continue
            pfs = reached.unique()
            before = self.given.get(giver)
            if before is not None:
                gone = before.join(pfs.to_frame(self.pf), on=self.pf, how="semi")
                if gone.height:
                    values |= self._count(giver, gone, -1)
                    before = before.join(gone.select(self.pf), on=self.pf, how="anti")
            candidates = eligible(giver, pfs) if eligible is not None else pfs
            now = self._given(frames, (giver[1], giver[2]), candidates.to_frame(self.pf)) if candidates.len() else None
            if now is not None and now.height:
                values |= self._count(giver, now, 1)
                before = now if before is None else pl.concat([before, now], rechunk=False)
            if before is not None:
                self.given[giver] = before
        self._minimise(values)

    def givers_of(self, codes: Mapping[tuple[str, str], Collection[int]]) -> dict[Giver, np.ndarray[Any, Any]]:
        """Per giver, the positions of the projection facts that give a cover of one of the identifier
        values ``codes`` (per (identifier, sensitive) pair)."""
        found = {}
        for giver, given in self.given.items():
            wanted = codes.get((giver[1], giver[2]))
            if wanted:
                arrays = self._arrays.get(giver)
                if arrays is None or arrays[0] is not given:
                    arrays = self._arrays[giver] = (
                        given,
                        given.get_column(self.pf).to_numpy(),
                        given.get_column(_ID).to_numpy(),
                    )
                _, positions, ids = arrays
                found[giver] = positions[np.isin(ids, np.fromiter(wanted, dtype=ids.dtype, count=len(wanted)))]
        return found

    def _given(
        self, frames: tuple[pl.DataFrame, pl.DataFrame], pair: tuple[str, str], only: pl.DataFrame | None
    ) -> pl.DataFrame:
        """Per projection fact (of ``only``, or all) that gives a cover: its identifier code and sorted value
        codes."""
        ids, values = frames
        identifier, sensitive = pair
        pf, k = self.pf, self.k
        if only is not None:
            ids = ids.join(only, on=pf, how="semi")
            values = values.join(only, on=pf, how="semi")
        single = (
            ids.group_by(pf)
            .agg(pl.col(identifier).first().alias(_ID), pl.len().alias(_COUNT))
            .filter(pl.col(_COUNT) == 1)
        )
        small = values.group_by(pf).agg(pl.col(sensitive).sort().alias(_VALUES)).filter(pl.col(_VALUES).list.len() < k)
        return single.join(small, on=pf).select(pf, _ID, _VALUES)

    def _frames(
        self, sets: Mapping[tuple[str, str, str, str], pl.DataFrame], giver: Giver
    ) -> tuple[pl.DataFrame, pl.DataFrame] | None:
        holder, identifier, sensitive = giver
        ids = sets.get((holder, identifier, sensitive, identifier))
        values = sets.get((holder, identifier, sensitive, sensitive))
        return None if ids is None or values is None else (ids, values)

    def _count(self, giver: Giver, given: pl.DataFrame, sign: int) -> set[tuple[str, str, int]]:
        """Add (``sign`` 1) or take away (-1) what ``given`` gives; the identifier values it concerns."""
        holder, identifier, sensitive = giver
        values = set()
        for code, codes, count in _tally(given):
            cover = (identifier, sensitive, code, codes)
            per_holder = self.counts.setdefault(cover, {})
            left = per_holder.get(holder, 0) + sign * count
            if left:
                per_holder[holder] = left
            else:
                per_holder.pop(holder, None)
            value = (identifier, sensitive, code)
            if per_holder:
                self.covers.setdefault(value, set()).add(codes)
            else:
                del self.counts[cover]
                self.covers[value].discard(codes)
            values.add(value)
        return values

    def _minimise(self, values: Iterable[tuple[str, str, int]]) -> None:
        """The minimal covers of ``values`` again (a cover no smaller one of the same value contains)."""
        changed = False
        for value in values:
            identifier, sensitive, code = value
            before = {
                codes: self.minimal.pop((identifier, sensitive, code, codes)) for codes in self.kept.pop(value, ())
            }
            covers = self.covers.get(value)
            if not covers:
                self.covers.pop(value, None)
                changed |= bool(before)
                continue
            kept = {codes for codes in covers if not any(other < codes for other in covers)}
            for codes in kept:
                cover = (identifier, sensitive, code, codes)
                holders = self.minimal[cover] = frozenset(self.counts[cover])
                changed |= before.get(codes) != holders
            changed |= len(kept) != len(before)
            self.kept[value] = kept
        if changed:
            self.version = next(_VERSIONS)
