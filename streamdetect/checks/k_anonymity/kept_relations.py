"""The stored views' relations of the join-based method, kept between batches.

A delta join reads every other view whole, projected on the attributes its pair needs (with the rows'
positions as projection facts when the view holds them). Rebuilt per batch, each projection was a polars
query over the whole view, and a new frame each time, so nothing computed from it (distinct counts,
capped forms, code arrays: :class:`~streamdetect.relational.linked_values.KeptCaps`) outlived the batch.
Kept here, a projection is the same frame while its view does not change and grows by the view's new rows
when it does (the capped forms kept of it carried forward, :meth:`KeptCaps.grown`). A withdrawal (or a row
present again) makes it anew from the rows present, kept again from there: it is keyed by the view's
presence mark (:meth:`SeenRows.presence`), and rows appended under one mark are all present.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np
import polars as pl

from streamdetect.checks.seen_rows import SeenRows
from streamdetect.relational import code_arrays
from streamdetect.relational.code_arrays import CodeRelation
from streamdetect.relational.linked_values import CODE_ARRAYS_ROWS, KeptCaps

T = TypeVar("T")
#: The column of a holder's relation that names each row's projection fact (its position).
PF = "\0pf"


#: Attributes a relation is not projected on but whose nulls leave a row out (a pair's other attribute).
Filters = tuple[str, ...]
#: Marks kept per relation: the rows of the view it covered, and its height then (the newest last).
MARKS = 64


def projected(rows: pl.DataFrame, attributes: list[str], start: int | None, filters: Filters = ()) -> pl.DataFrame:
    """``rows`` on ``attributes``, without the rows holding a null there or in ``filters`` (null never
    joins); with the rows' positions from ``start`` as the PF column when given (the rows are then
    distinct), distinct otherwise."""
    if start is None:
        if attributes and rows.height <= CODE_ARRAYS_ROWS and code_arrays.codes_only(rows, [*attributes, *filters]):
            # A batch's few rows deduplicated in numpy: a polars query's fixed cost was most of the time
            # (about 1 ms per kept projection and batch on BP).
            frame = pl.DataFrame([rows.get_column(a) for a in attributes])  # the columns as they are: no query
            relation = CodeRelation.from_frame(frame)
            distinct = code_arrays.unique(relation)
            return frame if distinct is relation else distinct.to_frame()
        return rows.select([*attributes, *filters]).drop_nulls().select(attributes).unique()
    positions = pl.int_range(start, start + rows.height, dtype=pl.UInt32, eager=True).alias(PF)
    return with_positions(rows, attributes, positions, filters)


def with_positions(
    rows: pl.DataFrame, attributes: list[str], positions: pl.Series, filters: Filters = ()
) -> pl.DataFrame:
    """``rows`` on ``attributes`` beside ``positions`` (a view holding none of them still has its PFs),
    without the rows holding a null in ``attributes`` or ``filters``."""
    if not any(rows.get_column(a).null_count() for a in [*attributes, *filters]):
        # No row left out: the columns taken as they are, no query (a micro-batch's holder relation is made
        # for every set the batch grows, each query 0.1-0.4 ms).
        return pl.DataFrame([*(rows.get_column(a) for a in attributes), positions])
    chosen = rows.select([*(pl.col(a) for a in [*attributes, *filters]), positions]).drop_nulls()
    return chosen.drop(list(filters)) if filters else chosen


class KeptRelations:
    """Projections of the stored views per (view, attributes, holds the PFs), and the capped forms of the
    elimination runs kept with them. Shared by the states that share the rows (the forcing-view search's
    subset states)."""

    def __init__(self) -> None:
        #: Per (view, attributes, holds the PFs, filters): the view's stored rows and presence mark it
        #: covers, and the projection.
        self._kept: dict[tuple[str, tuple[str, ...], bool, Filters], tuple[int, int, pl.DataFrame]] = {}
        #: Per kept relation, its height when the view had so many rows (its last ``MARKS`` growths).
        self._marks: dict[tuple[str, tuple[str, ...], bool, Filters], dict[int, int]] = {}
        self._firsts: dict[tuple[str, tuple[str, ...], Filters], tuple[int, int, pl.DataFrame]] = {}
        self.caps = KeptCaps()
        #: Per question, the frames its last answer was computed from, and that answer (:meth:`remembered`).
        self._answers: dict[Hashable, tuple[tuple[pl.DataFrame, ...], Any]] = {}

    def remembered(self, question: Hashable, frames: tuple[pl.DataFrame, ...], compute: Callable[[], T]) -> T:
        """``compute()``, an answer to ``question`` that depends only on ``frames`` (kept relations: the same
        objects while their views do not change), computed again only when one of them is another frame.
        One answer kept per question: the frames it holds are the last ones asked about."""
        entry = self._answers.get(question)
        if entry is not None and len(entry[0]) == len(frames) and all(map(operator.is_, entry[0], frames)):
            answer: T = entry[1]
            return answer
        answer = compute()
        self._answers[question] = (frames, answer)
        return answer

    def firsts(self, seen: SeenRows, view: str, attributes: list[str], filters: Filters = ()) -> pl.DataFrame:
        """Per distinct projection of ``view``'s present rows on ``attributes`` (rows with a null there or in
        ``filters`` left out), the first position that has it (the PF column): kept between batches and
        grown by the view's new rows under one presence mark, as :meth:`relation`."""
        rows, mark = seen.rows[view], seen.presence(view)
        key = (view, tuple(attributes), filters)
        entry = self._firsts.get(key)
        if entry is not None and entry[0] == rows.height and entry[1] == mark:
            return entry[2]
        if entry is None or entry[1] != mark or entry[0] > rows.height:
            chosen = _present(seen, view, attributes, True, filters)
            frame = chosen.unique(subset=attributes, keep="first", maintain_order=True)
        else:
            covered, _, before = entry
            fresh = projected(rows.slice(covered), attributes, covered, filters).unique(
                subset=attributes, keep="first", maintain_order=True
            )
            fresh = fresh.join(before, on=attributes, how="anti")
            frame = pl.concat([before, fresh]) if fresh.height else before
        self._firsts[key] = (rows.height, mark, frame)
        return frame

    def relation(
        self, seen: SeenRows, view: str, attributes: list[str], holder: bool, filters: Filters = ()
    ) -> pl.DataFrame:
        """``view``'s present rows projected on ``attributes`` (with the PF column when ``holder``), without
        the rows holding a null in ``filters``."""
        rows, mark = seen.rows[view], seen.presence(view)
        key = (view, tuple(attributes), holder, filters)
        entry = self._kept.get(key)
        if entry is not None and entry[0] == rows.height and entry[1] == mark:
            return entry[2]
        if entry is None or entry[1] != mark or entry[0] > rows.height:
            # First asked, or rows withdrawn (or present again) since: made from the rows present.
            frame = _present(seen, view, attributes, holder, filters)
            self._marks[key] = {}
        else:
            # Rows appended under the same mark, all present: the projection grows by theirs.
            covered, _, before = entry
            fresh = projected(rows.slice(covered), attributes, covered if holder else None, filters)
            if not holder:
                fresh = self._unseen(fresh, before, attributes)
            frame = self.caps.grown(before, fresh)
        self._kept[key] = (rows.height, mark, frame)
        marks = self._marks.setdefault(key, {})
        marks[rows.height] = frame.height
        if len(marks) > MARKS:
            del marks[next(iter(marks))]
        return frame

    def _unseen(self, fresh: pl.DataFrame, before: pl.DataFrame, attributes: list[str]) -> pl.DataFrame:
        """The rows of ``fresh`` that ``before`` (a kept projection) does not hold: looked up in ``before``'s
        codes, kept with it (:meth:`KeptCaps.codes`), where polars' anti join hashed every row of ``before``
        per batch (2-3 ms at BP's 45,000 rows)."""
        if not fresh.height or not before.height:
            return fresh
        if not code_arrays.codes_only(fresh):
            return fresh.join(before, on=attributes, how="anti")
        shown = code_arrays.shown(CodeRelation.from_frame(fresh), self.caps.codes(before), attributes)
        return fresh if not shown.any() else code_arrays.take_rows(fresh, np.flatnonzero(~shown))

    def novel(
        self, seen: SeenRows, view: str, projection: tuple[list[str], Filters], new: pl.DataFrame, positions: pl.Series
    ) -> pl.DataFrame:
        """The distinct projections (as :meth:`relation` without PFs) of ``view``'s rows ``new`` at
        ``positions`` that its rows before them did not have: the only rows of the view by which a join
        on these attributes grows. When ``new`` are the view's last rows (appended, so present) and the
        relation was kept when the view had the rows before them under the same presence mark, that is the
        kept relation's growth since (no query); otherwise every distinct projection of ``new`` (a superset:
        the join finds nothing new by the others)."""
        attributes, filters = projection
        rows = seen.rows[view]
        start = rows.height - positions.len()
        if positions.len() and positions.min() == start:
            frame = self.relation(seen, view, attributes, False, filters)
            mark = self._marks.get((view, tuple(attributes), False, filters), {}).get(start)
            if mark is not None:
                return frame.slice(mark)
        return projected(new, attributes, None, filters)


def _present(seen: SeenRows, view: str, attributes: list[str], holder: bool, filters: Filters) -> pl.DataFrame:
    """``view``'s present rows projected as :meth:`KeptRelations.relation` keeps them."""
    rows = seen.rows[view]
    if seen.height(view) == rows.height:
        return projected(rows, attributes, 0 if holder else None, filters)
    present = seen.present(view)
    assert present is not None
    if not holder:
        return projected(present, attributes, None, filters)
    return with_positions(present, attributes, seen.present_positions(view).alias(PF), filters)
