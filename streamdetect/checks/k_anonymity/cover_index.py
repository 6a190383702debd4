"""The minimal association covers of the join-based method, kept between batches.

A projection fact p of a holder view *gives* the cover Π_{ID,P} w(p) when its capped identifier set has one
value and its capped sensitive set fewer than k (:mod:`.association_covers`). The minimal covers are the
covers no smaller cover of the same identifier value contains. Recomputing them groups every capped set
whole; under arrivals only the projection facts a batch's joins reached can change what they give, so the
index keeps, per (holder, identifier, sensitive), what each projection fact gives (arrays by position, read
from what the facts' sets hold: :mod:`.held_values`), per cover how many projection facts of each holder
give it, and per identifier value its covers: a batch costs array lookups at the projection facts it
touched (its joins reached, or its withdrawals: :mod:`.withdrawals`), a count of those whose cover
changed, and the minimality of their values (at k = 2, where every cover has one value, of those covers
alone). A view's first rows, or a view emptied, rebuild it (the sets are computed again).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from streamdetect.checks.k_anonymity.held_values import HeldValues, Room, grown_in_room
from streamdetect.relational.code_arrays import distinct_runs, row_keys, run_ranks

#: (identifier attribute, sensitive attribute, identifier code, value codes)
CoverCodes = tuple[str, str, int, frozenset[int]]
#: (holder view, identifier attribute, sensitive attribute)
Giver = tuple[str, str, str]
#: Versions of the minimal covers, unique across indexes (a rebuilt index never repeats one).
_VERSIONS = itertools.count()


#: Per (holder, identifier, sensitive, target) set, what each of its projection facts holds.
Held = Callable[[tuple[str, str, str, str]], HeldValues]
#: The identifier code of a projection fact that gives no cover (codes are non-negative).
_NONE = -1
#: Versions of ``minimal`` whose changes an index keeps (:meth:`CoverIndex.moved_since`).
LOGGED_VERSIONS = 32


@dataclass
class Gifts:
    """Per projection fact of a giver's holder (by position), the cover it gives: the identifier value's
    code (:data:`_NONE` when it gives none) and a row of the sensitive values' codes, sorted, padded with
    :data:`_NONE` to k - 1."""

    ids: np.ndarray[Any, Any]
    values: np.ndarray[Any, Any]
    #: The buffers ``ids`` and ``values`` are the first entries of, with room to grow (:meth:`reach`).
    _room: Room | None = field(default=None, repr=False)

    @classmethod
    def empty(cls, k: int) -> Gifts:
        return cls(np.zeros(0, dtype=np.int64), np.zeros((0, k - 1), dtype=np.int64))

    def reach(self, height: int) -> None:
        """Make room for positions below ``height`` (new ones give nothing). Amortised O(positions added)
        (:func:`grown_in_room`), where padding copied every position's entries per giver and batch."""
        if height > len(self.ids):
            (ids, values), self._room = grown_in_room((self.ids, self.values), (_NONE, _NONE), height, self._room)
            assert ids is not None
            assert values is not None
            self.ids, self.values = ids, values


