"""The SIND classes of one sensitive attribute in the exact subcase, kept under arrivals.

In the exact subcase (no selection mentions P: Proposition 5) a row's class is its signature, which
depends on that row alone, so new rows only join classes or start new ones. What the findings read is
kept per class: its size, the value of P its first member holds, and whether another member holds
another value (then every member may take two values: not certain). Whether a class's members are
pinned (every instance gives them their current value) follows from the class when one view holds P
(:class:`Holding`), and is asked of the oracle otherwise. An update costs its new rows and one
pass of array operations over the classes, where grouping every row again cost a sort and a hash
aggregation of the whole table per sensitive attribute and update (57 ms a call on BP at 41,000 rows).

A withdrawal moves rows' positions: the row cache holding this is rebuilt then (:class:`RowCache`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from streamdetect.model.predicates import to_polars
from streamdetect.model.topology import ViewDefinition


def _grown(array: np.ndarray[Any, Any], size: int, fill: Any) -> np.ndarray[Any, Any]:
    """``array`` extended to ``size`` entries with ``fill`` (a copy when it grows)."""
    if array.size >= size:
        return array
    return np.concatenate([array, np.full(size - array.size, fill, dtype=array.dtype)])


@dataclass
class Holding:
    """The one view projecting P (no domain declared), as it pins rows. Then it alone makes the
    signatures: a row it selects is in the class of the rows sharing its projection, which is the set of
    rows whose values of P it shows beside that projection. A uniform class (every member holding one
    value) of selected rows is therefore pinned: its projection shows that one value (a null is its row's
    one candidate where the view has other attributes; with none, the view shows the values of P alone,
    and a class of nulls shows no value). A class of rows it does not select is not pinned: no view
    constrains them."""

    view: ViewDefinition
    #: Per row, whether the view selects it.
    selected: np.ndarray[Any, Any] = field(default_factory=lambda: np.empty(0, dtype=bool))

    def extend(self, rows: pl.DataFrame) -> None:
        """Take the new ``rows``."""
        if self.view.where is None:
            selected = np.ones(rows.height, dtype=bool)
        else:
            selected = rows.select(to_polars(self.view.where, rows.schema).fill_null(False)).to_series().to_numpy()
        self.selected = np.concatenate([self.selected, selected])

    def pinned(self, firsts: np.ndarray[Any, Any], null: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Whether the uniform classes whose first members are ``firsts`` (``null``: their value is null)
        are pinned."""
        pinned: np.ndarray[Any, Any] = self.selected[firsts]
        if len(self.view.attributes) == 1:  # P alone: a class of nulls is shown no value
            pinned = pinned & ~null
        return pinned


@dataclass
class KeptClasses:
    """One sensitive attribute's SIND classes over the first ``rows`` rows of a state (exact subcase)."""

    sensitive: str
    #: The view that pins rows, when there is exactly one projecting P and no domain is declared (else
    #: the oracle says which rows are pinned, from every row).
    holding: Holding | None
    rows: int = 0
    #: Each value of P seen (null included) and its code, in order of arrival.
    values: dict[Any, int] = field(default_factory=dict)
    #: Signature text -> class.
    ids: dict[str, int] = field(default_factory=dict)
    #: Per row: its class, and its value's code.
    row_class: np.ndarray[Any, Any] = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    code: np.ndarray[Any, Any] = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    #: Per class: its first member (row), members, and whether a member holds another value than the first.
    first: np.ndarray[Any, Any] = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    size: np.ndarray[Any, Any] = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    several: np.ndarray[Any, Any] = field(default_factory=lambda: np.empty(0, dtype=bool))
    #: Findings made by the last result per value's code: the rows they list, and the finding (kept while
    #: the rows are the same).
    made: dict[int, tuple[np.ndarray[Any, Any], Any]] = field(default_factory=dict)

    def extend(self, rows: pl.DataFrame, keys: Sequence[str]) -> None:
        """Take the rows after the first ``self.rows`` of a state's ``rows``, with their signature ``keys``."""
        values = self.values
        codes = np.fromiter(
            (values.setdefault(value, len(values)) for value in rows.get_column(self.sensitive).to_list()),
            dtype=np.int64,
            count=rows.height,
        )
        ids = self.ids
        start = len(ids)
        classes = np.fromiter((ids.setdefault(key, len(ids)) for key in keys), dtype=np.int64, count=rows.height)
        positions = np.arange(self.rows, self.rows + rows.height, dtype=np.int64)
        if len(ids) > start:
            fresh = classes >= start
            # A new class's first member: the first of the new rows in it.
            firsts = np.full(len(ids) - start, -1, dtype=np.int64)
            firsts[(classes[fresh] - start)[::-1]] = positions[fresh][::-1]
            self.first = np.concatenate([self.first, firsts])
            self.size = _grown(self.size, len(ids), 0)
            self.several = _grown(self.several, len(ids), False)
        self.size += np.bincount(classes, minlength=len(ids))
        self.code = np.concatenate([self.code, codes])
        self.row_class = np.concatenate([self.row_class, classes])
        self.several[classes[codes != self.code[self.first[classes]]]] = True
        if self.holding is not None:
            self.holding.extend(rows)
        self.rows += rows.height

    def null_rows(self, rows: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Whether each of ``rows`` holds null."""
        null = self.values.get(None)
        return self.code[rows] == null if null is not None else np.zeros(rows.size, dtype=bool)

    def non_null_values(self) -> set[Any]:
        """The values of P seen, null left out."""
        return {value for value in self.values if value is not None}
