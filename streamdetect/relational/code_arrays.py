"""Natural joins, projections and caps of relations of dictionary codes, in numpy, for small inputs.

A stream update's elimination runs (:mod:`~streamdetect.relational.linked_values`) join a few rows (a
micro-batch's delta, or the rows of a few identifier values) with stored projections of tens of
thousands of rows, and dedup and cap what comes out. Polars runs each such step as a query with a fixed
cost of 100-200 us on this machine, and its hash join reads every row of the large side: a step of 3
rows against 42,000 took 0.3-0.5 ms, and a micro-batch runs hundreds. The rows of a stored relation are
dictionary codes (``UInt32``, no nulls: null rows never enter a channel), so a join can find the large
side's candidate rows with one flag lookup per row (a flag per code of the small side: a gather, no
hashing), then join the few left by sorting, all in numpy, in tens of microseconds.

Same results as polars' natural join, ``unique`` and group heads (as sets; row order is not kept), for
any sizes; the gain is the fixed cost, so :func:`linked_values` uses it for runs that start small.
Cost: a join is O(|large| + (|small| + |candidates|) log + |output|), a dedup or a cap O(n log n).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

Codes = npt.NDArray[np.uint32]
Positions = npt.NDArray[np.intp]

#: The polars type of dictionary codes (streamdetect.relational.dictionary.CODE).
_CODE = pl.UInt32
#: A cut stops once the large side has at most this many rows per row of the small side.
_FEW = 8
#: The column of positions a cut carries (a name no attribute can have).
_POSITION = "\0position"


class CodeRelation:
    """A set (or bag) of rows of dictionary codes, column by column: immutable once built."""

    __slots__ = ("__weakref__", "_buffers", "_radix", "_used", "arrays", "columns", "height")

    def __init__(self, columns: Sequence[str], arrays: Sequence[Codes], height: int) -> None:
        self.columns = list(columns)
        self.arrays = list(arrays)
        self.height = height
        self._radix: dict[str, int] = {}
        # Buffers with room to grow that ``arrays`` are the first ``height`` entries of (:meth:`grown`), and
        # how many entries of them are written (shared by the relations grown from the same buffers).
        self._buffers: list[Codes] | None = None
        self._used: list[int] = [height]

    def grown(self, rows: CodeRelation) -> CodeRelation:
        """This relation with ``rows`` (the same columns, in any order) appended, as a new relation; this one
        is unchanged. O(len(rows)) amortised: the arrays are views of buffers with room to grow, and the
        last relation grown from them appends in place (an earlier one copies into new buffers), where a
        stored projection grown by a batch was copied out of polars whole (at 450,000 rows, 2-3 ms a batch)."""
        if not rows.height:
            return self
        height, more = self.height, rows.height
        buffers = self._buffers
        if buffers is None or self._used[0] != height or buffers[0].size < height + more:
            room = height + more + max((height + more) // 8, 16 * more)
            buffers = [np.empty(room, dtype=array.dtype) for array in self.arrays]
            for buffer, array in zip(buffers, self.arrays, strict=True):
                buffer[:height] = array
            used = [height]
        else:
            used = self._used
        for buffer, column in zip(buffers, self.columns, strict=True):
            buffer[height : height + more] = rows.column(column)
        used[0] = height + more
        relation = CodeRelation(self.columns, [buffer[: height + more] for buffer in buffers], height + more)
        relation._buffers, relation._used = buffers, used
        relation._radix = {name: max(radix, rows.radix(name)) for name, radix in self._radix.items()}
        return relation

    def radix(self, name: str) -> int:
        """One more than the largest code of a column (0 when empty): how many values it may hold.
        Computed once per relation (a stored projection's is read by many joins)."""
        radix = self._radix.get(name)
        if radix is None:
            array = self.column(name)
            radix = int(array.max()) + 1 if array.size else 0
            self._radix[name] = radix
        return radix

    @classmethod
    def from_frame(cls, frame: pl.DataFrame) -> CodeRelation:
        """The relation of a frame of codes (every column ``UInt32`` without nulls: :func:`codes_only`)."""
        return cls(frame.columns, [frame.get_column(c).to_numpy() for c in frame.columns], frame.height)

    def to_frame(self) -> pl.DataFrame:
        """The relation as a polars frame of codes."""
        return pl.DataFrame([pl.Series(c, a, dtype=_CODE) for c, a in zip(self.columns, self.arrays, strict=True)])

    def is_empty(self) -> bool:
        return self.height == 0

    def column(self, name: str) -> Codes:
        return self.arrays[self.columns.index(name)]

    def take(self, rows: Positions) -> CodeRelation:
        """The rows at ``rows``, in that order."""
        return CodeRelation(self.columns, [array[rows] for array in self.arrays], len(rows))

    def select(self, columns: Sequence[str]) -> CodeRelation:
        """The columns ``columns`` (a bag: duplicates are kept)."""
        return CodeRelation(columns, [self.column(c) for c in columns], self.height)

    def n_unique(self, on: Sequence[str]) -> int:
        """The number of distinct values of ``on`` (:func:`count_distinct`)."""
        return count_distinct(self, on)


def indices(array: npt.NDArray[Any]) -> Positions:
    """``array`` (codes or positions, unsigned) as numpy's index type: a gather or scatter by ``uint32``
    indices takes numpy's slow path (2-3x the time by ``intp`` on 45,000 rows, measured), the conversion
    a tenth of it."""
    converted: Positions = array.astype(np.intp, copy=False)
    return converted


def codes_only(frame: pl.DataFrame, columns: Sequence[str] | None = None) -> bool:
    """Whether every column of ``frame`` (or those named) holds codes (``UInt32``) and no nulls: what this
    module takes."""
    # A series knows its null count: no query (a frame's null_count() is one, ~30 us, and this is asked
    # for every relation of every elimination run).
    chosen = frame.iter_columns() if columns is None else (frame.get_column(c) for c in columns)
    return all(column.dtype == _CODE and not column.null_count() for column in chosen)


def take_rows(frame: pl.DataFrame, rows: npt.NDArray[Any]) -> pl.DataFrame:
    """The rows of ``frame`` at positions ``rows`` (in that order): for a frame of codes, taken in numpy
    and made a frame again (some 35 us on a micro-batch's rows, where polars' gather or a filter by a
    new mask cost 90-100 us each, its query's fixed cost); polars' gather otherwise."""
    if not codes_only(frame):
        return frame[rows]
    return CodeRelation.from_frame(frame).take(indices(rows)).to_frame()


def row_keys(arrays: Sequence[Codes]) -> npt.NDArray[np.uint64]:
    """One integer per row, equal for two rows exactly when they are equal in every array: the codes in
    mixed radix (each column's radix one more than its largest code), O(n) while the radices' product
    fits in 64 bits; past that, what came before is ranked first (np.unique, O(n log n))."""
    if not arrays:
        return np.zeros(0, dtype=np.uint64)
    key = arrays[0].astype(np.uint64)
    if not key.size:
        return key
    span = int(key.max()) + 1  # the keys so far are below span
    for array in arrays[1:]:
        radix = int(array.max()) + 1
        if span * radix >= 1 << 64:
            key = np.unique(key, return_inverse=True)[1].astype(np.uint64).reshape(-1)
            span = int(key.max()) + 1
        key = key * np.uint64(radix) + array.astype(np.uint64)
        span *= radix
    return key


#: Distinct rows are counted with a flag per possible key up to this many keys (16 MB of flags)...
_FLAGGED_KEYS = 1 << 24
#: ... and this many per row (or 2^16 in all): past that, sorting the rows' keys reads less than the flags.
_FLAGS_PER_ROW = 16


def count_distinct(relation: CodeRelation, on: Sequence[str]) -> int:
    """The number of distinct values of ``on`` (at least one column). A flag per possible value, set for
    each row's, O(n + values), where a hash of every row costs polars 8-15 ms on one column of 450,000
    rows; by sorting the rows' keys, O(n log n), when the columns' radices allow more than
    :data:`_FLAGGED_KEYS` values or :data:`_FLAGS_PER_ROW` per row (a delta of 1,000 rows on two columns
    of 4,000 codes each read 16 MB of flags to count them: 2-3 ms, where sorting takes 20 us)."""
    if not relation.height:
        return 0
    span = 1
    for column in on:
        span *= max(relation.radix(column), 1)
    keys = row_keys([relation.column(c) for c in on])
    if span > min(_FLAGGED_KEYS, max(_FLAGS_PER_ROW * relation.height, 1 << 16)):
        return int(np.unique(keys).size)
    flags = np.zeros(span, dtype=np.bool_)
    flags[indices(keys)] = True
    return int(np.count_nonzero(flags))


def stable_order(keys: npt.NDArray[Any]) -> Positions:
    """``np.argsort(keys, kind="stable")`` for non-negative integer keys: equal keys in their order. One
    unstable sort of the keys with each one's position below them, when that fits in 64 bits: numpy's
    stable sort of 64-bit integers is a merge sort, 2.5-4x the time (20,000 keys: 1.3 ms against 0.35)."""
    size = keys.size
    if size < 2:
        return np.arange(size)
    if int(keys.max()) >= (1 << 64) // size - 1:
        return np.argsort(keys, kind="stable")
    return np.argsort(keys.astype(np.uint64) * np.uint64(size) + np.arange(size, dtype=np.uint64))


def run_starts(ordered: npt.NDArray[Any]) -> Positions:
    """Where each run of equal keys starts in the sorted (or grouped) ``ordered``."""
    if not ordered.size:
        return np.zeros(0, dtype=np.intp)
    return np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))


