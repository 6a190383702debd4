"""initialize / update / result for the checks that are recomputed from every row per batch.

The cell procedure (selections), the key-path check and the conservative FD check have no exact
incremental form here: a new row can change every cell, matching or signature. This adapter gives
them the same explicit, serializable, mergeable state as the incremental checks (the rows seen per
view, and the table's rows for publisher-side methods), so the batch run and a stream worker call
the same code; each update recomputes the result and returns what it raised and cleared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import polars as pl

from streamdetect.checks.batch_log import BatchLog
from streamdetect.checks.findings import Delta, Finding, diff
from streamdetect.model.codecs import Encoded, as_frame, document_parts, versioned_document
from streamdetect.model.topology import ViewDefinition
from streamdetect.relational.bags import remove_occurrences

F = TypeVar("F", bound=Finding)
#: The name :attr:`RowsState.generations` counts the table's changes under (no view can have it).
TABLE = "\0table"
Compute = Callable[[Mapping[str, pl.DataFrame], pl.DataFrame | None], list[F]]


@dataclass
class RowsState:
    """Every row seen, per view, and the table's rows when the method needs them."""

    VERSION = 2
    views: dict[str, pl.DataFrame] = field(default_factory=dict)
    table: pl.DataFrame | None = None
    #: The batches taken since the last write (:mod:`streamdetect.checks.batch_log`).
    log: BatchLog = field(default_factory=BatchLog, compare=False)
    #: The findings of the rows held (with forcing views), once asked: a cache (not serialized), dropped when
    #: the rows change, so an update finds them once, not before and after, and other readers not again.
    findings: list[Any] | None = field(default=None, compare=False)
    #: Per view (and ``TABLE`` for the table), a count of the changes of its rows: what a cached answer
    #: computed from them was computed from (not serialized; the caches are not either).
    generations: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    #: What the method keeps between updates to answer again only where rows changed (not serialized).
    search: Any = field(default=None, compare=False, repr=False)

    def generation(self, name: str) -> int:
        """How many times the rows of view ``name`` (or of the table, ``TABLE``) changed in this object."""
        return self.generations.get(name, 0)

    def to_parts(self) -> Encoded:
        """Serialize (a versioned document with Arrow IPC frames), as the parts of its bytes."""
        document = {
            "version": self.VERSION,
            "views": dict(self.views),
            "table": self.table,
            "written": self.log.written,
        }
        return document_parts(document)

    def to_bytes(self) -> bytes:
        """:meth:`to_parts` joined."""
        return self.to_parts().joined()

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> RowsState:
        """Inverse of :meth:`to_bytes`; refuses a state of another version."""
        document = versioned_document(data, cls.VERSION, "rows")
        table = document["table"]
        return cls(
            views={name: as_frame(frame) for name, frame in document["views"].items()},
            table=as_frame(table) if table is not None else None,
            log=BatchLog(written=document["written"]),
        )


@dataclass(frozen=True)
class RecomputedCheck(Generic[F]):
    """A check recomputed per batch by ``compute(views, table)``, behind the incremental interface.

    ``views`` are the views ``compute`` reads: one with no rows (none published yet, or every row
    withdrawn) is given to it as an empty frame, which it reads as the view published empty. Nothing is
    found without the table's rows when ``needs_table``.
    """

    compute: Compute[F]
    views: tuple[ViewDefinition, ...]
    #: whether ``compute`` reads the private table's rows (publisher-side methods)
    needs_table: bool = False

    def initialize(self) -> RowsState:
        """No rows seen."""
        return RowsState()

    def update(
        self,
        state: RowsState,
        batch: Mapping[str, pl.DataFrame],
        table_rows: pl.DataFrame | None = None,
        retracted: Mapping[str, pl.DataFrame] | None = None,
        retracted_table: pl.DataFrame | None = None,
    ) -> Delta[F]:
        """Withdraw rows, add rows (of views, and of the table); recompute; return what was raised and
        cleared."""
        before = self.result(state) if state.views else []
        self.add(state, batch, table_rows, retracted, retracted_table)
        return diff(before, self.result(state))

    @staticmethod
    def check_retract(
        state: RowsState, retracted: Mapping[str, pl.DataFrame], retracted_table: pl.DataFrame | None
    ) -> str | None:
        """What is wrong with withdrawing these rows (one not kept), or None. Changes nothing. O(rows kept)."""
        try:
            _withdrawn(state, retracted, retracted_table)
        except ValueError as exc:
            return str(exc)
        return None

    @staticmethod
    def add(
        state: RowsState,
        batch: Mapping[str, pl.DataFrame],
        table_rows: pl.DataFrame | None = None,
        retracted: Mapping[str, pl.DataFrame] | None = None,
        retracted_table: pl.DataFrame | None = None,
    ) -> None:
        """Withdraw rows (one occurrence each, raising ``ValueError`` before any change on a row not kept),
        then keep the new rows (of views, and of the table); nothing is recomputed. O(rows kept)."""
        views, table = _withdrawn(state, retracted or {}, retracted_table)
        changed = {name for name, frame in (retracted or {}).items() if frame.height}
        if retracted_table is not None and retracted_table.height:
            changed.add(TABLE)
        state.views, state.table = views, table
        for name, frame in batch.items():
            old = state.views.get(name)
            state.views[name] = frame if old is None else pl.concat([old, frame])
            if frame.height or old is None:
                changed.add(name)
        if table_rows is not None:
            if table_rows.height or state.table is None:
                changed.add(TABLE)
            state.table = table_rows if state.table is None else pl.concat([state.table, table_rows])
        for name in changed:
            state.generations[name] = state.generation(name) + 1

    def result(self, state: RowsState) -> list[F]:
        """The findings for every row seen (none without the table's rows when ``needs_table``)."""
        if self.needs_table and state.table is None:
            return []
        return self.compute(frames_of(self.views, state.views), state.table)

    def merge(self, state: RowsState, other: RowsState) -> Delta[F]:
        """Fold another partition's rows in."""
        return self.update(state, other.views, other.table)


def frames_of(views: Sequence[ViewDefinition], kept: Mapping[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """The distinct rows kept of each view, an empty frame for a view with none (its columns typed as
    another view's frame types them, else null-typed: an empty frame is never joined)."""
    types = {name: dtype for frame in kept.values() for name, dtype in frame.schema.items()}
    frames = {}
    for view in views:
        frame = kept.get(view.name)
        if frame is None:
            frame = pl.DataFrame(schema={a: types.get(a, pl.Null) for a in view.attributes})
        frames[view.name] = frame.unique()
    return frames


def _withdrawn(
    state: RowsState, retracted: Mapping[str, pl.DataFrame], retracted_table: pl.DataFrame | None
) -> tuple[dict[str, pl.DataFrame], pl.DataFrame | None]:
    """The state's views and table with the withdrawn rows taken out (bags); the state is unchanged."""
    views = dict(state.views)
    for name, frame in retracted.items():
        if frame.height:
            kept = views.get(name)
            if kept is None:
                raise ValueError(f"withdraws {frame.height} row(s) of view {name!r}, which has published none")
            views[name] = remove_occurrences(kept, frame.select(kept.columns), f"view {name!r}")
    table = state.table
    if retracted_table is not None and retracted_table.height:
        if table is None:
            raise ValueError(f"withdraws {retracted_table.height} row(s) of the table, which has none")
        table = remove_occurrences(table, retracted_table.select(table.columns), "the table")
    return views, table
