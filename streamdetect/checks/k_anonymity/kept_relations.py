"""The stored views' relations of the join-based method, kept between batches.

A delta join reads every other view whole, projected on the attributes its pair needs (with the rows'
positions as projection facts when the view holds them). Rebuilt per batch, each projection was a polars
query over the whole view, and a new frame each time, so nothing computed from it (distinct counts,
capped forms, code arrays: :class:`~streamdetect.relational.linked_values.KeptCaps`) outlived the batch.
Kept here, a projection is the same frame while its view does not change and grows by the view's new rows
when it does (the capped forms kept of it carried forward, :meth:`KeptCaps.grown`). Only while every row
of the view is present: with rows withdrawn, a projection is made from the rows present, as before.
"""

from __future__ import annotations

import polars as pl

from streamdetect.checks.seen_rows import SeenRows
from streamdetect.relational.linked_values import KeptCaps

#: The column of a holder's relation that names each row's projection fact (its position).
PF = "\0pf"


def projected(rows: pl.DataFrame, attributes: list[str], start: int | None) -> pl.DataFrame:
    """``rows`` on ``attributes``, without nulls (null never joins); with the rows' positions from
    ``start`` as the PF column when given (the rows are then distinct), distinct otherwise."""
    if start is None:
        return rows.select(attributes).drop_nulls().unique()
    positions = pl.int_range(start, start + rows.height, dtype=pl.UInt32, eager=True).alias(PF)
    return _with_positions(rows, attributes, positions)


def _with_positions(rows: pl.DataFrame, attributes: list[str], positions: pl.Series) -> pl.DataFrame:
    """``rows`` on ``attributes`` beside ``positions`` (a view holding none of them still has its PFs)."""
    return rows.select([*(pl.col(a) for a in attributes), positions]).drop_nulls()


class KeptRelations:
    """Projections of the stored views per (view, attributes, holds the PFs), and the capped forms of the
    elimination runs kept with them. Shared by the states that share the rows (the forcing-view search's
    subset states)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, tuple[str, ...], bool], tuple[int, pl.DataFrame]] = {}
        self.caps = KeptCaps()

    def relation(self, seen: SeenRows, view: str, attributes: list[str], holder: bool) -> pl.DataFrame:
        """``view``'s present rows projected on ``attributes`` (with the PF column when ``holder``)."""
        rows = seen.rows[view]
        if seen.height(view) != rows.height:  # rows withdrawn: positions are not all present
            present = seen.present(view)
            assert present is not None
            if not holder:
                return projected(present, attributes, None)
            return _with_positions(present, attributes, seen.present_positions(view).alias(PF))
        key = (view, tuple(attributes), holder)
        entry = self._kept.get(key)
        if entry is not None and entry[0] == rows.height:
            return entry[1]
        if entry is None or entry[0] > rows.height:
            frame = projected(rows, attributes, 0 if holder else None)
        else:
            covered, before = entry
            fresh = projected(rows.slice(covered), attributes, covered if holder else None)
            if not holder:
                fresh = fresh.join(before, on=attributes, how="anti")
            frame = pl.concat([before, fresh]) if fresh.height else before
            if frame is not before:
                self.caps.grown(before, frame, fresh)
        self._kept[key] = (rows.height, frame)
        return frame
