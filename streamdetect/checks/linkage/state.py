"""The linkage check's state: rows kept per view, capped linked sets per task, and the caches beside them.

``LinkageState`` is what is serialized (the rows as bags, the capped (identifier, sensitive) code pairs
per (channel, identifier, sensitive) task) and written as keyed, append-only pieces; ``TaskSets``, kept
projections and their unsaturated forms are caches derived from it, rebuilt after a restore or a
withdrawal. The algorithms that update it are in :mod:`streamdetect.checks.linkage`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import polars as pl

from streamdetect.checks.findings import LinkageFinding
from streamdetect.checks.seen_rows import SeenRows
from streamdetect.model.codecs import (
    Encoded,
    as_frame,
    document_parts,
    frame_from_ipc,
    frame_to_ipc,
    versioned_document,
)
from streamdetect.relational.code_arrays import indices
from streamdetect.relational.linked_values import KeptCaps, Plan

#: One boolean per dictionary code (indexed by code).
Flags = npt.NDArray[np.bool_]
#: A task's key: (channel views, identifier attribute, sensitive attribute).
TaskKey = tuple[tuple[str, ...], str, str]


def _task_name(key: TaskKey) -> str:
    """A task's key as the text of its state pieces' names (JSON: channel views, identifier, sensitive)."""
    return json.dumps([list(key[0]), key[1], key[2]])


def _continues(key: str, have: int, start: int) -> None:
    if have != start:
        raise ValueError(f"state piece {key!r} starts at {start} but the state holds {have}: a piece is missing")


@dataclass(frozen=True)
class KeptProjection:
    """A view's distinct rows present on some attributes, as of ``version`` of the view; ``build`` stays
    the same while the frame only grows by appended rows (a rebuild, after a withdrawal, renumbers)."""

    version: tuple[int, int, int]
    frame: pl.DataFrame
    build: int


@dataclass(frozen=True)
class Unsaturated:
    """A kept projection without the saturated codes: of which build, up to which row, having left out
    how many saturated codes."""

    build: int
    rows: int
    left_out: int
    frame: pl.DataFrame


class CodeFlags:
    """A boolean per dictionary code, grown as the dictionary grows (capacity doubles: amortised O(1) per
    code). A numpy array, not a polars Series: a stream update reads and sets a few codes of it a few
    hundred times, and a Series gather or scatter is a query (60-80 us each here) where numpy indexing
    costs a few microseconds."""

    __slots__ = ("_flags", "size", "version")

    def __init__(self) -> None:
        self._flags = np.zeros(0, dtype=np.bool_)
        self.size = 0
        #: Counts the changes (a flag set, the size grown): what was derived from the flags at one version
        #: holds while it stays.
        self.version = 0

    def fit(self, size: int) -> CodeFlags:
        """Cover codes below ``size`` (codes new since are false); returns self."""
        if size > self._flags.size:
            grown = np.zeros(max(size, 2 * self._flags.size), dtype=np.bool_)
            grown[: self.size] = self._flags[: self.size]
            self._flags = grown
        if size > self.size:
            self.size = size
            self.version += 1
        return self

    @property
    def flags(self) -> Flags:
        """The flags of codes below :attr:`size` (a view: writes go through)."""
        return self._flags[: self.size]

    def at(self, codes: pl.Series) -> Flags:
        """The flags of ``codes`` (each below :attr:`size`), in their order. O(len(codes))."""
        picked: Flags = self._flags[indices(codes.to_numpy())]
        return picked

    def set(self, codes: pl.Series, value: bool) -> None:
        """Set the flags of ``codes`` (each below :attr:`size`). O(len(codes))."""
        self._flags[indices(codes.to_numpy())] = value
        self.version += 1


def where(codes: pl.Series, flags: Flags) -> pl.Series:
    """``codes`` whose flag in ``flags`` (indexed by code) is true."""
    picked = codes.to_numpy()
    return pl.Series(codes.name, picked[flags[indices(picked)]], dtype=codes.dtype)


#: Up to this many rows a frame's rows are picked by a gather of their positions, above by a filter.
_GATHER_ROWS = 5_000


def rows_where(frame: pl.DataFrame, mask: Flags) -> pl.DataFrame:
    """``frame``'s rows where ``mask`` (one flag per row) is true. A gather of the positions when they are
    a few thousand (40-80 us here, where a filter is a query of 110-170 us); a filter when more are kept,
    where it is faster. ``frame`` itself when every flag is true."""
    kept = int(np.count_nonzero(mask))
    if kept == frame.height:
        return frame
    if kept <= _GATHER_ROWS:
        return frame[np.flatnonzero(mask)]
    return frame.filter(pl.Series(mask))


@dataclass
class TaskSets:
    """One task's capped sets split for updates (derived from the linked pairs; a cache).

    ``saturated``: the identifier codes whose set holds k values. With rows only arriving such a set never
    changes, so a delta join leaves these values out from the start (append-only while rows arrive).
    ``partial``: the pairs of the other codes, each below k: the disclosed values, and the only sets a
    delta can still grow, so merging a delta and diffing findings read these, not every pair.
    ``mask``: the same codes as a boolean per code.
    ``filtered``: per view holding the identifier, its kept projection without the saturated codes.
    """

    saturated: pl.DataFrame
    partial: pl.DataFrame
    #: Per identifier code, whether it is saturated: a delta is checked in O(delta), not by a hash join.
    mask: CodeFlags = field(default_factory=CodeFlags)
    filtered: dict[str, Unsaturated] = field(default_factory=dict)
    #: Per identifier code, whether it has pairs in ``partial`` (a merge or a diff that reaches none of
    #: them skips its join with the partial pairs); None until first read.
    holding: CodeFlags | None = None


@dataclass
class LinkageState:
    """The check's state, mutated by updates.

    ``seen``: the distinct rows per view, dictionary-encoded; ``linked``: per task, the capped linked
    sets as (identifier code, sensitive code) pairs.
    """

    VERSION = 4
    seen: SeenRows = field(default_factory=lambda: SeenRows(record=True))
    linked: dict[TaskKey, pl.DataFrame] = field(default_factory=dict)
    #: The open findings by subject: a cache of :meth:`LinkageCheck.result`, so that an update diffs only
    #: the identifier values it touched. Not serialized (rebuilt on the first update after a restore).
    open: dict[tuple[object, ...], LinkageFinding] | None = field(default=None, compare=False)
    #: Per (E, S, component of the views), the identifier codes with k linked values in the component's
    #: whole join: never disclosed in it while rows only arrive (``beyond.py``). A cache, not serialized,
    #: dropped by a withdrawal and by applied pieces.
    settled: dict[tuple[str, str, frozenset[str]], npt.NDArray[np.uint32]] = field(default_factory=dict, compare=False)
    #: Pairs appended to each task's linked set since the last :meth:`take_changes`.
    journal: dict[TaskKey, list[pl.DataFrame]] = field(default_factory=dict, compare=False)
    #: What :meth:`take_changes` has handed out: rows per view, values per dictionary, pairs per task.
    marks: dict[str, int] = field(default_factory=dict, compare=False)
    #: Per task, the identifier codes whose linked sets a withdrawal dropped since the last
    #: :meth:`take_changes` (their recomputed pairs are in the journal).
    unlinked: dict[TaskKey, list[pl.Series]] = field(default_factory=dict, compare=False)
    #: Per task, its capped sets split by saturation (:class:`TaskSets`): a cache, not serialized.
    sets: dict[TaskKey, TaskSets] = field(default_factory=dict, compare=False)
    #: Per (task, changed view, delta size class, the other relations' size classes), the elimination order
    #: of its joins: recorded once, replayed after.
    plans: dict[tuple[TaskKey, str, int, tuple[int, ...]], Plan] = field(default_factory=dict, compare=False)
    #: Capped relations of kept projections, while the projection is unchanged (a cache).
    caps: KeptCaps = field(default_factory=KeptCaps, compare=False)
    #: Per (view, attributes), the distinct rows present projected, with the view's version: a cache.
    projections: dict[tuple[str, tuple[str, ...]], KeptProjection] = field(default_factory=dict, compare=False)
    #: Projections built from scratch so far: numbers each build, so that a projection grown by appends
    #: keeps its number (what was derived from a prefix of it can be carried forward).
    builds: int = field(default=0, compare=False)
    #: Per task, its live codes (LinkageCheck._live) with the masks and their versions they were read
    #: from: a cache, the same array while no mask changes.
    live: dict[TaskKey, tuple[tuple[tuple[CodeFlags, int], ...], Flags | None]] = field(
        default_factory=dict, compare=False
    )
    #: Per (task, view), a kept projection restricted to the task's live codes, with the projection and
    #: the live array it was read from (both the same objects: the restriction holds).
    live_rows: dict[tuple[TaskKey, str], tuple[pl.DataFrame, Flags, pl.DataFrame]] = field(
        default_factory=dict, compare=False
    )

    def take_changes(self) -> dict[str, bytes]:
        """The state's growth since the last call, as keyed, append-only pieces (Arrow IPC bytes).

        A key names what grew and from which position (``rows/<view>/<from>``, ``values/<attribute>/<from>``,
        ``occurrences/<view>/<from>`` for count changes, ``linked/<task>/<from>``), so pieces are never
        overwritten: a Faust changelog or a checkpoint writes per batch what the batch added, not the whole
        state. A withdrawal rewrites the linked sets of the identifier values it reaches: those codes are
        written as ``unlinked/<task>/<n>`` (the n-th such piece of the task), their recomputed pairs go with
        the task's appended ones; applying drops the codes' pairs, then appends. :meth:`apply_changes`
        replays them in order. O(size of the pieces): a withdrawal writes what it reached, not the sets.
        """
        pieces: dict[str, bytes] = {}
        for attribute, values in self.seen.dictionaries.items():
            self._piece(pieces, f"values/{attribute}", values.to_frame())
        for view, rows in self.seen.rows.items():
            self._piece(pieces, f"rows/{view}", rows)
            events = self.seen.take_events(view)
            if events is not None:
                name = f"occurrences/{view}"
                start = self.marks.get(name, 0)
                pieces[f"{name}/{start:012d}"] = frame_to_ipc(events)
                self.marks[name] = start + events.height
        for key, codes in self.unlinked.items():
            name = f"unlinked/{_task_name(key)}"
            count = self.marks.get(name, 0)
            pieces[f"{name}/{count:012d}"] = frame_to_ipc(pl.concat(codes).unique().to_frame())
            self.marks[name] = count + 1
        self.unlinked.clear()
        for key, frames in self.journal.items():
            name = f"linked/{_task_name(key)}"
            appended = pl.concat(frames)
            # After dropping the unlinked codes' pairs, the set holds what it holds now minus the appends.
            start = self.linked[key].height - appended.height
            pieces[f"{name}/{start:012d}"] = frame_to_ipc(appended)
            self.marks[name] = self.linked[key].height
        self.journal.clear()
        return pieces

    def _piece(self, pieces: dict[str, bytes], name: str, frame: pl.DataFrame) -> None:
        start = self.marks.get(name, 0)
        # Written once even when empty: a dictionary of an attribute whose values were all null so far
        # must exist in a replica too (its lookups expect every attribute seen).
        if frame.height > start or name not in self.marks:
            pieces[f"{name}/{start:012d}"] = frame_to_ipc(frame.slice(start))
            self.marks[name] = frame.height

    def apply_changes(self, pieces: Mapping[str, bytes]) -> None:
        """Append pieces of :meth:`take_changes` (of another state, in order of their keys' positions).

        Raises ``ValueError`` on a piece that does not continue what this state holds (a gap).
        """
        kinds = {"values": 0, "rows": 1, "occurrences": 2, "unlinked": 3, "linked": 4}
        ordered = sorted(pieces.items(), key=lambda item: (kinds[item[0].split("/", 1)[0]], item[0]))
        for key, data in ordered:
            kind, rest = key.split("/", 1)
            name, start = rest.rsplit("/", 1)
            frame = frame_from_ipc(data)
            if kind == "values":
                current = self.seen.dictionaries.get(name)
                have = 0 if current is None else current.len()
                _continues(key, have, int(start))
                values = frame.to_series()
                self.seen.dictionaries[name] = values if current is None else pl.concat([current, values])
            elif kind == "rows":
                _continues(key, self.seen.rows[name].height if name in self.seen.rows else 0, int(start))
                self.seen.append_rows(name, frame)
            elif kind == "occurrences":
                _continues(key, self.seen.logged.get(name, 0), int(start))
                self.seen.apply_events(name, frame)
                self.marks[f"occurrences/{name}"] = self.seen.logged[name]
                continue
            elif kind == "unlinked":
                views, identifier, sensitive = json.loads(name)
                task = (tuple(views), identifier, sensitive)
                _continues(key, self.marks.get(f"unlinked/{name}", 0), int(start))
                self.linked[task] = self.linked[task].filter(~pl.col(identifier).is_in(frame.to_series().implode()))
                self.marks[f"unlinked/{name}"] = int(start) + 1
                continue
            else:
                views, identifier, sensitive = json.loads(name)
                task = (tuple(views), identifier, sensitive)
                linked = self.linked.get(task)
                _continues(key, 0 if linked is None else linked.height, int(start))
                self.linked[task] = frame if linked is None else pl.concat([linked, frame])
            self.marks[f"{kind}/{name}"] = self.marks.get(f"{kind}/{name}", 0) + frame.height
        self.sets.clear()
        # An unlinked piece shrinks a set, so a task's mark is its height, not the sum of its pieces.
        for task_key, pairs in self.linked.items():
            self.marks[f"linked/{_task_name(task_key)}"] = pairs.height
        self.open = None
        self.settled.clear()

    def to_parts(self) -> Encoded:
        """Serialize (a versioned document with Arrow IPC frames) as the parts of its bytes, for Faust tables and
        checkpoints (a snapshot splices them in)."""
        document = {
            "version": self.VERSION,
            "seen": self.seen.to_document(),
            "linked": [[list(key[0]), key[1], key[2], frame] for key, frame in self.linked.items()],
            "unlinked": {key: value for key, value in self.marks.items() if key.startswith("unlinked/")},
        }
        return document_parts(document)

    def to_bytes(self) -> bytes:
        """:meth:`to_parts` joined."""
        return self.to_parts().joined()

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> LinkageState:
        """Inverse of :meth:`to_bytes`; refuses a state of another version."""
        document = versioned_document(data, cls.VERSION, "linkage")
        state = cls(
            seen=SeenRows.from_document(document["seen"], record=True),
            linked={(tuple(views), e, s): as_frame(frame) for views, e, s, frame in document["linked"]},
        )
        # A restored state has written everything it holds: pieces resume from here.
        state.marks = {f"values/{a}": values.len() for a, values in state.seen.dictionaries.items()}
        state.marks |= {f"rows/{view}": rows.height for view, rows in state.seen.rows.items()}
        state.marks |= {f"occurrences/{view}": count for view, count in state.seen.logged.items()}
        state.marks |= document["unlinked"]
        state.marks |= {f"linked/{_task_name(key)}": frame.height for key, frame in state.linked.items()}
        return state
