"""Small operations on the code frames linkage tasks keep: filtering by codes, and the
book-keeping of the codes a step saturated."""

from __future__ import annotations

import numpy as np
import polars as pl

from streamdetect.checks.linkage.state import (
    CodeFlags,
    TaskKey,
    rows_where,
)
from streamdetect.relational import code_arrays, small_joins
from streamdetect.relational.code_arrays import CodeRelation, indices


def distinct_codes(rows: pl.DataFrame, keep: list[str]) -> pl.DataFrame:
    """The distinct rows of ``rows`` (dictionary codes) projected on ``keep``, rows with a null left out:
    in numpy (a polars dedup of a micro-batch's rows is a query of 0.3-0.4 ms)."""
    projected = rows.select(keep)
    if any(column.has_nulls() for column in projected.iter_columns()):
        projected = projected.drop_nulls()
    return code_arrays.unique(CodeRelation.from_frame(projected)).to_frame()


def having(frame: pl.DataFrame, column: str, codes: pl.Series) -> pl.DataFrame:
    """``frame``'s rows whose ``column`` (codes, no nulls) holds one of ``codes``: a flag per code read for
    every row (numpy), then the rows picked (:func:`rows_where`: a gather when few); from
    ``small_joins.LARGE_ROWS`` rows, polars' filter."""
    if frame.height >= small_joins.LARGE_ROWS:
        return frame.filter(pl.col(column).is_in(codes.implode()))  # no copy of a chunked column
    values = frame.get_column(column).to_numpy()
    wanted = codes.to_numpy()
    flags = np.zeros(max(int(values.max()) if values.size else 0, int(wanted.max()) if wanted.size else 0) + 1, bool)
    flags[wanted] = True
    return rows_where(frame, flags[indices(values)])


def same_reads(earlier: tuple[tuple[CodeFlags, int], ...], now: tuple[tuple[CodeFlags, int], ...]) -> bool:
    """Whether two reads of masks are of the same mask objects at the same versions."""
    return len(earlier) == len(now) and all(a is b and va == vb for (a, va), (b, vb) in zip(earlier, now, strict=True))


def record_codes(saturated_now: dict[TaskKey, pl.Series], key: TaskKey, codes: pl.Series) -> None:
    """Note codes a step saturated in a task (a task may saturate codes more than once in a step)."""
    earlier = saturated_now.get(key)
    saturated_now[key] = codes if earlier is None else pl.concat([earlier, codes])


def all_present(version: tuple[int, int, int]) -> bool:
    """Whether a view's version (stored, present, events) has every stored row present."""
    return version[0] == version[1]
