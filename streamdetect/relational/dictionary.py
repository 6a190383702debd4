"""Dictionary encoding of attribute values: joins and capped sets work on small integer codes.

Each attribute has one dictionary shared by every view, so equal values get equal codes across views
and a join on codes is the join on values. Codes are positions in the dictionary, which only grows
(new values are appended), so codes already stored in a state never change. Nulls stay null.
Encoding and decoding are O(n) hash joins; the gain is that every later join, ``unique`` and group-by
runs on 4-byte integers instead of strings (on BP at 452k rows: about half the time and memory).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

Dictionaries = dict[str, pl.Series]
CODE = pl.UInt32()
#: Batches of at most this many values are always encoded through the index (:meth:`ValueIndex.pays`).
SMALL_BATCH = 2048


class ValueIndex:
    """Per attribute, value -> code for the values of its dictionary: a cache that makes encoding a batch
    O(batch) instead of a hash join with the whole dictionary (452,000 identifier values on BP x10). It
    follows the dictionaries as they grow (they only grow, by appends): O(new values) to catch up.

    Per attribute, a mapping of the values while the dictionary holds fewer than :data:`_MERGE_FLOOR`;
    past it, the values' hashes sorted with their codes (12 bytes a value) and the values appended since in
    a mapping, merged into the arrays once they number an eighth of them (:class:`_Indexed`). A mapping of
    every value held 130 bytes a value, 61 MB for BP's 452,220 passwords, in every check that keeps rows;
    the arrays are looked up more slowly (a 1,000-value batch 1.4-1.9x the time), so small dictionaries
    keep the mapping."""

    def __init__(self, ratio: int = 4, small: int = SMALL_BATCH) -> None:
        self._columns: dict[str, _Indexed] = {}
        self.ratio = ratio
        self.small = small

    def pays(self, column: pl.Series, dictionary: pl.Series | None) -> bool:
        """Whether looking ``column``'s values up beats a join: for batches ``ratio`` times smaller than the
        dictionary (a stream's micro-batches), and for any batch of at most ``small`` values (a join
        with even a two-value dictionary is five polars queries, 0.5 ms, against 0.1 ms of lookups for
        1,000 values); a first load is one join, and the index catches up with its values when next
        used. Never for floats (NaN is not equal to itself)."""
        if dictionary is None or column.dtype.is_float():
            return False
        return column.len() <= self.small or column.len() * self.ratio < dictionary.len()

    def catch_up(self, dictionaries: Dictionaries, name: str) -> _Indexed | None:
        """``name``'s index, holding every value of its dictionary (the values it gained since the last call
        indexed now); None without a dictionary."""
        known = dictionaries.get(name)
        if known is None:
            return None
        indexed = self._columns.get(name)
        if indexed is None:
            indexed = self._columns[name] = _Indexed()
        indexed.catch_up(known)
        return indexed

    def codes(self, dictionaries: Dictionaries, column: pl.Series) -> pl.Series:
        """``column``'s codes in its dictionary (``dictionaries[column.name]``, of the column's type), null for
        a null and for a value it does not hold."""
        indexed = self.catch_up(dictionaries, column.name)
        if indexed is None:
            return pl.Series(column.name, [None] * column.len(), dtype=CODE)
        return indexed.codes(column, dictionaries[column.name])


#: Hashes are polars', with this seed (one for the dictionary and the batches).
_SEED = 0
#: The mapping of values appended since the arrays were sorted is merged into them past this many values
#: and an eighth of the arrays (amortised: each value is sorted again about eight times in all). A
#: dictionary below it stays a mapping: its lookups are the fastest (a 1,000-value batch of a 45,222-value
#: dictionary in 1.4-1.9x less time than through the arrays), and it costs at most ~8 MB.
_MERGE_FLOOR = 1 << 16


class _Indexed:
    """One dictionary's index: its values' hashes sorted with their codes, up to ``sorted_upto`` values, and
    the values appended after them (as :func:`_keys` gives them) in ``recent``."""

    def __init__(self) -> None:
        self.hashes = np.zeros(0, dtype=np.uint64)
        self.positions = np.zeros(0, dtype=np.uint32)
        self.sorted_upto = 0
        self.recent: dict[object, int] = {}

    def catch_up(self, dictionary: pl.Series) -> None:
        covered = self.sorted_upto + len(self.recent)
        if covered >= dictionary.len():
            return
        pending = dictionary.len() - self.sorted_upto
        if pending > max(_MERGE_FLOOR, self.sorted_upto // 8):
            # Sorted again whole: O(n log n) once per an eighth more values (a first load sorts once).
            hashes = _hashes(dictionary)
            order = np.argsort(hashes, kind="stable")
            self.hashes, self.positions = hashes[order], order.astype(np.uint32)
            self.sorted_upto, self.recent = dictionary.len(), {}
            return
        # One C-level update (a Python loop took 0.1 s per 452,000-value dictionary).
        self.recent.update(zip(_keys(dictionary.slice(covered)), range(covered, dictionary.len()), strict=True))

    def codes(self, column: pl.Series, dictionary: pl.Series) -> pl.Series:
        """``column``'s codes (:meth:`ValueIndex.codes`), null for a null and for a value not held."""
        if not self.sorted_upto:  # a mapping only: one lookup pass
            return pl.Series(column.name, list(map(self.recent.get, _keys(column))), dtype=CODE)
        codes = np.full(column.len(), -1, dtype=np.int64)
        # The sorted hashes: a candidate per value, kept when the dictionary holds that very value there
        # (one query compares them all).
        wanted = _hashes(column)
        at = np.searchsorted(self.hashes, wanted)
        at[at == len(self.hashes)] = 0
        same_hash = self.hashes[at] == wanted
        candidates = self.positions[at]
        held = (
            pl.select((pl.lit(dictionary).gather(pl.lit(pl.Series(candidates))) == pl.lit(column)).fill_null(False))
            .to_series()
            .to_numpy()
        )
        found = same_hash & held
        codes[found] = candidates[found]
        clash = same_hash & ~held
        if clash.any() and (clash := clash & column.is_not_null().to_numpy()).any():
            # Two values of one hash (or a value hashing as a held one): the hash join decides.
            chosen = np.flatnonzero(clash)
            joined = _joined_codes(column.gather(pl.Series(chosen)), dictionary.head(self.sorted_upto))
            codes[chosen] = joined.fill_null(-1).to_numpy()
        if self.recent:
            missing = np.flatnonzero(codes < 0)
            if len(missing):
                keys = _keys(column if len(missing) == column.len() else column.gather(pl.Series(missing)))
                codes[missing] = [self.recent.get(key, -1) for key in keys]
        return _as_codes(column.name, codes)


