"""What each projection fact's capped set holds, in numpy beside the set's frame.

A capped set (:mod:`.association_covers`) holds at most ``cap`` values of its target per projection fact
(PF, a stored row's position). Kept here per PF: how many it holds (a PF at the cap is *saturated*: its set
never changes under arrivals) and, for small caps, which (dictionary codes in a PF x cap matrix). With the
values at hand, the pairs a delta join found are merged by array lookups, where a polars query per set
and batch cost its fixed ~1 ms whatever the few pairs found.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from streamdetect.relational import code_arrays

#: Largest cap whose values are kept as a matrix (its memory is PFs x cap); above it only the counts.
MATRIX_CAP = 16
#: An empty slot of the matrix (codes are non-negative).
_EMPTY = -1


class HeldValues:
    """Per PF (by position) the number of values its set holds and, up to :data:`MATRIX_CAP`, the values."""

    def __init__(self, counts: np.ndarray[Any, Any], values: np.ndarray[Any, Any] | None) -> None:
        self.counts = counts
        self.values = values
        # The arrays ``counts`` and ``values`` are the first entries of, with room to grow (:meth:`extend`).
        self._room: Room | None = None

    @classmethod
    def of(cls, pairs: pl.DataFrame | None, pf: str, target: str, cap: int, height: int) -> HeldValues:
        """The values held by a set's ``pairs`` (PF, target), for a holder of ``height`` rows."""
        if pairs is None or pairs.is_empty():
            positions = np.zeros(0, dtype=np.int64)
            codes = np.zeros(0, dtype=np.int64)
        else:
            positions = pairs.get_column(pf).to_numpy().astype(np.int64)
            codes = pairs.get_column(target).to_numpy().astype(np.int64)
        counts = np.bincount(positions, minlength=height).astype(np.int64)
        if cap > MATRIX_CAP:
            return cls(counts, None)
        values = np.full((height, cap), _EMPTY, dtype=np.int64)
        if positions.size:
            order = code_arrays.stable_order(positions)
            values[positions[order], code_arrays.run_ranks(positions[order])] = codes[order]
        return cls(counts, values)

    def extend(self, height: int) -> None:
        """Make room for a holder grown to ``height`` rows (new PFs hold nothing yet). Amortised O(rows
        added) (:func:`grown_in_room`), where concatenating copied every PF's counts and values for each set
        and batch of its holder."""
        if height > len(self.counts):
            (counts, self.values), self._room = grown_in_room(
                (self.counts, self.values), (0, _EMPTY), height, self._room
            )
            assert counts is not None
            self.counts = counts

    def clear(self, positions: np.ndarray[Any, Any]) -> None:
        """Empty the sets of the PFs at ``positions`` (their sets computed again: :mod:`.withdrawals`)."""
        self.counts[positions] = 0
        if self.values is not None:
            self.values[positions] = _EMPTY

    def merge(self, positions: np.ndarray[Any, Any], codes: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Take the distinct pairs (``positions[i]``, ``codes[i]``) into the sets: those a set does not hold
        yet, up to its cap (the first found first); return the indices of the pairs taken, ascending.
        Needs the values (:data:`MATRIX_CAP`)."""
        assert self.values is not None
        cap = self.values.shape[1]
        positions = positions.astype(np.int64, copy=False)
        codes = codes.astype(np.int64, copy=False)
        fresh = (self.counts[positions] < cap) & ~(self.values[positions] == codes[:, None]).any(axis=1)
        candidates = np.flatnonzero(fresh)
        if not candidates.size:
            return candidates
        order = candidates[code_arrays.stable_order(positions[candidates])]
        slots = self.counts[positions[order]] + code_arrays.run_ranks(positions[order])
        taken = order[slots < cap]
        self.values[positions[taken], slots[slots < cap]] = codes[taken]
        np.add.at(self.counts, positions[taken], 1)
        return np.sort(taken)

    def count(self, positions: np.ndarray[Any, Any]) -> None:
        """Count pairs taken into the sets without their values (caps above :data:`MATRIX_CAP`)."""
        np.add.at(self.counts, positions.astype(np.int64, copy=False), 1)


#: Buffers that arrays by position are the first entries of, with room to grow (an array may be None).
Room = tuple[np.ndarray[Any, Any] | None, ...]


def grown_in_room(
    arrays: tuple[np.ndarray[Any, Any] | None, ...], fills: tuple[int, ...], height: int, room: Room | None
) -> tuple[tuple[np.ndarray[Any, Any] | None, ...], Room]:
    """``arrays`` (one entry, or one row, per position; all as long; None stays None) grown to ``height``
    positions, the new ones at their ``fills``, and the buffers they are now views of. Amortised O(positions
    added): the arrays are views of ``room`` when it is theirs and large enough; otherwise new buffers with
    room (an eighth more, or the growth sixteen times over) take them."""
    first = next(array for array in arrays if array is not None)
    size = len(first)
    if room is None or room[0] is None or room[0].shape[0] < height or first.base is not room[0]:
        capacity = height + max(height // 8, 16 * (height - size))
        buffers: list[np.ndarray[Any, Any] | None] = []
        for array, fill in zip(arrays, fills, strict=True):
            if array is None:
                buffers.append(None)
                continue
            buffer = np.full((capacity, *array.shape[1:]), fill, dtype=array.dtype)
            buffer[:size] = array
            buffers.append(buffer)
        room = tuple(buffers)
    grown: list[np.ndarray[Any, Any] | None] = []
    for kept, fill in zip(room, fills, strict=True):
        if kept is not None:
            kept[size:height] = fill
        grown.append(None if kept is None else kept[:height])
    return tuple(grown), room
