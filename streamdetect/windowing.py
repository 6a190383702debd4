"""Time windows: rows are joined only with rows published less than ``window`` before the latest one.

Dou & Coulondre (section 5) leave detection over time intervals as future work; a topology may give an
optional ``window`` in the topology (``window: 30d``) that limits which publications can be joined,
rows leaving the window being withdrawn through the engine's retraction path. The reading implemented
(docs/design.md, "Time windows"):

* Time is **publication time** (event time), carried by each batch (``Batch.published``, the record's
  timestamp), never the wall clock: the same records give the same findings whenever and however often
  they are replayed, in ``check``, ``bench`` and the worker alike. *Now* is the latest publication time
  folded in; a quiet stream keeps its findings until the next publication moves time on.
* A row published at ``p`` is in the window at time ``t`` while ``t - p < window``. When a batch moves
  *now* forward, every publication with ``p <= now - window`` leaves: its rows still present are
  withdrawn in the same batch (findings they completed are cleared in that batch's delta).
* A batch published already outside the window (``p <= now - window``, a late record) adds nothing: its
  rows could be joined with nothing still present.
* A withdrawal (``op: retract``) takes back the oldest present occurrence of each row of the view;
  withdrawn rows with no present occurrence (they left the window already) are ignored, as their
  withdrawal holds.
* A batch without a publication time (``check`` over files: one publication) is published at *now*.

The open findings after a set of batches depend on the set, not on the order they are folded in (the
publications present are those with ``p > max p - window``), which is what lets several workers, each
folding its records in its own order, agree with one Detector.

State: the publications present, each with its time, view and present rows, plus *now*; it is written
as keyed pieces (``meta``, one per publication: written when it arrives or loses rows, emptied when it
leaves), so a changelog write carries what changed. Cost per batch: O(rows of the batch and of the
publications leaving) plus O(publications present of the view) for a withdrawal; publications are kept
in time order (an append when times arrive in order).
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from streamdetect.model.batch import Batch
from streamdetect.model.codecs import as_frame, frame_from_ipc, frame_to_ipc

#: Version of the window's state pieces and snapshot document.
WINDOW_VERSION = 1
META = "meta"
_SEQ = "\0seq"
_POS = "\0pos"
_OCC = "\0occ"


@dataclass(frozen=True)
class Publication:
    """Rows of one view published at one time, still in the window."""

    time: float
    view: str
    rows: pl.DataFrame


@dataclass
class Step:
    """What a batch does to the window, computed before anything changes: the batch the checks fold in
    (the given one with the rows leaving the window withdrawn, withdrawals matched to present rows, late
    rows dropped) and the window's state after it."""

    batch: Batch
    now: float
    leaving: list[tuple[float, int]]
    reduced: dict[int, pl.DataFrame]
    arriving: list[Publication]