def _hashes(column: pl.Series) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """Polars' hashes of ``column``'s values (nulls too), as an array."""
    return column.hash(seed=_SEED).to_numpy()


def _keyed(column: pl.Series) -> pl.Series:
    """``column`` as the index keys it: temporal values as their integers (days, microseconds), which
    Python builds and hashes several times faster than date objects (a batch's date column took
    0.25-0.4 ms per 1,000 values to list); any other column as it is."""
    return column.to_physical() if column.dtype.is_temporal() else column


def _keys(column: pl.Series) -> list[object]:
    """``column``'s values as the index's keys (:func:`_keyed`)."""
    return _keyed(column).to_list()


def encode(dictionaries: Dictionaries, frame: pl.DataFrame, index: ValueIndex | None = None) -> pl.DataFrame:
    """``frame`` with every column replaced by its codes; extends ``dictionaries`` with new values (sorted,
    so a batch's codes do not depend on its row order). With ``index``, values are looked up in it
    (O(batch)) when the batch is small against the dictionary (:meth:`ValueIndex.pays`); otherwise by a
    hash join with the dictionary (O(batch + dictionary))."""
    columns = []
    for name in frame.columns:
        column = frame.get_column(name)
        known = dictionaries.get(name)
        if known is not None and known.dtype != column.dtype:
            raise TypeError(f"attribute {name!r} arrives as {column.dtype}, earlier as {known.dtype}")
        if index is not None and index.pays(column, known):
            columns.append(_encode_indexed(dictionaries, column, index))
            continue
        values = column.drop_nulls().unique().sort()
        if known is None:
            known = values.clear()
        fresh = values.filter(~values.is_in(known.implode()))
        if fresh.len():
            known = pl.concat([known, fresh])
        dictionaries[name] = known
        columns.append(_joined_codes(column, known))
    return pl.DataFrame(columns, schema=dict.fromkeys(frame.columns, CODE))


