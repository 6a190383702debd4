"""The Detector: every check a topology configures, with their states, fed batch by batch.

It is what ``streamdetect check`` (one batch with every row), ``explain``, ``bench`` and the streaming
worker call. Pure: frames in, findings out. Each check follows :mod:`streamdetect.checks.protocol`, built
from :mod:`streamdetect.checks.registry`; nothing here switches on check names.

* ``update(batch)`` is atomic as far as the batch's validity goes: a batch naming an unknown view,
  missing or adding columns, changing a column's type, or retracting rows a check cannot take back
  changes nothing.
* With a ``window`` in the topology, a :class:`~streamdetect.windowing.Window` keeps the publications
  that can still be joined and turns each batch into the one the checks fold in (rows leaving the window
  withdrawn); its state is written and restored with the checks'.
* ``snapshot()``/``restore()`` carry a *fingerprint* of the topology, the checks with their thresholds,
  the closure bound and the state versions; a snapshot restored under other parameters is refused
  (a state built for k = 2 caps its sets at 2 values and would give wrong answers for k = 5).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from streamdetect.check_plan import SNAPSHOT_VERSION, CheckPlan, plan_checks
from streamdetect.checks.findings import Delta
from streamdetect.checks.protocol import Check, CheckSummary, KeepsRows, ProgressFactory
from streamdetect.errors import StateError, TopologyError, UnsupportedCase
from streamdetect.model.batch import Batch
from streamdetect.model.codecs import Encoded, as_bytes, as_frame, decode_document, document_parts
from streamdetect.model.topology import Topology
from streamdetect.windowing import Step, Window

#: The prefix of the window's state pieces (no check has this name).
WINDOW_KEY = "window"
#: The prefix of the pieces that say which inputs have arrived (``inputs/table``: a batch of the table).
INPUTS_KEY = "inputs"
#: What a check that reads the private table lacks until a batch of it arrives.
NO_TABLE = "no row of the private table has arrived"


class Detector:
    """The checks of one topology and their states (module docstring).

    ``checks`` (default: the topology's), ``k`` overrides every threshold, ``max_level`` bounds the
    closure. Cost per update: each check's own (see their modules).
    """

    def __init__(
        self,
        topology: Topology,
        checks: Sequence[str] | None = None,
        *,
        k: int | None = None,
        max_level: int | None = None,
        plan: CheckPlan | None = None,
    ) -> None:
        self.topology = topology
        #: The run's checks, built once (:mod:`streamdetect.check_plan`; given, or planned from the rest).
        self.plan = plan if plan is not None else plan_checks(topology, checks, k=k, max_level=max_level)
        self.checks: dict[str, Check[Any, Any]] = dict(self.plan.checks)
        self.states: dict[str, Any] = {name: check.initialize() for name, check in self.checks.items()}
        self.fingerprint = self.plan.fingerprint
        #: The checks that refuse withdrawn rows (a window withdraws the rows that leave it).
        self.unwithdrawable = list(self.plan.unwithdrawable)
        self.window: Window | None = None
        if topology.window is not None:
            if self.unwithdrawable:
                raise TopologyError(
                    f"a window withdraws the rows that leave it, and the {', '.join(self.unwithdrawable)} "
                    "check(s) do not take withdrawn rows yet: remove the window or those checks",
                    file=topology.path,
                    key="window",
                )
            self.window = Window(topology.window)
        self.attributes = {view.name: list(view.attributes) for view in topology.views}
        #: The batch the checks folded in last: the one given, or the window's step of it.
        self.folded: Batch | None = None
        #: The type of each attribute as the first batch that held it gave it: later batches must agree
        #: (dictionary codes and joins are per attribute), or a check would fail half-way through.
        self.dtypes: dict[str, pl.DataType] = {}
        #: Whether a batch of the private table was folded in (one with no rows counts: an empty table),
        #: and whether a piece says so already (:meth:`changes`).
        self.table_seen = False
        self._table_written = False
        #: Seconds each check took to fold the last batch in (its update and findings), by check: what a
        #: worker's per-check time metric counts.
        self.check_seconds: dict[str, float] = {}

    def validate(self, batch: Batch) -> None:
        """Refuse a batch that names an unknown view, whose frames do not hold exactly the view's attributes,
        that withdraws rows not published, or that a check refuses (SIND: public values that repeat).
        Changes nothing."""
        self._prepare(batch)

    def _prepare(self, batch: Batch) -> tuple[Batch, Step | None]:
        """The batch the checks fold in (the window's step of it, with a window), validated."""
        self._validate_shape(batch)
        step = self.window.step(batch, self.attributes) if self.window is not None else None
        folded = step.batch if step is not None else batch
        if folded.retracts and self.unwithdrawable:
            refusing = ", ".join(self.unwithdrawable)
            raise UnsupportedCase(f"batch: the {refusing} check(s) do not take retracted rows yet")
        for name, check in self.checks.items():
            problem = check.validate(self.states[name], folded)
            if problem is not None:
                raise TopologyError(f"batch: {problem}", file=self.topology.path)
        return folded, step

    def _validate_shape(self, batch: Batch) -> None:
        attributes = self.attributes
        table = self.topology.table.attributes
        for kind, frame in (("rows", batch.table), ("withdrawn rows", batch.retracted_table)):
            if frame is not None and set(frame.columns) != set(table):
                raise TopologyError(
                    f"batch: {kind} of the table have columns {', '.join(frame.columns)}; "
                    f"the table has {', '.join(sorted(table))}",
                    file=self.topology.path,
                )
        for kind, frames in (("rows", batch.views), ("retracted rows", batch.retracted)):
            for name, frame in frames.items():
                if name not in attributes:
                    raise TopologyError(f"batch: {kind} of unknown view {name!r}", file=self.topology.path)
                if set(frame.columns) != set(attributes[name]):
                    raise TopologyError(
                        f"batch: {kind} of view {name!r} have columns {', '.join(frame.columns)}; "
                        f"the view has {', '.join(sorted(attributes[name]))}",
                        file=self.topology.path,
                    )
        seen = dict(self.dtypes)
        for name, frame in _frames(batch):
            for column, dtype in frame.schema.items():
                expected = seen.setdefault(column, dtype)
                if dtype != expected:
                    raise TopologyError(
                        f"batch: column {column!r} of {name!r} is {dtype}, but earlier rows of it are {expected}",
                        file=self.topology.path,
                    )

    def update_each(self, batch: Batch, progress: ProgressFactory | None = None) -> dict[str, Delta[Any]]:
        """Fold a batch into every check's state; per check, the findings raised and cleared."""
        folded, step = self._prepare(batch)
        for _, frame in _frames(batch):
            for column, dtype in frame.schema.items():
                self.dtypes.setdefault(column, dtype)
        deltas: dict[str, Delta[Any]] = {}
        seconds: dict[str, float] = {}
        for name, check in self.checks.items():
            began = time.perf_counter()
            deltas[name] = check.update(self.states[name], folded, progress)
            seconds[name] = time.perf_counter() - began
        self.check_seconds = seconds
        if batch.table is not None or batch.retracted_table is not None:
            self.table_seen = True
        if step is not None:
            assert self.window is not None
            self.window.commit(step)
        self.folded = folded
        return deltas

    def update(self, batch: Batch, progress: ProgressFactory | None = None) -> Delta[Any]:
        """Fold a batch into every check's state; the findings raised and cleared across checks."""
        deltas = self.update_each(batch, progress).values()
        return Delta(
            tuple(f for delta in deltas for f in delta.raised), tuple(f for delta in deltas for f in delta.cleared)
        )

    def present_rows(self) -> dict[str, pl.DataFrame] | None:
        """The views' rows present (bags, as values), as a check that keeps them has them
        (:class:`~streamdetect.checks.protocol.KeepsRows`); None when none runs. O(rows kept): for a
        restore, not per batch."""
        for name, check in self.checks.items():
            if isinstance(check, KeepsRows):
                return check.present_rows(self.states[name])
        return None

    def incomplete(self) -> dict[str, str]:
        """Per check that cannot see an input its answer needs, why, as a sentence for an operator: the
        checks that read the private table until a batch of it arrives (on a stream the table has its own
        topic; ``check`` refuses to run them without ``table.source``). A check listed here may report
        fewer findings than there are: never read its silence as clean."""
        if self.table_seen:
            return {}
        return {
            name: f"{check.properties.table_reason or 'it reads the private table'}, and {NO_TABLE}"
            for name, check in self.checks.items()
            if check.properties.needs_table
        }

    def findings(self) -> list[Any]:
        """Every open finding, per check in report order."""
        return [finding for name, check in self.checks.items() for finding in check.result(self.states[name])]

    def summaries(self, counts: Mapping[str, int]) -> list[CheckSummary]:
        """What each check examined, given its number of findings."""
        return [check.summary(counts.get(name, 0)) for name, check in self.checks.items()]

    def changes(self) -> dict[str, bytes]:
        """Every check's pieces to write since the last call, keyed ``<check>/<piece>`` (a Faust table or a
        checkpoint store keeps them; :meth:`snapshot` is the whole state at once)."""
        pieces = {
            f"{name}/{key}": piece
            for name, check in self.checks.items()
            for key, piece in check.changes(self.states[name]).items()
        }
        if self.window is not None:
            pieces |= {f"{WINDOW_KEY}/{key}": piece for key, piece in self.window.changes().items()}
        if self.table_seen and not self._table_written:
            pieces[f"{INPUTS_KEY}/table"] = b""
            self._table_written = True
        return pieces

    def apply_changes(self, pieces: Mapping[str, bytes]) -> None:
        """Bring the states up to another detector's, from the pieces of its :meth:`changes` (all of them
        since its start, or since a snapshot this one restored). Raises :class:`StateError` on a gap."""
        by_check: dict[str, dict[str, bytes]] = {}
        for key, piece in pieces.items():
            name, _, rest = key.partition("/")
            if name == INPUTS_KEY:
                self.table_seen = self._table_written = self.table_seen or rest == "table"
                continue
            if name not in self.checks and (name != WINDOW_KEY or self.window is None):
                raise StateError(f"state piece {key!r} belongs to no check run here")
            by_check.setdefault(name, {})[rest] = piece
        try:
            for name, own in by_check.items():
                if name == WINDOW_KEY and self.window is not None:
                    self.window.apply_changes(own)
                else:
                    self.states[name] = self.checks[name].apply_changes(self.states[name], own)
        except ValueError as exc:
            raise StateError(str(exc)) from None

    def snapshot(self) -> bytes:
        """Every state, with the fingerprint of the parameters it was built under (:meth:`snapshot_parts`
        joined)."""
        return self.snapshot_parts().joined()

    def snapshot_parts(self) -> Encoded:
        """Every state, with the fingerprint of the parameters it was built under, as the parts of its
        bytes: a writer that cuts them into chunks copies the states once.

        A detector restored from it counts everything it holds as written: take :meth:`changes` before a
        snapshot, or a replica fed only pieces sees a gap (refused, never silent).

        A binary document (:func:`~streamdetect.model.codecs.document_parts`): the version, the fingerprint,
        each check's state bytes as its codec writes them (documents too, their frames as Arrow IPC), the
        column types, the inputs seen, the window; nothing in base64. Restore also reads the JSON envelope
        with base64 states that snapshots were before (a state table kept across an upgrade).
        """
        document: dict[str, Any] = {
            "version": SNAPSHOT_VERSION,
            "fingerprint": self.fingerprint,
            "states": {name: check.encode(self.states[name]) for name, check in self.checks.items()},
            # The column types earlier batches fixed, as an empty frame's schema.
            "dtypes": pl.DataFrame(schema=self.dtypes),
            "inputs": ["table"] if self.table_seen else [],
        }
        if self.window is not None:
            document["window"] = self.window.to_document()
        return document_parts(document)

    def restore(self, data: bytes | memoryview) -> None:
        """Replace every state by a snapshot's; refused (:class:`StateError`) when the snapshot was taken
        under another topology, other checks or thresholds, or another state version. Each check decodes
        its state in place (a view of ``data``, not a copy)."""
        try:
            document = decode_document(data, views=True)
        except ValueError as exc:  # a JSON error, undecodable text, bytes cut short
            raise StateError(f"not a detector snapshot: {exc}") from None
        if document.get("version") != SNAPSHOT_VERSION:
            raise StateError(f"snapshot version {document.get('version')!r}; this version reads {SNAPSHOT_VERSION}")
        if document.get("fingerprint") != self.fingerprint:
            raise StateError(
                "the snapshot was taken under another topology, other checks or thresholds, or another closure "
                f"bound (fingerprint {document.get('fingerprint')!r}, expected {self.fingerprint!r}): "
                "restoring it would give wrong answers"
            )
        states = document.get("states", {})
        if set(states) != set(self.checks):
            raise StateError(f"the snapshot holds states of {', '.join(sorted(states))}, not of the checks run")
        try:
            decoded = {name: self.checks[name].decode(as_bytes(state)) for name, state in states.items()}
            dtypes = dict(as_frame(document["dtypes"]).schema) if "dtypes" in document else {}
            window = Window.from_document(self.window.seconds, document["window"]) if self.window is not None else None
        except (ValueError, KeyError, OSError, TypeError) as exc:
            raise StateError(f"a state of the snapshot cannot be read: {exc}") from None
        self.states = decoded
        self.dtypes = dtypes
        self.window = window
        self.table_seen = self._table_written = "table" in document.get("inputs", [])


def _frames(batch: Batch) -> list[tuple[str, pl.DataFrame]]:
    """Every frame of a batch, named for error messages."""
    named = [*batch.views.items(), *batch.retracted.items()]
    if batch.table is not None:
        named.append(("the table", batch.table))
    if batch.retracted_table is not None:
        named.append(("the table's withdrawn rows", batch.retracted_table))
    return named
