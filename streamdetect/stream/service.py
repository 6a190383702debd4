"""What the worker does with one record, apart from Kafka and Faust: read it, fold it into the Detector,
say which findings it raised and cleared, and which state pieces to write.

The worker (:mod:`streamdetect.stream.worker`) keeps the pieces in a Faust table, whose changelog
topic is how a replacement worker recovers the state; this module rebuilds the Detector from them
(:meth:`DetectorService.restore`). Delivery is at least once: a record replayed after a crash carries
the same batch id, and a batch already folded in is skipped, so the open findings stay exact (views are
bags: folding a batch twice would count its rows twice).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from streamdetect.checks.protocol import Batch
from streamdetect.checks.seen_rows import frame_from_ipc, frame_to_ipc
from streamdetect.detector import Detector
from streamdetect.errors import StateError, StreamdetectError
from streamdetect.model.topology import Topology
from streamdetect.relational.universal_stream import UniversalStream
from streamdetect.stream.records import (
    DEFAULT_MAX_BYTES,
    DeadLetter,
    Publication,
    decode_record,
    universal_records,
)

log = logging.getLogger(__name__)

#: Entries of a record besides the Detector's pieces (which are ``<check>/<piece>``).
FINGERPRINT_KEY = "meta/fingerprint"
DTYPES_KEY = "meta/dtypes"
UNIVERSAL_KEY = "meta/universal"
APPLIED_PREFIX = "applied/"
#: The table holds one entry per record folded in, ``record/<n>``: its pieces, packed (one changelog
#: message per record, not one per piece: a BP batch writes some fifty pieces).
RECORD_PREFIX = "record/"


def pack_entries(entries: Mapping[str, bytes]) -> bytes:
    """Several named byte strings as one (an Arrow IPC frame of keys and values)."""
    return frame_to_ipc(
        pl.DataFrame({"key": list(entries), "value": pl.Series(list(entries.values()), dtype=pl.Binary)})
    )


def unpack_entries(data: bytes) -> dict[str, bytes]:
    """Inverse of :func:`pack_entries`."""
    frame = frame_from_ipc(data)
    return dict(zip(frame.get_column("key").to_list(), frame.get_column("value").to_list(), strict=True))


@dataclass
class Outcome:
    """What one record led to: table writes, finding events (key, JSON value), or a dead letter."""

    writes: dict[str, bytes] = field(default_factory=dict)
    events: list[tuple[bytes, bytes]] = field(default_factory=list)
    dead: DeadLetter | None = None
    replayed: bool = False
    #: The record read (None for a dead letter) and the findings it raised and cleared.
    publication: Publication | None = None
    raised: tuple[Any, ...] = ()
    cleared: tuple[Any, ...] = ()
    #: Universal-relation records (value, headers) the record added (with ``universal_rows``).
    universal: list[tuple[bytes, list[tuple[str, bytes]]]] = field(default_factory=list)


def finding_event(finding: Any, event: str, publication: Publication) -> tuple[bytes, bytes]:
    """A findings-topic record: keyed by the finding's stable id; the report-format body, whether it was
    raised or cleared, and the publication (time, batch, view) of the record that raised or cleared it."""
    body = {
        "event": event,
        "id": finding.id,
        "check": finding.check,
        "published": publication.published.isoformat(),
        "batch": publication.batch_id,
        "view": publication.view,
        "finding": finding.to_dict(),
    }
    return finding.id.encode(), json.dumps(body, separators=(",", ":"), default=str).encode()


class DetectorService:
    """One worker's Detector and what it has folded in."""

    def __init__(
        self,
        topology: Topology,
        checks: Sequence[str] | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        *,
        prefix: str = "",
        placement: str = "",
        universal: UniversalStream | None = None,
    ):
        """``prefix``: of the table keys this service writes and restores from (a unit's, when several
        share one table); ``placement``: how rows were placed in this service's share (the partition
        count), kept with the fingerprint, as a state built under another placement holds other values;
        ``universal``: the universal-relation stream to keep (its tuples go with each outcome)."""
        self.topology = topology
        self.detector = Detector(topology, checks)
        self.max_bytes = max_bytes
        self.prefix = prefix
        self.fingerprint = f"{self.detector.fingerprint}@{placement}" if placement else self.detector.fingerprint
        self.applied: set[str] = set()
        self.restored = False
        self.universal = universal
        self.universal_state = universal.initialize() if universal is not None else None
        #: Bytes of this service's state entries in the table: restored, plus written since.
        self.state_bytes = 0

    def restore(self, table: Mapping[str, bytes]) -> None:
        """Rebuild the Detector from the table the worker wrote (its ``record/<n>`` entries; empty on a
        first start). Raises :class:`StateError` when the table was written under another topology,
        checks or thresholds."""
        records = self.prefix + RECORD_PREFIX
        self.state_bytes = sum(len(value) for key, value in table.items() if key.startswith(records))
        table = {
            name: value
            for key in sorted(key for key in table if key.startswith(records))
            for name, value in unpack_entries(table[key]).items()
        }
        fingerprint = table.get(FINGERPRINT_KEY)
        if fingerprint is not None and fingerprint.decode() != self.fingerprint:
            raise StateError(
                "the worker's state topic was written under another topology, other checks, thresholds or "
                f"partition count (fingerprint {fingerprint.decode()!r}, expected {self.fingerprint!r}): give "
                "this topology another name, or delete the application's changelog topics to start afresh"
            )
        pieces = {key: value for key, value in table.items() if not key.startswith(("meta/", APPLIED_PREFIX))}
        self.detector.apply_changes(pieces)
        self.detector.changes()  # what the table holds is written already
        dtypes = table.get(DTYPES_KEY)
        if dtypes is not None:
            self.detector.dtypes = dict(frame_from_ipc(dtypes).schema)
        self.applied = {key[len(APPLIED_PREFIX) :] for key in table if key.startswith(APPLIED_PREFIX)}
        if self.universal is not None:
            self.universal_state = self.universal.initialize(self.detector.present_rows())
            if UNIVERSAL_KEY in table:
                try:
                    self.universal.restore_counts(self.universal_state, table[UNIVERSAL_KEY])
                except (ValueError, KeyError) as exc:
                    raise StateError(f"the universal stream's counts cannot be read: {exc}") from None
        self.restored = True
        log.info("state restored: %d pieces, %d batches folded in", len(pieces), len(self.applied))

    def handle(self, value: bytes | None, headers: Sequence[tuple[str, bytes]], view: str | None) -> Outcome:
        """Fold one record in (atomically: a batch the Detector refuses changes nothing and is a dead
        letter with reason ``refused``)."""
        read = decode_record(self.topology, value, headers, view=view, max_bytes=self.max_bytes)
        if isinstance(read, DeadLetter):
            return Outcome(dead=read)
        return self.fold(read)

    def refusal(self, read: Publication) -> DeadLetter | None:
        """Why the Detector would refuse the publication (changes nothing), or None."""
        try:
            self.detector.validate(_batch(read))
        except StreamdetectError as refused:
            return DeadLetter("refused", _refusal(str(refused)))
        return None

    def fold(self, read: Publication) -> Outcome:
        """Fold a publication already read in (:meth:`handle` without the reading)."""
        if read.batch_id in self.applied:
            return Outcome(replayed=True, publication=read)
        batch = _batch(read)
        known = dict(self.detector.dtypes)
        try:
            delta = self.detector.update(batch)
        except StreamdetectError as refused:
            # Only the reason's kind is kept (the message may quote a value): which rule refused it.
            return Outcome(dead=DeadLetter("refused", _refusal(str(refused))))
        outcome = Outcome(publication=read, raised=delta.raised, cleared=delta.cleared)
        outcome.events = [finding_event(f, "cleared", read) for f in delta.cleared]
        outcome.events += [finding_event(f, "raised", read) for f in delta.raised]
        entries = dict(self.detector.changes())
        if self.universal is not None and self.universal_state is not None and self.detector.folded is not None:
            gained = self.universal.update(self.universal_state, self.detector.folded)
            for channel, tuples in gained:
                outcome.universal += universal_records(tuples, channel.label, channel.level, read, self.max_bytes)
            if gained:
                entries[UNIVERSAL_KEY] = self.universal.counts(self.universal_state)
        if not entries and not delta.raised and not delta.cleared:
            # Nothing changed (a unit's empty share that did not move its window's time): nothing to write.
            return outcome
        if not self.applied:
            entries[FINGERPRINT_KEY] = self.fingerprint.encode()
        if self.detector.dtypes != known:
            entries[DTYPES_KEY] = frame_to_ipc(pl.DataFrame(schema=self.detector.dtypes))
        entries[APPLIED_PREFIX + read.batch_id] = dt.datetime.now(dt.UTC).isoformat().encode()
        # Records are numbered in the order they were folded in (each has one batch id): restore replays them so.
        outcome.writes = {f"{self.prefix}{RECORD_PREFIX}{len(self.applied):012d}": pack_entries(entries)}
        self.state_bytes += sum(len(piece) for piece in outcome.writes.values())
        self.applied.add(read.batch_id)
        return outcome


def _batch(read: Publication) -> Batch:
    published = read.published.timestamp()
    if read.op == "retract":
        return Batch(retracted={read.view: read.rows}, published=published)
    return Batch(views={read.view: read.rows}, published=published)


def _refusal(message: str) -> str:
    if "never published" in message or "has published none" in message:
        return "withdraws a row that is not published"
    if "but earlier rows of it are" in message:
        return "an attribute's type differs from earlier batches"
    return "the detector refused the batch"


def open_findings(events: Sequence[bytes]) -> dict[str, dict[str, Any]]:
    """The open findings after a sequence of findings-topic values, in order: by id, the report-format
    body of every finding raised and not cleared since. A replayed event changes nothing (an id raised
    twice is one open finding; a cleared id stays cleared until raised again)."""
    opened: dict[str, dict[str, Any]] = {}
    for value in events:
        event = json.loads(value)
        if event["event"] == "raised":
            opened[event["id"]] = event["finding"]
        else:
            opened.pop(event["id"], None)
    return opened
