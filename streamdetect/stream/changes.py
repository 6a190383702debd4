"""The private table's changes, as Debezium's PostgreSQL connector writes them, turned into the records of
the table's topic and of every view's: an insert adds the row, a delete withdraws it, an update withdraws
its old image and adds its new one, in the table and in each view whose selection keeps them (a view's
row is the projection of the table's).

A run of changes is translated at once and netted per topic: a row added and withdrawn within the run
comes to nothing, and an update that changes neither a view's projection nor what its selection keeps
sends that view nothing. So every withdrawal names a row published before the run, and the checks see
the table as it is after the run (the states between are never observed).

Debezium delivers at least once: after a connector restart it sends again the changes after the last
position it stored. Each change carries its position in the write-ahead log, ``source.sequence`` (the
last commit's LSN and the change's), increasing in the order Debezium sends them; a change at or before
the last one translated is one sent again, and is skipped. The rows of the initial snapshot all carry the
snapshot's position; a snapshot taken again (a connector stopped during its first one) cannot be told
apart from the first, so it stops the translation with an error instead of counting rows twice.

Values come as Debezium's JSON writes them without schemas: text as strings, integers as numbers,
``numeric`` as doubles (``decimal.handling.mode=double``) and dates as days since 1970-01-01.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from streamdetect.errors import StreamdetectError
from streamdetect.model.predicates import to_polars
from streamdetect.model.topology import Topology, ViewDefinition

#: A position in the write-ahead log as Debezium gives it: (the last commit's LSN, or -1; the change's LSN).
Sequence_ = tuple[int, int]
_SIGN = "\0sign"


class ChangeError(StreamdetectError):
    """A change the translation cannot take without losing or counting twice a row: says why, and what to do."""


@dataclass(frozen=True)
class Change:
    """One change of the table: ``op`` (``c`` insert, ``u`` update, ``d`` delete, ``r`` a snapshot's row),
    its old and new images (columns by name), its position, whether it is a snapshot's row and which
    (``first``, ``true``, ``last``...), and when it was committed (milliseconds since the epoch)."""

    op: str
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None
    sequence: Sequence_
    snapshot: str
    committed_ms: int


def read_change(value: bytes | None) -> Change | None:
    """A Debezium change event (JSON, no schema); None for a tombstone. Raises :class:`ChangeError` for a
    truncation or an event it cannot read."""
    if value is None:
        return None
    try:
        event = json.loads(value)
        op = event["op"]
        source = event["source"]
        last, current = json.loads(source["sequence"]) if source.get("sequence") else (None, source["lsn"])
        sequence = (int(last) if last is not None else -1, int(current))
        snapshot = str(source.get("snapshot") or "false")
        committed = int(source.get("ts_ms") or event.get("ts_ms") or 0)
    except (ValueError, KeyError, TypeError) as exc:
        raise ChangeError(f"not a Debezium change event ({type(exc).__name__}: {exc})") from None
    if op == "t":
        raise ChangeError(
            "the table was truncated: its rows were withdrawn without their images, so the views cannot follow; "
            "start the capture again from a new snapshot (docs/streaming.md, 'The table's changes')"
        )
    if op not in ("c", "u", "d", "r"):
        raise ChangeError(f"unknown change operation {op!r}")
    return Change(op, event.get("before"), event.get("after"), sequence, snapshot, committed)


@dataclass
class Progress:
    """Where the translation stands: the position of the last change translated, and the snapshot's
    state (``none`` seen, ``started``, ``done``). Kept with the offsets the capture commits."""

    sequence: Sequence_ | None = None
    snapshot: str = "none"

    def to_json(self) -> dict[str, Any]:
        return {"seq": list(self.sequence) if self.sequence is not None else None, "snap": self.snapshot}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Progress:
        sequence = document.get("seq")
        position = (int(sequence[0]), int(sequence[1])) if sequence is not None else None
        return cls(position, str(document.get("snap", "none")))


@dataclass(frozen=True)
class Translated:
    """Per target (a view's name, or None for the table), the rows withdrawn and the rows added by a run
    of changes, netted; the changes taken and those skipped as sent again."""

    rows: dict[str | None, tuple[pl.DataFrame, pl.DataFrame]]
    taken: int
    skipped: int
    committed_ms: int | None


class ChangeTranslator:
    """Turns runs of the table's changes into withdrawn and added rows of the table and of ``views``.

    ``columns`` maps each table attribute to the database column it is read from; ``dtypes`` gives the
    attribute's type (the declared one, else the database's). ``with_table``: the table's own rows are a
    target too (a configured check reads them)."""

    def __init__(
        self,
        topology: Topology,
        columns: Mapping[str, str],
        dtypes: Mapping[str, pl.DataType],
        *,
        views: Sequence[ViewDefinition] | None = None,
        with_table: bool = False,
    ) -> None:
        self.attributes = topology.table.attributes
        self.columns = dict(columns)
        self.schema = pl.Schema({attribute: dtypes[attribute] for attribute in self.attributes})
        self.views = tuple(topology.views if views is None else views)
        self.with_table = with_table
        self.table_name = topology.table.name
        self._selections = {
            view.name: to_polars(view.where, self.schema).fill_null(False)
            for view in self.views
            if view.where is not None
        }

    def translate(self, changes: Sequence[Change], progress: Progress) -> Translated:
        """The run's rows per target; ``progress`` is advanced past the changes taken. Raises
        :class:`ChangeError` for a snapshot taken again, an incremental snapshot, or an old image missing."""
        withdrawn: list[Mapping[str, Any]] = []
        added: list[Mapping[str, Any]] = []
        taken = skipped = 0
        committed: int | None = None
        for change in changes:
            if not self._fresh(change, progress):
                skipped += 1
                continue
            taken += 1
            committed = change.committed_ms
            if change.op in ("u", "d"):
                withdrawn.append(self._image(change.before, change))
            if change.op in ("c", "u", "r"):
                added.append(self._image(change.after, change))
        old, new = self._frame(withdrawn), self._frame(added)
        rows: dict[str | None, tuple[pl.DataFrame, pl.DataFrame]] = {}
        if self.with_table:
            rows[None] = _netted(old, new, self.attributes)
        for view in self.views:
            selection = self._selections.get(view.name)
            kept_old = old.filter(selection) if selection is not None else old
            kept_new = new.filter(selection) if selection is not None else new
            projected = (kept_old.select(view.attributes), kept_new.select(view.attributes))
            rows[view.name] = _netted(*projected, view.attributes)
        return Translated(rows, taken, skipped, committed)

    def _fresh(self, change: Change, progress: Progress) -> bool:
        """Whether ``change`` is to be translated (not one sent again), advancing ``progress``."""
        if change.snapshot == "incremental":
            raise ChangeError(
                "an incremental snapshot sends rows the views already hold: the capture does not take "
                "Debezium's incremental snapshots (signals)"
            )
        if change.snapshot != "false":
            if progress.snapshot == "done" or (change.snapshot == "first" and progress.snapshot == "started"):
                raise ChangeError(
                    f"the connector took its snapshot of {self.table_name!r} again (it was stopped during the "
                    "first, or its offsets were lost): rows would count twice. Start over: stop the capture and "
                    "the connector, forget them (`streamdetect connect stop --forget`) and the view topics, "
                    "then start again"
                )
            progress.snapshot = "done" if change.snapshot == "last" else "started"
            progress.sequence = max(progress.sequence or change.sequence, change.sequence)
            return True
        if progress.sequence is not None and change.sequence <= progress.sequence:
            return False
        progress.snapshot = "done"
        progress.sequence = change.sequence
        return True

    def _image(self, image: Mapping[str, Any] | None, change: Change) -> Mapping[str, Any]:
        if image is None or any(column not in image for column in self.columns.values()):
            kind = {"u": "an update", "d": "a delete"}.get(change.op, "a change")
            raise ChangeError(
                f"{kind} of {self.table_name!r} came without the row's whole old image, so its rows cannot be "
                f"withdrawn: run ALTER TABLE {self.table_name} REPLICA IDENTITY FULL (then start the capture "
                "again from a new snapshot)"
            )
        return image

    def _frame(self, images: list[Mapping[str, Any]]) -> pl.DataFrame:
        """The images as rows of the table's attributes, typed (dates from their day numbers)."""
        data = {attribute: [image[column] for image in images] for attribute, column in self.columns.items()}
        frame = pl.DataFrame(data, schema={a: _carried(dtype) for a, dtype in self.schema.items()}, strict=False)
        return frame.cast(self.schema, strict=True).select(self.attributes)


def _carried(dtype: pl.DataType) -> pl.DataType:
    """The type Debezium's JSON carries a value of ``dtype`` in: a date as its day number."""
    return pl.Int32() if dtype == pl.Date() else dtype


def _netted(
    withdrawn: pl.DataFrame, added: pl.DataFrame, attributes: Sequence[str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The rows withdrawn and added once the run's additions and withdrawals of equal rows cancel out."""
    if withdrawn.is_empty() or added.is_empty():
        return withdrawn, added
    signed = pl.concat([withdrawn.with_columns(pl.lit(-1).alias(_SIGN)), added.with_columns(pl.lit(1).alias(_SIGN))])
    net = signed.group_by(list(attributes), maintain_order=True).agg(pl.col(_SIGN).sum())
    return _repeated(net.filter(pl.col(_SIGN) < 0), -1), _repeated(net.filter(pl.col(_SIGN) > 0), 1)


def _repeated(counted: pl.DataFrame, sign: int) -> pl.DataFrame:
    """Each row as many times as its count says."""
    if counted.is_empty():
        return counted.drop(_SIGN)
    times = (pl.col(_SIGN) * sign).cast(pl.UInt32)
    return counted.select(pl.exclude(_SIGN).repeat_by(times).explode())