@dataclass
class CoverIndex:
    """What each projection fact gives, how often each cover is given per holder, the covers of each
    identifier value, and the minimal covers with the holders giving them."""

    k: int
    pf: str
    #: The (holder, identifier, sensitive) triples indexed, in the state's released views.
    givers: tuple[Giver, ...]
    gifts: dict[Giver, Gifts] = field(default_factory=dict)
    counts: dict[CoverCodes, dict[str, int]] = field(default_factory=dict)
    #: Per identifier value, the sensitive codes of its covers (above k = 2).
    covers: dict[tuple[str, str, int], set[frozenset[int]]] = field(default_factory=dict)
    minimal: dict[CoverCodes, frozenset[str]] = field(default_factory=dict)
    #: Per identifier value, its covers in ``minimal`` (above k = 2; at 2 every cover given is minimal).
    kept: dict[tuple[str, str, int], set[frozenset[int]]] = field(default_factory=dict)
    #: Changes whenever ``minimal`` does (a cover or its holders): equal versions, equal minimal covers.
    version: int = field(default_factory=lambda: next(_VERSIONS))
    #: Per (identifier, sensitive) pair, how many covers of it ``minimal`` holds.
    per_pair: dict[tuple[str, str], int] = field(default_factory=dict)
    #: The last versions' changes: (version before, version after, the covers that entered ``minimal``,
    #: left it or changed holders), oldest first, at most :data:`LOGGED_VERSIONS` (:meth:`moved_since`).
    log: list[tuple[int, int, set[CoverCodes]]] = field(default_factory=list, repr=False)
    #: One frozenset object per distinct row of sensitive codes (:meth:`_count`).
    _interned: dict[tuple[int, ...], frozenset[int]] = field(default_factory=dict, repr=False)

    @classmethod
    def build(
        cls,
        sets: Mapping[tuple[str, str, str, str], pl.DataFrame],
        givers: Sequence[Giver],
        k: int,
        pf: str,
        held: Held | None = None,
    ) -> CoverIndex:
        """The index of every projection fact of ``sets`` (keyed (holder, identifier, sensitive, target));
        ``held``: what the sets' projection facts hold, when kept beside them (made from the sets if not)."""
        index = cls(k, pf, tuple(givers))
        touched = set()
        for giver in givers:
            found = index._held(sets, giver, held)
            if found is None:
                continue
            positions = np.arange(max(len(found[0].counts), len(found[1].counts)), dtype=np.int64)
            gifts = index.gifts[giver] = Gifts.empty(k)
            gifts.reach(len(positions))
            given = index._given(*found, positions)
            gifts.ids[positions], gifts.values[positions] = given
            touched |= index._count(giver, *given, np.ones(len(positions), dtype=np.int64))
        index._minimise(touched)
        index.log.clear()  # a new index: no version before it to tell changes from
        return index

    def refresh(
        self,
        sets: Mapping[tuple[str, str, str, str], pl.DataFrame],
        touched: Mapping[Giver, np.ndarray[Any, Any]],
        held: Held | None = None,
    ) -> None:
        """Bring the index up to ``sets`` after a batch whose joins reached the projection facts
        ``touched`` (positions per giver; a superset of those whose sets grew): only the facts whose cover
        changed are counted again, by array lookups in what they hold (``held``, as for :meth:`build`)."""
        covers: set[CoverCodes] = set()
        for giver, reached in touched.items():
            found = self._held(sets, giver, held)
            if found is None:
                continue
            positions = np.unique(reached).astype(np.int64, copy=False)
            if not positions.size:
                continue
            gifts = self.gifts.get(giver)
            if gifts is None:
                gifts = self.gifts[giver] = Gifts.empty(self.k)
            gifts.reach(int(positions[-1]) + 1)
            ids, rows = self._given(*found, positions)
            changed = (gifts.ids[positions] != ids) | (gifts.values[positions] != rows).any(axis=1)
            if not changed.any():
                continue
            at = positions[changed]
            # What the facts gave taken away and what they give added, in one count (net per cover).
            signs = np.repeat(np.array([-1, 1], dtype=np.int64), len(at))
            both = np.concatenate([gifts.ids[at], ids[changed]]), np.concatenate([gifts.values[at], rows[changed]])
            covers |= self._count(giver, *both, signs)
            gifts.ids[at], gifts.values[at] = ids[changed], rows[changed]
        self._minimise(covers)

    def moved_since(self, version: int) -> set[CoverCodes] | None:
        """The covers whose entry in ``minimal`` (present, absent, holders) may differ from what it was at
        ``version``, an earlier version of this index; None when the log does not reach back to it (another
        index's version, or too long ago): then compare the mappings."""
        if version == self.version:
            return set()
        for at, (before, _, _) in enumerate(self.log):
            if before == version:
                return set().union(*(moved for _, _, moved in self.log[at:]))
        return None

    def pairs(self) -> frozenset[tuple[str, str]]:
        """The (identifier, sensitive) pairs some minimal cover is of."""
        return frozenset(pair for pair, count in self.per_pair.items() if count)

    def givers_of(self, codes: Mapping[tuple[str, str], Collection[int]]) -> dict[Giver, np.ndarray[Any, Any]]:
        """Per giver, the positions of the projection facts that give a cover of one of the identifier
        values ``codes`` (per (identifier, sensitive) pair)."""
        found = {}
        flags: dict[tuple[str, str], np.ndarray[Any, Any]] = {}
        for giver, gifts in self.gifts.items():
            pair = (giver[1], giver[2])
            wanted = codes.get(pair)
            if not wanted or not len(gifts.ids):
                continue
            if pair not in flags:
                # A flag per code (and one for _NONE, the last): one gather per giver, where np.isin sorted
                # both sides.
                chosen = np.fromiter(wanted, dtype=np.int64, count=len(wanted))
                flags[pair] = np.zeros(int(chosen.max()) + 2, dtype=bool)
                flags[pair][chosen] = True
            flagged = flags[pair]
            ids = np.minimum(gifts.ids, len(flagged) - 1)  # codes past the wanted ones read the last flag
            found[giver] = np.flatnonzero(flagged[ids])
        return found

    def _held(
        self, sets: Mapping[tuple[str, str, str, str], pl.DataFrame], giver: Giver, held: Held | None
    ) -> tuple[HeldValues, HeldValues, pl.DataFrame] | None:
        """What the giver's projection facts hold in their identifier and sensitive sets, and the sensitive
        set (None: no sets)."""
        holder, identifier, sensitive = giver
        keys = ((holder, identifier, sensitive, identifier), (holder, identifier, sensitive, sensitive))
        if any(key not in sets for key in keys):
            return None
        if held is not None:
            return held(keys[0]), held(keys[1]), sets[keys[1]]
        frames = [sets[key] for key in keys]
        height = max(
            (int(frame.get_column(self.pf).to_numpy().max()) + 1 for frame in frames if frame.height), default=0
        )
        first = HeldValues.of(frames[0], self.pf, identifier, 2, height)
        return first, HeldValues.of(frames[1], self.pf, sensitive, self.k, height), frames[1]

    def _given(
        self, ids: HeldValues, values: HeldValues, frame: pl.DataFrame, positions: np.ndarray[Any, Any]
    ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """What the projection facts at ``positions`` give: per fact, the identifier code (:data:`_NONE`:
        no cover, its set having no value or two, or its sensitive set none or k) and its sensitive codes
        sorted and padded."""
        k = self.k
        held = values.counts[positions]
        ok = (ids.counts[positions] == 1) & (held > 0) & (held < k)
        codes = np.where(ok, _column(ids, positions, 0), _NONE)
        if values.values is not None:
            rows = np.sort(values.values[positions, : k - 1], axis=1)
        else:  # k above the matrices' cap: the values from the set
            rows = _rows(frame, self.pf, positions, k - 1)
        rows[~ok] = _NONE
        return codes, rows

    def _count(
        self, giver: Giver, ids: np.ndarray[Any, Any], rows: np.ndarray[Any, Any], signs: np.ndarray[Any, Any]
    ) -> set[CoverCodes]:
        """Add (``signs`` 1) or take away (-1) the covers the facts give (identifier codes ``ids``, sensitive
        rows ``rows``; :data:`_NONE`: none), one net count per distinct cover; the covers whose counts
        changed."""
        holder, identifier, sensitive = giver
        moved: set[CoverCodes] = set()
        giving = ids != _NONE
        if not giving.any():
            return moved
        keys = np.column_stack([ids[giving], rows[giving]])
        # One integer per distinct row (codes shifted past _NONE), then a 1-D unique: np.unique over rows
        # sorts a structured view, several times slower.
        packed = row_keys([column + 1 for column in keys.T])
        order, starts = distinct_runs(packed)
        first = order[starts]
        inverse = np.empty(order.size, dtype=np.intp)
        inverse[order] = np.repeat(np.arange(starts.size), np.diff(np.append(starts, order.size)))
        net = np.bincount(inverse, weights=signs[giving], minlength=len(first)).astype(np.int64)
        changed = np.flatnonzero(net)
        counts, interned = self.counts, self._interned
        for key, count in zip(keys[first[changed]].tolist(), net[changed].tolist(), strict=True):
            # The sensitive codes as one frozenset object per distinct row (few: a row per value at k = 2).
            row = tuple(key[1:])
            codes = interned.get(row)
            if codes is None:
                codes = interned[row] = frozenset(c for c in row if c != _NONE)
            cover = (identifier, sensitive, key[0], codes)
            per_holder = counts.get(cover)
            if per_holder is None:
                per_holder = counts[cover] = {}
            left = per_holder.get(holder, 0) + count
            if left:
                per_holder[holder] = left
            else:
                del per_holder[holder]
                if not per_holder:
                    del counts[cover]
            moved.add(cover)
        return moved

    def _minimise(self, changed: Iterable[CoverCodes]) -> None:
        """The minimal covers again where covers' counts ``changed``: a cover no smaller one of the same
        identifier value contains. At k = 2 every cover has one value, so every cover given is minimal and
        only the changed ones are looked at; above, every cover of their identifier values."""
        moved: set[CoverCodes] = set()
        if self.k == 2:
            self._settle(changed, moved)
        else:
            self._minimise_values(changed, moved)
        if moved:
            before_version, self.version = self.version, next(_VERSIONS)
            self.log.append((before_version, self.version, moved))
            if len(self.log) > LOGGED_VERSIONS:
                del self.log[: len(self.log) - LOGGED_VERSIONS]

    def _settle(self, changed: Iterable[CoverCodes], moved: set[CoverCodes]) -> None:
        """:meth:`_minimise` at k = 2: each changed cover is minimal while some holder gives it."""
        counts, minimal, per_pair = self.counts, self.minimal, self.per_pair
        for cover in changed:
            per_holder = counts.get(cover)
            before = minimal.get(cover)
            if per_holder:
                holders = frozenset(per_holder)
                if before != holders:
                    minimal[cover] = holders
                    moved.add(cover)
                    if before is None:
                        pair = (cover[0], cover[1])
                        per_pair[pair] = per_pair.get(pair, 0) + 1
            elif before is not None:
                del minimal[cover]
                moved.add(cover)
                pair = (cover[0], cover[1])
                per_pair[pair] -= 1

    def _minimise_values(self, changed: Iterable[CoverCodes], moved: set[CoverCodes]) -> None:
        """:meth:`_minimise` above k = 2: the covers of each identifier value whose covers changed, again."""
        values: set[tuple[str, str, int]] = set()
        for cover in changed:
            value = (cover[0], cover[1], cover[2])
            if cover in self.counts:
                self.covers.setdefault(value, set()).add(cover[3])
            elif value in self.covers:
                self.covers[value].discard(cover[3])
            values.add(value)
        for value in values:
            identifier, sensitive, code = value
            before = {
                codes: self.minimal.pop((identifier, sensitive, code, codes)) for codes in self.kept.pop(value, ())
            }
            covers = self.covers.get(value)
            kept = _minimal(covers) if covers else set()
            for codes in kept:
                cover = (identifier, sensitive, code, codes)
                holders = self.minimal[cover] = frozenset(self.counts[cover])
                if before.get(codes) != holders:
                    moved.add(cover)
            moved.update((identifier, sensitive, code, codes) for codes in before.keys() - kept)
            if len(kept) != len(before):
                pair = (identifier, sensitive)
                self.per_pair[pair] = self.per_pair.get(pair, 0) + len(kept) - len(before)
            if kept:
                self.kept[value] = kept
            else:
                self.covers.pop(value, None)


def _minimal(covers: set[frozenset[int]]) -> set[frozenset[int]]:
    """The covers no other of them is a strict subset of. Those of the smallest size are minimal without a
    comparison (at k = 2 every cover has one value: all of them)."""
    smallest = min(len(codes) for codes in covers)
    return {codes for codes in covers if len(codes) == smallest or not any(other < codes for other in covers)}


def _column(held: HeldValues, positions: np.ndarray[Any, Any], column: int) -> np.ndarray[Any, Any]:
    """The ``column``-th value each fact at ``positions`` holds (:data:`_NONE` past its count)."""
    assert held.values is not None
    chosen: np.ndarray[Any, Any] = held.values[positions, column]
    return chosen


def _rows(frame: pl.DataFrame, pf: str, positions: np.ndarray[Any, Any], width: int) -> np.ndarray[Any, Any]:
    """Per fact at ``positions`` (ascending), its first ``width`` values in the set ``frame`` (pf, target),
    sorted, :data:`_NONE` for the slots it has no value for (first)."""
    target = next(column for column in frame.columns if column != pf)
    chosen = frame.filter(pl.col(pf).is_in(pl.Series(positions, dtype=frame.schema[pf])))
    facts = chosen.get_column(pf).to_numpy().astype(np.int64)
    codes = chosen.get_column(target).to_numpy().astype(np.int64)
    order = np.lexsort((codes, facts))
    facts, codes = facts[order], codes[order]
    rank = run_ranks(facts)
    room = rank < width
    rows = np.full((len(positions), width), _NONE, dtype=np.int64)
    rows[np.searchsorted(positions, facts[room]), rank[room]] = codes[room]
    return np.sort(rows, axis=1)