@dataclass
class Window:
    """The publications present in a window of ``seconds`` (module docstring)."""

    seconds: float
    now: float | None = None
    publications: dict[int, Publication] = field(default_factory=dict)
    #: (time, number) of every publication present, sorted: those leaving are a prefix.
    order: list[tuple[float, int]] = field(default_factory=list)
    next_number: int = 0
    changed: set[int] = field(default_factory=set)
    meta_changed: bool = False

    def step(self, batch: Batch, attributes: Mapping[str, Sequence[str]]) -> Step:
        """The step ``batch`` takes (nothing changes until :meth:`commit`). ``attributes``: each view's
        attributes, in the order the frames are put together. O(rows of the batch and of the publications
        leaving, plus publications present of a view withdrawn from)."""
        published = batch.published if batch.published is not None else (self.now if self.now is not None else 0.0)
        now = published if self.now is None else max(self.now, published)
        horizon = now - self.seconds
        cut = bisect.bisect_right(self.order, (horizon, math.inf))
        leaving = self.order[:cut]
        withdrawn: dict[str, list[pl.DataFrame]] = {}
        for _, number in leaving:
            publication = self.publications[number]
            withdrawn.setdefault(publication.view, []).append(publication.rows.select(attributes[publication.view]))
        reduced: dict[int, pl.DataFrame] = {}
        for view, rows in batch.retracted.items():
            if rows.height:
                present = [(n, self.publications[n]) for _, n in self.order[cut:] if self.publications[n].view == view]
                matched, remaining = _take_oldest(present, rows, list(attributes[view]))
                reduced |= remaining
                if matched.height:
                    withdrawn.setdefault(view, []).append(matched)
        arriving = [
            Publication(published, view, rows)
            for view, rows in batch.views.items()
            if rows.height and published > horizon
        ]
        folded = dataclasses.replace(
            batch,
            views={p.view: p.rows for p in arriving},
            retracted={view: pl.concat(frames, how="vertical_relaxed") for view, frames in withdrawn.items()},
        )
        return Step(folded, now, leaving, reduced, arriving)

    def commit(self, step: Step) -> None:
        """Make ``step`` the window's state (after the checks folded its batch in)."""
        if step.now != self.now:
            self.now = step.now
            self.meta_changed = True
        for _, number in step.leaving:
            del self.publications[number]
            self.changed.add(number)
        del self.order[: len(step.leaving)]
        for number, rows in step.reduced.items():
            publication = self.publications[number]
            if rows.height:
                self.publications[number] = dataclasses.replace(publication, rows=rows)
            else:
                del self.publications[number]
                self.order.remove((publication.time, number))
            self.changed.add(number)
        for publication in step.arriving:
            number = self.next_number
            self.next_number += 1
            self.meta_changed = True
            self.publications[number] = publication
            bisect.insort(self.order, (publication.time, number))
            self.changed.add(number)

    def changes(self) -> dict[str, bytes]:
        """The pieces written since the last call: ``meta`` (now, the next number) and one per publication
        that arrived, lost rows or left (empty bytes: gone)."""
        pieces: dict[str, bytes] = {}
        if self.meta_changed:
            meta = {"version": WINDOW_VERSION, "now": self.now, "next": self.next_number}
            pieces[META] = json.dumps(meta).encode()
        for number in sorted(self.changed):
            publication = self.publications.get(number)
            pieces[f"{number:012d}"] = b"" if publication is None else _piece(publication)
        self.changed.clear()
        self.meta_changed = False
        return pieces

    def apply_changes(self, pieces: Mapping[str, bytes]) -> None:
        """Bring the window up to another's from its :meth:`changes` (in order). Raises ``ValueError`` on a
        piece of another version."""
        for key, piece in pieces.items():
            if key == META:
                meta = json.loads(piece)
                if meta.get("version") != WINDOW_VERSION:
                    raise ValueError(
                        f"window state version {meta.get('version')!r}; this version reads {WINDOW_VERSION}"
                    )
                self.now, self.next_number = meta["now"], int(meta["next"])
            elif piece:
                self.publications[int(key)] = _from_piece(piece)
            else:
                self.publications.pop(int(key), None)
        self.order = _order(self.publications)

    def to_document(self) -> dict[str, Any]:
        """The whole window, for a snapshot (a document: its publications' rows as frames)."""
        return {
            "version": WINDOW_VERSION,
            "now": self.now,
            "next": self.next_number,
            "publications": [
                [number, publication.time, publication.view, publication.rows]
                for number, publication in self.publications.items()
            ],
        }

    @classmethod
    def from_document(cls, seconds: float, document: Mapping[str, Any]) -> Window:
        """Inverse of :meth:`to_document`; ``ValueError`` for another version."""
        _versioned(document)
        window = cls(seconds, now=document["now"], next_number=int(document["next"]))
        for number, time, view, rows in document["publications"]:
            window.publications[int(number)] = Publication(float(time), str(view), as_frame(rows))
        window.order = _order(window.publications)
        return window


def _order(publications: Mapping[int, Publication]) -> list[tuple[float, int]]:
    """(time, number) of each publication, sorted: the window's order (those leaving first)."""
    return sorted((publication.time, number) for number, publication in publications.items())


def _take_oldest(
    present: list[tuple[int, Publication]], withdrawn: pl.DataFrame, columns: list[str]
) -> tuple[pl.DataFrame, dict[int, pl.DataFrame]]:
    """Match each withdrawn row to the oldest present occurrence of it (bags: the i-th withdrawal of a
    row takes its i-th occurrence in time order); the rows matched, and the remaining rows of each
    publication that lost some. Rows without a present occurrence are left out. O(n) hash joins."""
    if not present:
        return withdrawn.clear().select(columns), {}
    stacked = pl.concat(
        [
            p.rows.select(columns).with_columns(
                pl.lit(number, dtype=pl.Int64).alias(_SEQ), pl.int_range(pl.len()).alias(_POS)
            )
            for number, p in present
        ],
        how="vertical_relaxed",
    )
    occurrences = pl.int_range(pl.len()).over(columns)
    stacked = stacked.with_columns(occurrences.alias(_OCC))
    wanted = withdrawn.select(columns).with_columns(occurrences.alias(_OCC))
    taken = stacked.join(wanted, on=[*columns, _OCC], how="semi", nulls_equal=True)
    remaining: dict[int, pl.DataFrame] = {}
    by_number = dict(present)
    for number in taken.get_column(_SEQ).unique().to_list():
        positions = taken.filter(pl.col(_SEQ) == number).get_column(_POS).cast(pl.UInt32)
        rows = by_number[number].rows
        remaining[number] = rows.with_row_index(_POS).filter(~pl.col(_POS).is_in(positions.implode())).drop(_POS)
    return taken.select(columns), remaining


def _piece(publication: Publication) -> bytes:
    header = json.dumps({"version": WINDOW_VERSION, "time": publication.time, "view": publication.view})
    return header.encode() + b"\n" + frame_to_ipc(publication.rows)


def _from_piece(piece: bytes) -> Publication:
    header, _, rows = piece.partition(b"\n")
    meta = _versioned(json.loads(header))
    return Publication(float(meta["time"]), str(meta["view"]), frame_from_ipc(rows))


def _versioned(document: Any) -> Mapping[str, Any]:
    if not isinstance(document, Mapping) or document.get("version") != WINDOW_VERSION:
        found = document.get("version") if isinstance(document, Mapping) else None
        raise ValueError(f"window state version {found!r}; this version reads {WINDOW_VERSION}")
    return document
