"""The rows a check has seen, per view: distinct, dictionary-encoded, append-only.

Shared by the incremental checks. Append-only matters: a row's position is a stable id (the
association-cover check names projection facts by it), and codes never change once given.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from streamdetect.model.codecs import as_frame
from streamdetect.relational import code_arrays, small_joins
from streamdetect.relational.code_arrays import CodeRelation
from streamdetect.relational.dictionary import Dictionaries, ValueIndex, decode_frame, encode, lookup

#: Presence marks (:meth:`SeenRows.presence`), unique across states: a mark is never given twice.
_MARKS = itertools.count(1)


def _with_positions(
    grouped: pl.DataFrame, stored: pl.DataFrame, columns: list[str], dictionaries: Dictionaries
) -> pl.DataFrame:
    """``grouped`` (a batch's distinct rows, in order) with the position ``\0pos`` of each among the
    ``stored`` rows (null when not stored; a null equals a null). In numpy over the codes, a null as the
    code after the dictionary's last: the stored rows cut to those sharing codes with the batch, then
    searched by packed keys (:func:`code_arrays.positions_in`), O(stored) gathers and O(batch log batch),
    where polars' joins took 1.3-1.7 ms per 1,000-row batch at 45,000 stored rows; from
    ``small_joins.LARGE_ROWS`` stored rows, polars' probe and join."""

    def codes(frame: pl.DataFrame) -> CodeRelation:
        arrays = []
        for column in columns:
            values = frame.get_column(column)
            if values.has_nulls():
                values = values.fill_null(dictionaries[column].len() if column in dictionaries else 0)
            arrays.append(values.to_numpy())
        return CodeRelation(columns, arrays, frame.height)

    if stored.height >= small_joins.LARGE_ROWS:
        # Hundreds of thousands of stored rows in chunks: copying them out for numpy costs more than
        # polars' probe of them with the batch (the hash table on the batch's side), then a join.
        have = small_joins.join(
            stored.with_row_index("\0pos"), grouped.select(columns), columns, "inner", nulls_equal=True
        )
        return grouped.join(have, on=columns, how="left", nulls_equal=True, maintain_order="left")
    positions = code_arrays.positions_in(codes(grouped), codes(stored), columns)
    return grouped.with_columns(pl.Series("\0pos", positions).cast(pl.UInt32, strict=False))


def _matched_in_numpy(coded: pl.DataFrame, stored: pl.DataFrame) -> bool:
    """Whether a batch's rows are matched with the stored ones in numpy (:func:`_matched_codes`): codes
    without nulls on both sides, and fewer stored rows than polars' probe pays for (:func:`_with_positions`)."""
    return stored.height < small_joins.LARGE_ROWS and code_arrays.codes_only(coded) and code_arrays.codes_only(stored)


def _matched_codes(
    coded: pl.DataFrame, stored: pl.DataFrame, columns: list[str]
) -> tuple[pl.DataFrame, pl.Series, pl.Series, pl.Series]:
    """A batch's distinct rows (codes, no nulls) matched with the ``stored`` ones, in numpy: the rows not
    stored (in the order they first occur) and their occurrences, the positions of those stored and their
    occurrences. The same as the polars path (a group by, a match, two filters: some 10 queries of
    0.1-0.3 ms each per view batch, a sixth of a k-anonymity update of six views' few rows)."""
    arrays = [coded.get_column(column).to_numpy() for column in columns]
    runs, starts = code_arrays.distinct_runs(code_arrays.row_keys(arrays))
    first, occurrences = runs[starts], np.diff(np.append(starts, runs.size))
    order = np.argsort(first)  # the distinct rows in the order they first occur
    at, occurrences = first[order], occurrences[order]
    grouped = CodeRelation(columns, [array[at] for array in arrays], len(at))
    positions = code_arrays.positions_in(grouped, CodeRelation.from_frame(stored), columns)
    fresh = positions < 0
    chosen = np.flatnonzero(fresh)
    new_rows = grouped.take(chosen).to_frame()
    known = np.flatnonzero(~fresh)
    return (
        new_rows,
        pl.Series("\0n", occurrences[chosen], dtype=pl.Int64),
        pl.Series("\0pos", positions[known], dtype=pl.UInt32),
        pl.Series("\0n", occurrences[known], dtype=pl.Int64),
    )


@dataclass
class SeenRows:
    """The rows published per view as a bag: distinct encoded rows (append-only, a row's position is its
    stable id) with their occurrence counts, and the dictionaries behind the codes.

    A row is *present* while its count is positive. Views are bags (two people with the same projected
    values publish the row twice), so withdrawing one occurrence leaves the row present. With ``record``,
    every change of a count is also logged as an (position, change) event, so that a changelog can carry
    the counts as append-only pieces (:meth:`take_events`).
    """

    rows: dict[str, pl.DataFrame] = field(default_factory=dict)
    dictionaries: Dictionaries = field(default_factory=dict)
    #: Occurrences per position of ``rows`` (Int64); a missing view's rows each occur once.
    counts: dict[str, pl.Series] = field(default_factory=dict)
    record: bool = False
    #: Count events not yet taken, per view, and how many were ever logged (positions of the log).
    events: dict[str, list[pl.DataFrame]] = field(default_factory=dict, compare=False)
    logged: dict[str, int] = field(default_factory=dict, compare=False)
    #: Positions whose count is zero, per view (none: every stored row is present).
    _absent: dict[str, int] = field(default_factory=dict, compare=False)
    #: Per view, a mark given anew whenever a stored row stops or starts again being present (0: never).
    _presence: dict[str, int] = field(default_factory=dict, compare=False)
    #: Value -> code per attribute (a cache of the dictionaries, for encoding batches in O(batch)).
    _index: ValueIndex = field(default_factory=ValueIndex, compare=False, repr=False)

    def _counts(self, view: str) -> pl.Series:
        counts = self.counts.get(view)
        if counts is None:
            counts = pl.Series("\0n", [1] * self.rows[view].height, dtype=pl.Int64)
            self.counts[view] = counts
        return counts

    def _log(self, view: str, positions: pl.Series, change: pl.Series) -> None:
        if self.record and positions.len():
            event = pl.DataFrame({"position": positions.cast(pl.UInt32), "change": change.cast(pl.Int64)})
            self.events.setdefault(view, []).append(event)
            self.logged[view] = self.logged.get(view, 0) + event.height

    def add(self, view: str, frame: pl.DataFrame, attributes: Sequence[str]) -> tuple[pl.DataFrame, pl.Series]:
        """Record rows of ``view`` (each occurrence counts); return the rows that became present (encoded:
        never seen, or withdrawn before) and their positions. O(batch + view) (one hash join)."""
        columns = list(attributes)
        coded = encode(self.dictionaries, frame.select(columns), self._index)
        old = self.rows.get(view)
        start = 0 if old is None else old.height
        if old is not None and _matched_in_numpy(coded, old):
            new_rows, fresh_n, known_positions, known_n = _matched_codes(coded, old, columns)
        else:
            grouped = coded.group_by(columns, maintain_order=True).len("\0n")
            if old is None:
                matched = grouped.with_columns(pl.lit(None, dtype=pl.UInt32).alias("\0pos"))
            else:
                matched = _with_positions(grouped, old, columns, self.dictionaries)
            fresh = matched.filter(pl.col("\0pos").is_null())
            known = matched.filter(pl.col("\0pos").is_not_null())
            new_rows, fresh_n = fresh.select(columns), fresh.get_column("\0n").cast(pl.Int64)
            known_positions, known_n = known.get_column("\0pos"), known.get_column("\0n").cast(pl.Int64)
        fresh_positions = pl.int_range(start, start + new_rows.height, dtype=pl.UInt32, eager=True)
        counts = self._counts(view) if old is not None else pl.Series("\0n", [], dtype=pl.Int64)
        revived = pl.Series("\0pos", [], dtype=pl.UInt32)
        if known_positions.len():
            before = counts.gather(known_positions)
            revived = known_positions.filter(before == 0)
            counts = counts.scatter(known_positions, before + known_n)
            if revived.len():
                self._absent[view] = self._absent.get(view, 0) - revived.len()
                self._presence[view] = next(_MARKS)
        self.rows[view] = new_rows if old is None else pl.concat([old, new_rows])
        self.counts[view] = pl.concat([counts, fresh_n])
        self._log(view, known_positions, known_n)
        self._log(view, fresh_positions, fresh_n)
        if not revived.len():
            return new_rows, fresh_positions
        back = self.rows[view].gather(revived)
        return pl.concat([back, new_rows]), pl.concat([revived, fresh_positions])

    def _locate(self, view: str, frame: pl.DataFrame, attributes: Sequence[str]) -> tuple[pl.DataFrame, str | None]:
        """The retracted rows grouped, with their positions and occurrences, or what is wrong with them."""
        columns = list(attributes)
        old = self.rows.get(view)
        if old is None:
            return pl.DataFrame(), f"withdraws {frame.height} row(s) of view {view!r}, which has published none"
        coded = lookup(self.dictionaries, frame.select(columns), self._index)
        unknown = pl.Series([False] * frame.height)
        for column in columns:
            unknown = unknown | (coded.get_column(column).is_null() & frame.get_column(column).is_not_null())
        if unknown.any():
            row = int(unknown.arg_max() or 0)
            return (
                pl.DataFrame(),
                f"withdraws a row of view {view!r} that was never published (retracted row {row + 1})",
            )
        grouped = (
            coded.with_row_index("\0first")
            .group_by(columns, maintain_order=True)
            .agg(pl.len().alias("\0n"), pl.col("\0first").first())
        )
        matched = _with_positions(grouped, old, columns, self.dictionaries)
        matched = matched.with_columns(
            self._counts(view).gather(matched.get_column("\0pos").fill_null(0)).alias("\0had")
        )
        short = matched.filter(pl.col("\0pos").is_null() | (pl.col("\0had") < pl.col("\0n")))
        if short.height:
            row = int(short.select(pl.col("\0first").min()).item())
            return pl.DataFrame(), (
                f"withdraws a row of view {view!r} more often than it is published (retracted row {row + 1})"
            )
        return matched, None

    def check_retract(self, view: str, frame: pl.DataFrame, attributes: Sequence[str]) -> str | None:
        """What is wrong with withdrawing ``frame``'s rows of ``view`` (rows not published, or withdrawn more
        often than published), or None. Changes nothing; values are not quoted (they may be identifiers)."""
        if frame.is_empty():
            return None
        return self._locate(view, frame, attributes)[1]

    def check_retractions(
        self, retracted: Mapping[str, pl.DataFrame], attributes: Mapping[str, Sequence[str]]
    ) -> str | None:
        """:meth:`check_retract` for every view of a batch's withdrawals: the first fault, or None."""
        for view, frame in retracted.items():
            problem = self.check_retract(view, frame, attributes[view])
            if problem is not None:
                return problem
        return None

    def retract(self, view: str, frame: pl.DataFrame, attributes: Sequence[str]) -> tuple[pl.DataFrame, pl.Series]:
        """Withdraw one occurrence per row of ``frame``; return the rows no longer present (encoded) and their
        positions. Raises ``ValueError`` (changing nothing) when :meth:`check_retract` finds a fault."""
        if frame.is_empty():
            return pl.DataFrame(schema=dict.fromkeys(attributes, pl.UInt32)), pl.Series("\0pos", [], dtype=pl.UInt32)
        matched, problem = self._locate(view, frame, attributes)
        if problem is not None:
            raise ValueError(problem)
        positions = matched.get_column("\0pos")
        after = matched.get_column("\0had") - matched.get_column("\0n")
        self.counts[view] = self._counts(view).scatter(positions, after)
        gone = positions.filter(after == 0)
        self._absent[view] = self._absent.get(view, 0) + gone.len()
        if gone.len():
            self._presence[view] = next(_MARKS)
        self._log(view, positions, -matched.get_column("\0n").cast(pl.Int64))
        return self.rows[view].gather(gone), gone

    def apply_events(self, view: str, events: pl.DataFrame) -> None:
        """Apply logged count events (of another state's :meth:`take_events`) to rows already appended."""
        counts = self._counts(view)
        summed = events.group_by("position").agg(pl.col("change").sum())
        positions = summed.get_column("position")
        counts = counts.scatter(positions, counts.gather(positions) + summed.get_column("change"))
        self.counts[view] = counts
        self._absent[view] = int((counts == 0).sum())
        self._presence[view] = next(_MARKS)
        self.logged[view] = self.logged.get(view, 0) + events.height

    def append_rows(self, view: str, frame: pl.DataFrame) -> None:
        """Append rows of another state's piece; they occur zero times until its count events arrive."""
        old = self.rows.get(view)
        counts = self._counts(view) if old is not None else pl.Series("\0n", [], dtype=pl.Int64)
        self.rows[view] = frame if old is None else pl.concat([old, frame])
        self.counts[view] = pl.concat([counts, pl.Series("\0n", [0] * frame.height, dtype=pl.Int64)])
        self._absent[view] = self._absent.get(view, 0) + frame.height
        if frame.height:
            self._presence[view] = next(_MARKS)

    def take_events(self, view: str) -> pl.DataFrame | None:
        """The count events logged for ``view`` since the last call (None: none)."""
        events = self.events.pop(view, None)
        return pl.concat(events) if events else None

    def total(self) -> int:
        """Distinct rows stored over every view."""
        return sum(rows.height for rows in self.rows.values())

    def index_values(self) -> None:
        """Bring the value -> code index up to every dictionary (O(new values)): after a bulk load, so
        that the first micro-batch does not pay for indexing a whole dictionary (0.1 s per 452,000
        values)."""
        for name, dictionary in self.dictionaries.items():
            if not dictionary.dtype.is_float():
                self._index.catch_up(self.dictionaries, name)

    def height(self, view: str) -> int:
        """Distinct rows present of ``view`` (0 before any)."""
        rows = self.rows.get(view)
        if rows is None:
            return 0
        return rows.height - self._absent.get(view, 0)

    def presence(self, view: str) -> int:
        """A mark of which stored rows of ``view`` are present: the same mark, the same rows present among the
        first so many stored (rows appended since are present); 0 while no row was ever withdrawn. Marks are
        never given twice, so a kept computation from the present rows can be keyed by it."""
        return self._presence.get(view, 0)

    def is_present(self, view: str, positions: pl.Series) -> pl.Series:
        """Whether each stored row at ``positions`` of ``view`` is present."""
        if not self._absent.get(view):
            return pl.Series([True] * positions.len(), dtype=pl.Boolean)
        return self._counts(view).gather(positions) > 0

    def present(self, view: str) -> pl.DataFrame | None:
        """The distinct rows of ``view`` present now (None before any). O(1) until a row was withdrawn."""
        rows = self.rows.get(view)
        if rows is None or not self._absent.get(view):
            return rows
        return rows.filter(self._counts(view) > 0)

    def present_positions(self, view: str) -> pl.Series:
        """The positions of :meth:`present`'s rows."""
        rows = self.rows[view]
        positions = pl.int_range(0, rows.height, dtype=pl.UInt32, eager=True)
        return positions if not self._absent.get(view) else positions.filter(self._counts(view) > 0)

    def decoded(self) -> dict[str, pl.DataFrame]:
        """Every view's present rows as values, each as often as it occurs (to replay them into another
        state: a merge of partitions is the union of their bags)."""
        replay = {}
        for name, rows in self.rows.items():
            counted = rows.with_columns(self._counts(name).alias("\0n")).filter(pl.col("\0n") > 0)
            repeated = counted.with_columns(pl.int_ranges(pl.col("\0n")).alias("\0r")).explode("\0r")
            replay[name] = decode_frame(self.dictionaries, repeated.drop("\0n", "\0r"))
        return replay

    def to_document(self) -> dict[str, Any]:
        """A document of the rows (:func:`~streamdetect.model.codecs.encode_document`: frames as they are)."""
        # Each dictionary as one list value, built in polars (no Python object per value).
        dictionaries = pl.DataFrame([values.implode().alias(name) for name, values in self.dictionaries.items()])
        return {
            "rows": dict(self.rows),
            "counts": {name: self._counts(name).to_frame() for name in self.rows},
            "logged": dict(self.logged),
            "dictionaries": dictionaries,
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any], record: bool = False) -> SeenRows:
        """Inverse of :meth:`to_document`."""
        dictionaries = as_frame(document["dictionaries"])
        counts = {name: as_frame(frame).to_series() for name, frame in document.get("counts", {}).items()}
        seen = cls(
            rows={name: as_frame(frame) for name, frame in document["rows"].items()},
            dictionaries={name: dictionaries.get_column(name).explode().alias(name) for name in dictionaries.columns},
            counts=counts,
            record=record,
            logged=dict(document.get("logged", {})),
        )
        seen._absent = {name: int((series == 0).sum()) for name, series in counts.items()}
        seen._presence = {name: next(_MARKS) for name, absent in seen._absent.items() if absent}
        return seen