def run_ranks(ordered: npt.NDArray[Any]) -> Positions:
    """For the sorted (or grouped) ``ordered``, each entry's rank among its equals: 0, 1, ..."""
    index = np.arange(ordered.size)
    starts = np.ones(ordered.size, dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    ranked: Positions = index - np.maximum.accumulate(np.where(starts, index, 0))
    return ranked


def distinct_runs(keys: npt.NDArray[Any]) -> tuple[Positions, Positions]:
    """For non-negative integer keys, their :func:`stable_order` and where each distinct key's run starts
    in it: ``order[starts]`` is ``np.unique(keys, return_index=True)[1]``, the run lengths its counts."""
    if not keys.size:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    order = stable_order(keys)
    return order, run_starts(keys[order])


def first_positions(keys: npt.NDArray[Any]) -> Positions:
    """``np.unique(keys, return_index=True)[1]`` for non-negative integer keys: where each distinct key
    first occurs, by key (:func:`distinct_runs`)."""
    order, starts = distinct_runs(keys)
    return order[starts]


def unique(relation: CodeRelation) -> CodeRelation:
    """The distinct rows. O(n log n)."""
    if relation.height < 2:
        return relation
    first = first_positions(row_keys(relation.arrays))
    return relation if first.size == relation.height else relation.take(first)


def _heads(group: npt.NDArray[np.uint64], k: int) -> Positions:
    """The positions, ascending, of the first ``k`` entries of each value of ``group`` (earliest first).
    O(n log n)."""
    order = stable_order(group)  # within a value, by position
    return np.sort(order[run_ranks(group[order]) < k])


def head_positions(relation: CodeRelation, keys: Sequence[str], k: int) -> Positions:
    """The positions, ascending, of the first ``k`` rows of each value of ``keys`` (the first ``k`` rows
    without keys). O(n log n)."""
    if relation.height <= k:
        return np.arange(relation.height)
    if not keys:
        return np.arange(k)
    return _heads(row_keys([relation.column(c) for c in keys]), k)


def head_per_key(relation: CodeRelation, keys: Sequence[str], k: int) -> CodeRelation:
    """At most ``k`` rows per value of ``keys`` (``k`` overall without keys), the first of each
    (:func:`head_positions`). O(n log n)."""
    kept = head_positions(relation, keys, k)
    return relation if kept.size == relation.height else relation.take(kept)


def fresh_heads(earlier: CodeRelation, fresh: CodeRelation, keys: Sequence[str], k: int) -> Positions:
    """The positions of ``fresh``'s rows that a set capped at ``k`` rows per value of ``keys`` takes after
    ``earlier`` (distinct rows, at most k per key, which keep their places): a fresh row equal to an
    earlier one, or to a fresh one before it, is not taken again, and a key takes fresh rows in their
    order until it holds k. Both relations have the same columns. O(n log n)."""
    size = earlier.height
    arrays = [np.concatenate((earlier.column(c), fresh.column(c))) for c in earlier.columns]
    # Each distinct row at its first occurrence, in order (earlier rows first).
    first = first_positions(row_keys(arrays))
    first.sort()
    group = row_keys([arrays[earlier.columns.index(c)][first] for c in keys])
    taken = first[_heads(group if keys else np.zeros(first.size, dtype=np.uint64), k)]
    return taken[taken >= size] - size


def rows_with_values(large: CodeRelation, small: CodeRelation, on: Sequence[str]) -> CodeRelation:
    """A subset of ``large``'s rows holding every row that joins ``small`` on ``on``: those whose code in
    a key column occurs in ``small`` (a flag per code of ``small``, read for every row left: one gather;
    codes past the largest read a false flag), column by column until few are left. The columns go by
    the share of their codes ``small`` shows, least first (two birthdays of 20,000 before twenty card
    types of ten). O(|large|) per column used (its radix is counted once per relation); the rows are
    taken once, at the end (the columns read on the way only at the positions left)."""
    flags = {}
    for column in on:
        values = small.column(column)
        # A flag per code the large side may hold (its radix): codes of the small side past it match nothing.
        shown = flags[column] = np.zeros(large.radix(column), dtype=np.bool_)
        shown[indices(values[values < shown.size])] = True
    columns = list(on)
    if len(on) > 1:
        share = {c: np.count_nonzero(flags[c]) / max(flags[c].size, 1) for c in on}
        columns.sort(key=share.__getitem__)
    rows: Positions | None = None
    for column in columns:
        codes = large.column(column) if rows is None else large.column(column)[rows]
        kept = np.flatnonzero(flags[column][indices(codes)])
        rows = kept if rows is None else rows[kept]
        if rows.size <= _FEW * max(small.height, 1):
            break
    assert rows is not None
    return large if rows.size == large.height else large.take(rows)


def shown(rows: CodeRelation, large: CodeRelation, on: Sequence[str]) -> npt.NDArray[np.bool_]:
    """Per row of ``rows``, whether ``large`` has a row equal to it on ``on`` (a semi join's mask).
    O(|large| + m log m), m the rows left after the cut (:func:`positions_in`)."""
    return positions_in(rows, large, on) >= 0


def positions_in(rows: CodeRelation, large: CodeRelation, on: Sequence[str]) -> npt.NDArray[np.int64]:
    """Per row of ``rows``, the position in ``large`` of a row equal to it on ``on`` (the last such when
    several), or -1. The large side cut first (:func:`rows_with_values`, positions carried along), then
    the packed keys of what is left sorted and searched. O(|large| + m log m), m the rows left."""
    if not rows.height:
        return np.zeros(0, dtype=np.int64)
    numbered = CodeRelation(
        [*large.columns, _POSITION], [*large.arrays, np.arange(large.height, dtype=np.uint32)], large.height
    )
    numbered._radix = large._radix  # the large side's radices, counted once
    cut = rows_with_values(numbered, rows, on)
    keys = row_keys([np.concatenate((rows.column(c), cut.column(c))) for c in on])
    wanted, present = keys[: rows.height], keys[rows.height :]
    if not present.size:
        return np.full(rows.height, -1, dtype=np.int64)
    order = np.argsort(present)
    low, counts = matching_runs(present[order], wanted)
    # The last of each run: numpy's argsort orders equal keys as it likes, so "last" is one of them.
    positions = cut.column(_POSITION)[order[np.maximum(low + counts - 1, 0)]]
    return np.where(counts > 0, positions.astype(np.int64), -1)


#: From this many keys looked up, they are sorted first (:func:`matching_runs`).
_SORTED_LOOKUPS = 64


def matching_runs(
    ordered: npt.NDArray[np.uint64], wanted: npt.NDArray[np.uint64]
) -> tuple[Positions, npt.NDArray[np.intp]]:
    """Per key of ``wanted``, where its run of equal keys in the sorted ``ordered`` starts and how long it is
    (0 when absent). Two binary searches per key when they are few; past :data:`_SORTED_LOOKUPS`, one search
    among the distinct keys of ``ordered``, the keys looked up in sorted order: numpy's search starts from
    the last one's place then, half the time of searching in the keys' order (1,500 keys in 3,000: 108
    against 217 us)."""
    if wanted.size < _SORTED_LOOKUPS or not ordered.size:
        low = np.searchsorted(ordered, wanted, "left")
        return low, np.searchsorted(ordered, wanted, "right") - low
    starts = run_starts(ordered)
    distinct = ordered[starts]
    lengths = np.diff(np.append(starts, ordered.size))
    sequence = np.argsort(wanted)
    at = np.empty(wanted.size, dtype=np.intp)
    at[sequence] = np.searchsorted(distinct, wanted[sequence])
    np.minimum(at, distinct.size - 1, out=at)
    return starts[at], np.where(distinct[at] == wanted, lengths[at], 0)


def join(left: CodeRelation, right: CodeRelation, on: Sequence[str]) -> CodeRelation:
    """The natural join on ``on`` (a cross product without): ``left``'s columns, then ``right``'s others.
    The larger side is first cut to rows whose key codes the smaller side shows (:func:`rows_with_values`),
    then the join is by sorting. O(|larger| + m log m + output), m the rows left."""
    extra = [c for c in right.columns if c not in left.columns]
    if not on:
        left_rows = np.repeat(np.arange(left.height), right.height)
        right_rows = np.tile(np.arange(right.height), left.height)
    else:
        if left.height > right.height:
            left = rows_with_values(left, right, on)
        elif right.height > left.height:
            right = rows_with_values(right, left, on)
        keys = row_keys([np.concatenate((left.column(c), right.column(c))) for c in on])
        left_keys, right_keys = keys[: left.height], keys[left.height :]
        order = np.argsort(right_keys)
        low, counts = matching_runs(right_keys[order], left_keys)
        total = int(counts.sum())
        left_rows = np.repeat(np.arange(left.height), counts)
        # Each left row's run of matches in ``ordered``: its start, plus the position within the run.
        within = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        right_rows = order[np.repeat(low, counts) + within]
    return CodeRelation(
        [*left.columns, *extra],
        [*(a[left_rows] for a in left.arrays), *(right.column(c)[right_rows] for c in extra)],
        len(left_rows),
    )


def join_all(relations: Sequence[CodeRelation]) -> CodeRelation:
    """The natural join of ``relations``: smallest first, then one sharing columns with those before it
    where one does (cross products last). Stops early once empty."""
    pending = sorted(relations, key=lambda relation: relation.height)
    joined = pending.pop(0)
    while pending and joined.height:
        present = set(joined.columns)
        linked = [i for i, relation in enumerate(pending) if set(relation.columns) & present]
        relation = pending.pop(linked[0] if linked else 0)
        joined = join(joined, relation, [c for c in relation.columns if c in present])
    if pending:  # empty already: the columns of the rest, no rows
        extra = [c for r in pending for c in r.columns if c not in joined.columns]
        columns = list(dict.fromkeys([*joined.columns, *extra]))
        return CodeRelation(columns, [np.zeros(0, dtype=np.uint32) for _ in columns], 0)
    return joined