def _joined_codes(column: pl.Series, known: pl.Series) -> pl.Series:
    """``column``'s codes in the dictionary ``known`` by a hash join with it (null where absent)."""
    name = column.name
    mapping = pl.DataFrame({name: known, "\0code": pl.arange(0, known.len(), dtype=CODE, eager=True)})
    coded = column.to_frame().join(mapping, on=name, how="left", maintain_order="left").get_column("\0code")
    return coded.alias(name)


def _encode_indexed(dictionaries: Dictionaries, column: pl.Series, index: ValueIndex) -> pl.Series:
    """``column``'s codes looked up in ``index``, its unseen values appended to the dictionary (sorted) first.
    A dictionary still a mapping only (:data:`_MERGE_FLOOR`): one lookup pass (``map`` of the dict's
    ``get``), a second only when a value was unseen, the unseen values coded into the mapping as appended
    (a polars call per step cost 1.4 ms a batch more). With arrays: the column looked up again once the
    unseen values are appended."""
    name = column.name
    indexed = index.catch_up(dictionaries, name)
    assert indexed is not None  # the index pays only with a dictionary
    if indexed.sorted_upto:
        codes = indexed.codes(column, dictionaries[name])
        if codes.null_count() > column.null_count():  # values never seen
            absent = column.filter(codes.is_null()).drop_nulls().unique().sort()
            dictionaries[name] = pl.concat([dictionaries[name], absent])
            codes = index.codes(dictionaries, column)
        return codes
    mapping = indexed.recent
    keyed = _keyed(column)
    keys = keyed.to_list()
    found = list(map(mapping.get, keys))
    if None in found:  # nulls, or values never seen
        unseen = {key for key, code in zip(keys, found, strict=True) if code is None and key is not None}
        if unseen:
            fresh = pl.Series(name, list(unseen), dtype=keyed.dtype).sort()
            mapping.update(zip(fresh.to_list(), range(len(mapping), len(mapping) + fresh.len()), strict=True))
            dictionaries[name] = pl.concat([dictionaries[name], fresh.cast(column.dtype)])
            found = list(map(mapping.get, keys))
    return pl.Series(name, found, dtype=CODE)


def _as_codes(name: str, codes: np.ndarray[Any, np.dtype[np.int64]]) -> pl.Series:
    """Codes as a column, -1 as null."""
    return pl.Series(name, codes, dtype=pl.Int64).cast(CODE, strict=False)


def decode(dictionaries: Dictionaries, attribute: str, codes: Sequence[int]) -> list[object]:
    """The values behind ``codes`` of ``attribute``."""
    return dictionaries[attribute].gather(list(codes)).to_list()


def decode_frame(dictionaries: Dictionaries, frame: pl.DataFrame) -> pl.DataFrame:
    """The values behind a frame of codes (nulls stay null)."""
    return pl.DataFrame([dictionaries[name].gather(frame.get_column(name)).alias(name) for name in frame.columns])


def lookup(dictionaries: Dictionaries, frame: pl.DataFrame, index: ValueIndex | None = None) -> pl.DataFrame:
    """``frame`` in codes without extending the dictionaries: a value never seen gets a null code (as a
    null does; compare with the frame's own nulls to tell them apart). For rows to withdraw. With
    ``index``, small frames are looked up in it (O(frame)), as for :func:`encode`."""
    columns = []
    for name in frame.columns:
        known = dictionaries.get(name)
        if known is None or known.dtype != frame.schema[name]:
            columns.append(pl.Series(name, [None] * frame.height, dtype=CODE))
            continue
        column = frame.get_column(name)
        if index is not None and index.pays(column, known):
            columns.append(index.codes(dictionaries, column))
        else:
            columns.append(_joined_codes(column, known))
    return pl.DataFrame(columns, schema=dict.fromkeys(frame.columns, CODE))
