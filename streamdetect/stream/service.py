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
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from streamdetect.check_plan import CheckPlan
from streamdetect.detector import Detector
from streamdetect.errors import StateError, StreamdetectError
from streamdetect.model.batch import Batch
from streamdetect.model.codecs import Encoded, deferring, frame_from_ipc, frame_to_ipc
from streamdetect.model.topology import Topology
from streamdetect.relational.universal_stream import UniversalStream
from streamdetect.stream.events import cleared_again, finding_events, status_events
from streamdetect.stream.records import (
    DeadLetter,
    Publication,
    Topic,
    decode_record,
    universal_records,
)
from streamdetect.stream.settings import COMPACT_BYTES, DEFAULT_MAX_BYTES, REPLAY_RETENTION_S
from streamdetect.stream.state_log import (
    ANNOUNCED_KEY,
    APPLIED_KEY,
    APPLIED_PREFIX,
    CHAIN_LINKS,
    DETECTOR_KEY,
    DTYPES_KEY,
    EXTENDS_KEY,
    FINGERPRINT_KEY,
    FORCED_FACTOR,
    IDLE_FRACTION,
    OFFSET_KEY,
    PIECE_PREFIX,
    RECORD_PREFIX,
    SNAPSHOT_PREFIX,
    SOURCE_PREFIX,
    UNIVERSAL_KEY,
    WITHDREW_KEY,
    Chunks,
    LookedUp,
    Source,
    chunked,
    extend_segments,
    latest_chain,
    pack_entries,
    packed_entries,
    snapshot_chunks,
    unpack_entries,
    whole_entries,
)

log = logging.getLogger(__name__)


#: A record as the worker reads it: value, headers, and what its topic carries (a view's name, the table;
#: None: a header says).
Item = tuple[bytes | None, Sequence[tuple[str, bytes]], Topic]


@dataclass
class Outcome:
    """What one record led to: table writes, finding events (key, JSON value), or a dead letter."""

    writes: dict[str, bytes] = field(default_factory=dict)
    #: Findings-topic records (key, value): events, and tombstones (value None) of cleared findings.
    events: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    dead: DeadLetter | None = None
    replayed: bool = False
    #: The record read (None for a dead letter) and the findings it raised and cleared.
    publication: Publication | None = None
    raised: tuple[Any, ...] = ()
    cleared: tuple[Any, ...] = ()
    #: Folded in one Detector update with later records of its run (whose outcome carries the effects).
    merged: bool = False
    #: The earliest publication time of the records folded with this one (detection latency runs from it).
    earliest: dt.datetime | None = None
    #: Universal-relation records (value, headers) the record added (with ``universal_rows``).
    universal: list[tuple[bytes, list[tuple[str, bytes]]]] = field(default_factory=list)
    #: Table keys to delete once ``writes`` and ``snapshots`` are stored: the entries a snapshot replaces.
    deletes: list[str] = field(default_factory=list)
    #: Re-encoded states to write after ``writes``, each cut into its chunks as they are written
    #: (:class:`~streamdetect.stream.state_log.Chunks`: taken once): the state is not held twice over.
    snapshots: list[Chunks] = field(default_factory=list)
    #: The checks that cannot see an input they need, with why (:meth:`Detector.incomplete`), when that
    #: changed with this record (its status events are among ``events``); None: unchanged.
    incomplete: dict[str, str] | None = None
    #: Seconds each check took to fold the record in (with the records taken with it), by check.
    check_seconds: dict[str, float] = field(default_factory=dict)
    #: The checks whose status ``incomplete`` reports (those that read the table, of the services that
    #: reported): a check not listed is neither seen nor blind by this outcome.
    reporting: tuple[str, ...] = ()

    @property
    def written_bytes(self) -> int:
        """The bytes of the table entries the outcome writes, ``snapshots`` included."""
        return sum(len(piece) for piece in self.writes.values()) + sum(chunks.size for chunks in self.snapshots)

    def written(self) -> dict[str, bytes]:
        """Every table entry the outcome writes: the snapshots' chunks taken into ``writes`` (for a caller
        that keeps them all anyway; a worker writes a snapshot's chunks a group at a time)."""
        for chunks in self.snapshots:
            self.writes |= chunks.taken()
        self.snapshots = []
        return self.writes

    def take_status(self, other: Outcome) -> None:
        """Add ``other``'s status report to this outcome's (a check blind in either is blind)."""
        if other.incomplete is None:
            return
        self.incomplete = {**(self.incomplete or {}), **other.incomplete}
        self.reporting = tuple(dict.fromkeys([*self.reporting, *other.reporting]))


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
        compact_bytes: int | None = COMPACT_BYTES,
        replay_retention_s: float | None = REPLAY_RETENTION_S,
        defer_compaction: bool = False,
        plan: CheckPlan | None = None,
    ):
        """``prefix``: of the table keys this service writes and restores from (a unit's, when several
        share one table); ``placement``: how rows were placed in this service's share (the partition
        count), kept with the fingerprint, as a state built under another placement holds other values;
        ``universal``: the universal-relation stream to keep (its tuples go with each outcome);
        ``compact_bytes``: snapshot once the records written since the last snapshot reach this many
        bytes and that snapshot's size (:data:`COMPACT_BYTES`; None: never, the table grows for ever);
        ``replay_retention_s``: a snapshot keeps the batch ids folded within that many seconds only
        (:data:`REPLAY_RETENTION_S`; None: all, for ever): a record redelivered later is folded again;
        ``defer_compaction``: the caller takes snapshots when idle (:meth:`idle_compaction_due`,
        :meth:`compact`), so a fold forces one only at :data:`FORCED_FACTOR` times the threshold;
        ``plan``: the checks built already (a partition unit's, :meth:`~streamdetect.partitioning.Plan.check_plan`),
        instead of ``checks``."""
        self.topology = topology
        self.detector = Detector(topology, checks, plan=plan)
        self.max_bytes = max_bytes
        self.prefix = prefix
        self.fingerprint = f"{self.detector.fingerprint}@{placement}" if placement else self.detector.fingerprint
        #: Batch ids folded in, with when (epoch seconds): a record carrying one is a replay, skipped.
        self.applied: dict[str, float] = {}
        self.replay_retention_s = replay_retention_s
        #: State entries written (restored and since): the next entry's number.
        self.written = 0
        self.restored = False
        self.universal = universal
        self.universal_state = universal.initialize() if universal is not None else None
        #: The offset of the last record folded in, when the caller gives offsets (None: unknown).
        self.offset: int | None = None
        #: Per view topic partition (``topic:partition``), the offset after the last of its records
        #: handled (:meth:`note_source`), and the values of it the table holds.
        self.sources: dict[str, int] = {}
        self.sources_written: dict[str, int] = {}
        self.compact_bytes = compact_bytes
        self.defer_compaction = defer_compaction
        #: The table keys of this service's snapshot chain (deleted by a snapshot that re-encodes the state),
        #: and of the records written since its last link (and of entries a restore passed over), deleted by
        #: the next snapshot.
        self.chain_keys: list[str] = []
        self.record_keys: list[str] = []
        #: The number of the chain's last link (None: no snapshot yet), and its links.
        self.last_snapshot: int | None = None
        self.links = 0
        #: Bytes of records written since the last snapshot, and of the snapshot chain.
        self.since_snapshot = 0
        self.snapshot_bytes = 0
        #: The Detector's pieces written since the chain's last link: what the next link holds (None once
        #: rows were withdrawn since the last snapshot, always with a time window: the next snapshot
        #: re-encodes the state). Only these are kept in memory; the state before them is in the table's
        #: chain, never copied again.
        self.pieces: dict[str, bytes] | None = {}
        #: The checks that read the private table, and which were reported incomplete last (None: no
        #: status reported since this service started: the next one reports it whatever it is).
        self.table_readers = list(self.detector.plan.table_readers)
        self.reported: dict[str, str] | None = None
        #: The last fold's announcement as the state holds it (:data:`ANNOUNCED_KEY`; None: none yet), and
        #: the events to send again after a restore (:meth:`take_resent`).
        self.announced: bytes | None = None
        self.resent: list[tuple[bytes, bytes | None]] = []
        #: The findings open in the state the last restore rebuilt, until taken (:meth:`take_restored_open`:
        #: the worker's open-findings gauge starts from them).
        self.restored_open: list[Any] = []

    @property
    def state_bytes(self) -> int:
        """Bytes of this service's state entries in the table: the snapshot chain and the records since."""
        return self.snapshot_bytes + self.since_snapshot

    @property
    def log_keys(self) -> list[str]:
        """Every table key of this service's state: the snapshot chain's and the records' since."""
        return [*self.chain_keys, *self.record_keys]

    def restore(self, table: Mapping[str, bytes]) -> None:
        """Rebuild the Detector from the table the worker wrote (its ``record/<n>`` entries; empty on a
        first start). Raises :class:`StateError` when the table was written under another topology,
        checks or thresholds."""
        chain, entries = self._entries(table)
        snapshot = chain[-1][1] if chain else {}
        table = {name: value for entry in [snapshot, *entries] for name, value in entry.items()}
        fingerprint = table.get(FINGERPRINT_KEY)
        if fingerprint is not None and fingerprint.decode() != self.fingerprint:
            raise StateError(
                "the worker's state topic was written under another topology, other checks, thresholds or "
                f"partition count (fingerprint {fingerprint.decode()!r}, expected {self.fingerprint!r}): give "
                "this topology another name, or delete the application's changelog topics to start afresh"
            )
        pieces = self._rebuild(chain, entries)
        del chain
        self.detector.changes()  # what the table holds is written already
        dtypes = table.get(DTYPES_KEY)
        if dtypes is not None:
            self.detector.dtypes = dict(frame_from_ipc(dtypes).schema)
        self.applied = {}
        if APPLIED_KEY in snapshot:
            kept = frame_from_ipc(snapshot[APPLIED_KEY])
            self.applied.update(
                zip(kept.get_column("batch").to_list(), kept.get_column("folded").to_list(), strict=True)
            )
        self.applied.update(
            {
                key[len(APPLIED_PREFIX) :]: _epoch(value)
                for key, value in table.items()
                if key.startswith(APPLIED_PREFIX)
            }
        )
        self.offset = int(table[OFFSET_KEY]) if OFFSET_KEY in table else None
        self.sources_written = {
            key[len(SOURCE_PREFIX) :]: int(value) for key, value in table.items() if key.startswith(SOURCE_PREFIX)
        }
        self.sources = dict(self.sources_written)
        if self.universal is not None:
            self.universal_state = self.universal.initialize(self.detector.present_rows())
            if UNIVERSAL_KEY in table:
                try:
                    self.universal.restore_counts(self.universal_state, table[UNIVERSAL_KEY])
                except (ValueError, KeyError) as exc:
                    raise StateError(f"the universal stream's counts cannot be read: {exc}") from None
        self.announced = table.get(ANNOUNCED_KEY)
        self._reopen()
        self.restored = True
        log.info("state restored: %d pieces, %d batches folded in", pieces, len(self.applied))

    def _entries(self, table: Mapping[str, bytes]) -> tuple[list[tuple[int, dict[str, bytes]]], list[dict[str, bytes]]]:
        """This service's entries in ``table``: the latest snapshot chain that is whole (:func:`latest_chain`)
        and the records numbered from its last link, unpacked, in order. Takes their keys and sizes, and
        the next entry's number."""
        records, snapshots = self.prefix + RECORD_PREFIX, self.prefix + SNAPSHOT_PREFIX
        # Keys first, each value read once when its entry is put together (a store may read them on demand).
        names = list(table)
        numbered = LookedUp(table, {key[len(records) :]: key for key in names if key.startswith(records)})
        snapshotted = LookedUp(table, {key[len(snapshots) :]: key for key in names if key.startswith(snapshots)})
        whole = whole_entries(snapshotted)
        # The latest snapshot with its chain whole; records below it are covered.
        chain = latest_chain(whole)
        base = chain[-1][0] if chain else None
        written = whole_entries(numbered, lambda number: number >= (base or 0))
        linked = {number for number, _ in chain}
        self.chain_keys = [snapshots + key for key in snapshotted if int(key.partition(".")[0]) in linked]
        # The records since, and the entries the chain covers or that were passed over: the next snapshot
        # deletes them.
        chained = set(self.chain_keys)
        self.record_keys = [key for key in names if key.startswith((records, snapshots)) and key not in chained]
        self.last_snapshot, self.links = base, len(chain)
        # The next number follows the highest written, an incomplete entry's or snapshot's included (its
        # chunks stay until the next snapshot deletes them: a number is never reused).
        self.written = max([int(key.partition(".")[0]) + 1 for key in [*numbered, *snapshotted]] + [0])
        self.snapshot_bytes = sum(len(whole[number]) for number in linked)
        self.since_snapshot = sum(len(written[number]) for number in written)
        return chain, [unpack_entries(written[number]) for number in sorted(written)]

    def _rebuild(self, chain: list[tuple[int, dict[str, bytes]]], entries: list[dict[str, bytes]]) -> int:
        """Restore the Detector from the chain's first snapshot and apply every piece after it, the chain's
        then the records'; keep the records' pieces for the next link (none when they withdrew rows). The
        number of pieces applied."""
        if chain and DETECTOR_KEY in chain[0][1]:
            self.detector.restore(chain[0][1][DETECTOR_KEY])
        since: list[dict[str, bytes]] = [{}]
        for entry in entries:
            extend_segments(since, entry)
        withdrew = any(WITHDREW_KEY in entry for entry in entries)
        self.pieces = None if withdrew else since[0]
        # The chain's pieces come before everything (no withdrawal among them): in the records' first segment.
        chained = {
            key[len(PIECE_PREFIX) :]: value
            for _, link in chain
            for key, value in link.items()
            if key.startswith(PIECE_PREFIX)
        }
        segments = [chained | since[0], *since[1:]]
        applied = 0
        for segment in segments:
            applied += len(segment)
            if segment:
                self.detector.apply_changes(segment)
        return applied

    def _reopen(self) -> None:
        """After a restore: the findings open in the state (computed once, for the events to send again and
        the worker's gauge), and the events to send again."""
        self.restored_open = self.detector.findings()
        self.resent = self._announced_again({finding.id: finding for finding in self.restored_open})

    def _announced_again(self, open_now: Mapping[str, Any]) -> list[tuple[bytes, bytes | None]]:
        """The events of the last fold the state holds, as the restored state has them: its cleared findings
        that are not open (:func:`~streamdetect.stream.events.cleared_again`: the state no longer holds
        them) and its raised ones that are (their finding events again); ``open_now``: the state's open
        findings by id. A consumer folds them idempotently when they went before; when the worker that
        wrote the state was killed before sending them, they are what its consumers lack."""
        if self.announced is None:
            return []
        said = json.loads(self.announced)
        raised = {finding_id for ids in said["raised"].values() for finding_id in ids}
        cleared = {(check, finding_id) for check, ids in said["cleared"].items() for finding_id in ids}
        if not raised and not cleared:
            return []
        published = dt.datetime.fromisoformat(said["published"])
        read = Publication(said["view"], "add", said["batch"], published, pl.DataFrame())
        gone = [(check, finding_id) for check, finding_id in sorted(cleared) if finding_id not in open_now]
        still = [open_now[finding_id] for finding_id in sorted(raised) if finding_id in open_now]
        return cleared_again(gone, read) + finding_events(still, "raised", read, said["batches"])

    def take_restored_open(self) -> list[Any]:
        """The findings open in the state the last restore rebuilt (:meth:`_reopen`), once: the service
        does not keep them after."""
        found, self.restored_open = self.restored_open, []
        return found

    def take_resent(self) -> list[tuple[bytes, bytes | None]]:
        """The events to send again since the last restore (:meth:`_announced_again`), once."""
        resent, self.resent = self.resent, []
        return resent

    def handle(self, value: bytes | None, headers: Sequence[tuple[str, bytes]], view: Topic) -> Outcome:
        """Fold one record in (atomically: a batch the Detector refuses changes nothing and is a dead
        letter with reason ``refused``)."""
        read = decode_record(self.topology, value, headers, view=view, max_bytes=self.max_bytes)
        if isinstance(read, DeadLetter):
            return Outcome(dead=read)
        return self.fold(read)

    def refusal(self, read: Publication) -> DeadLetter | None:
        """Why the Detector would refuse the publication (changes nothing), or None."""
        try:
            self.detector.validate(merged_batch([read]))
        except StreamdetectError as refused:
            return _refused(str(refused))
        return None

    def note_source(self, source: Source) -> None:
        """Remember that the view record published at ``source`` was handled (folded, a replay, a dead
        letter, or no rows for this service): kept with the state at the next fold (:attr:`sources`)."""
        # The highest wins: a record read again after a handover comes after later ones.
        self.sources[source.key] = max(self.sources.get(source.key, 0), source.offset + 1)

    def fold(self, read: Publication, offset: int | None = None) -> Outcome:
        """Fold a publication already read in (:meth:`handle` without the reading); ``offset``, the
        record's, is kept with the state (:attr:`offset`)."""
        if read.batch_id in self.applied:
            return Outcome(replayed=True, publication=read)
        try:
            return self._fold([read], merged_batch([read]), offset)
        except StreamdetectError as refused:
            return Outcome(dead=_refused(str(refused)))

    def handle_many(self, records: Sequence[Item]) -> list[Outcome]:
        """Fold several records (value, headers, view) in as few Detector updates as their order allows
        (:func:`runs`): one outcome per record, in order. A run's outcome (its events, writes, findings)
        is the last record's; the others of the run are ``merged`` into it. A run the Detector refuses
        whole is folded in halves (:meth:`fold_run`), so a bad record is a dead letter and the others go in."""
        outcomes: list[Outcome] = []
        reads: list[tuple[int, Publication]] = []
        for value, headers, view in records:
            read = decode_record(self.topology, value, headers, view=view, max_bytes=self.max_bytes)
            outcomes.append(Outcome(dead=read) if isinstance(read, DeadLetter) else Outcome(publication=read))
            if not isinstance(read, DeadLetter):
                reads.append((len(outcomes) - 1, read))
        where = {id(read): position for position, read in reads}
        for run in runs([read for _, read in reads], windowed=self.detector.window is not None):
            for read, outcome in zip(run, self.fold_run(run), strict=True):
                outcomes[where[id(read)]] = outcome
        return outcomes

    def fold_run(self, run: Sequence[Publication], offsets: Sequence[int | None] | None = None) -> list[Outcome]:
        """Fold the publications of one run (:func:`runs`) in one Detector update; one outcome each (the
        last carries the run's events and writes). When the Detector refuses the run whole, its two halves
        are folded apart, and so on down to the one publication refused (a dead letter): the others still
        go in together, in order, as one by one they would. ``offsets`` (the records', aligned with
        ``run``): the last folded one's is kept with the state, as :meth:`fold` keeps a record's."""
        at = offsets if offsets is not None else [None] * len(run)
        fresh: list[Publication] = []  # publications compare by identity here (their rows are frames)
        last_offset = None
        for read, offset in zip(run, at, strict=True):
            if read.batch_id not in self.applied and all(read.batch_id != other.batch_id for other in fresh):
                fresh.append(read)
                last_offset = offset
        taken = {id(read) for read in fresh}
        if len(fresh) <= 1:
            return [
                self.fold(read, offset) if id(read) in taken else Outcome(replayed=True, publication=read)
                for read, offset in zip(run, at, strict=True)
            ]
        try:
            folded = self._fold(fresh, merged_batch(fresh), last_offset)
        except (StreamdetectError, pl.exceptions.PolarsError):  # a record spoils the run: its halves apart
            half = len(run) // 2
            return [*self.fold_run(run[:half], at[:half]), *self.fold_run(run[half:], at[half:])]
        last = id(fresh[-1])
        return [
            folded
            if id(read) == last
            else Outcome(publication=read, merged=id(read) in taken, replayed=id(read) not in taken)
            for read in run
        ]

    def _fold(self, reads: Sequence[Publication], batch: Batch, offset: int | None = None) -> Outcome:
        """Fold ``batch`` (the rows of ``reads``) in; the findings it raised and cleared are attributed to
        the last of ``reads``. Raises what the Detector raises, having changed nothing."""
        read = reads[-1]
        known = dict(self.detector.dtypes)
        delta = self.detector.update(batch)
        earliest = min(r.published for r in reads)
        outcome = Outcome(
            publication=read,
            raised=tuple(delta.raised),
            cleared=tuple(delta.cleared),
            earliest=earliest,
            check_seconds=dict(self.detector.check_seconds),
        )
        batches = [r.batch_id for r in reads] if len(reads) > 1 else None
        outcome.events = [*finding_events(delta.cleared, "cleared", read, batches)]
        # Then a tombstone per cleared finding: the compacted findings topic keeps the open ones only.
        outcome.events += [(finding.id.encode(), None) for finding in delta.cleared]
        outcome.events += finding_events(delta.raised, "raised", read, batches)
        entries = dict(self.detector.changes())
        if self.detector.window is not None or any(r.op == "retract" for r in reads):
            entries[WITHDREW_KEY] = b"1"
            self.pieces = None  # the next snapshot re-encodes the state: its pieces are not needed
        elif self.pieces is not None:
            self.pieces.update(entries)
        if self.universal is not None and self.universal_state is not None and self.detector.folded is not None:
            gained = self.universal.update(self.universal_state, self.detector.folded)
            for channel, tuples in gained:
                outcome.universal += universal_records(tuples, channel.label, channel.level, read, self.max_bytes)
            if gained:
                entries[UNIVERSAL_KEY] = self.universal.counts(self.universal_state)
        if not self.applied:
            entries[FINGERPRINT_KEY] = self.fingerprint.encode()
        if self.detector.dtypes != known:
            entries[DTYPES_KEY] = frame_to_ipc(pl.DataFrame(schema=self.detector.dtypes))
        if delta.raised or delta.cleared:  # (an older announcement sent again is filtered by the state)
            entries[ANNOUNCED_KEY] = self.announced = _announcement(delta.raised, delta.cleared, read, batches)
        now = dt.datetime.now(dt.UTC)
        stamp = now.isoformat().encode()
        entries |= {APPLIED_PREFIX + r.batch_id: stamp for r in reads}
        if offset is not None:
            entries[OFFSET_KEY] = str(offset).encode()
            self.offset = offset
        moved = {key: at for key, at in self.sources.items() if self.sources_written.get(key) != at}
        entries |= {SOURCE_PREFIX + key: str(at).encode() for key, at in moved.items()}
        self.sources_written |= moved
        # Entries are numbered in the order they were written: restore replays them so.
        outcome.writes = chunked(
            f"{self.prefix}{RECORD_PREFIX}{self.written:012d}", pack_entries(entries), self.max_bytes
        )
        self.written += 1
        self.since_snapshot += sum(len(piece) for piece in outcome.writes.values())
        self.record_keys += outcome.writes
        self.applied.update(dict.fromkeys((r.batch_id for r in reads), now.timestamp()))
        threshold = self.snapshot_threshold
        if threshold is not None and self.since_snapshot >= threshold * (FORCED_FACTOR if self.defer_compaction else 1):
            self._compact(outcome)
        return self.status(outcome)

    def status(self, outcome: Outcome) -> Outcome:
        """Add to ``outcome`` the status events of the checks blind to an input (:meth:`Detector.incomplete`)
        when that changed since the last report (always the first time: a restarted worker says it again,
        which a consumer folds idempotently), and log it: a WARNING for each check still incomplete."""
        if not self.table_readers:
            return outcome
        now = self.detector.incomplete()
        if now == self.reported:
            return outcome
        if now:
            log.warning(
                "the %s check(s) are incomplete (their findings are not all reported until then): %s",
                ", ".join(sorted(now)),
                "; ".join(sorted(set(now.values()))),
            )
        elif self.reported:
            log.info("the %s check(s) see every input they need now", ", ".join(sorted(self.reported)))
        outcome.events += status_events(now, self.table_readers)
        outcome.incomplete = now
        outcome.reporting = tuple(self.table_readers)
        self.reported = now
        return outcome

    @property
    def snapshot_threshold(self) -> int | None:
        """Bytes written since the last snapshot after which a new one is due (None: never). A link of the
        chain copies what was written since the last one: due at ``compact_bytes``, or 1/:data:`CHAIN_LINKS`
        of the chain when larger, so that a full chain (re-encoded then) has grown about e-fold since its
        first link and each byte is re-encoded about 1.6 times over. After a withdrawal the snapshot re-encodes
        the state: due once at least the chain's size was written (each byte of the state re-encoded about
        once per as many written)."""
        if self.compact_bytes is None:
            return None
        if self.pieces is None:
            return max(self.compact_bytes, self.snapshot_bytes)
        return max(self.compact_bytes, self.snapshot_bytes // CHAIN_LINKS)

    @property
    def _reencodes(self) -> bool:
        """Whether the next snapshot re-encodes the Detector: rows were withdrawn since the last one, or the
        chain has :data:`CHAIN_LINKS` links."""
        return self.pieces is None or self.links >= CHAIN_LINKS

    def idle_compaction_due(self) -> bool:
        """Whether a worker with nothing to fold should take a snapshot now: :data:`IDLE_FRACTION` of the
        threshold was written since the last one. Taken in a quiet moment, the snapshot (a copy of the
        whole state, about 17 MB on BP at half its rows: a fifth of a second with its delivery) does not
        hold up records waiting behind it, which measured runs showed it did in the update path."""
        threshold = self.snapshot_threshold
        return threshold is not None and self.since_snapshot > 0 and self.since_snapshot >= IDLE_FRACTION * threshold

    def compact(self) -> Outcome:
        """A snapshot of the whole state now, as an outcome of its own: its entries to write, then the
        entries it replaces to delete (:meth:`_compact`). No events, no publication."""
        outcome = Outcome()
        self._compact(outcome)
        return outcome

    def _compact(self, outcome: Outcome) -> None:
        """Add to ``outcome`` a snapshot, numbered after every record written, and the deletion of every entry
        it replaces. Restore takes the latest snapshot whose chain is whole and the records numbered from
        it; the deletions are to be written after the snapshot (a worker killed between them leaves
        entries that the snapshot covers, ignored and deleted by the next one). Batch ids folded more than
        ``replay_retention_s`` ago are forgotten here (the replays to skip stay bounded).

        Without a withdrawal since the last snapshot the pieces written since only add (every check's state
        is append-only): the snapshot is a link of the chain holding them (O(bytes) copying of what was
        written since, never of the state before), and replaces the records only. After a withdrawal (any,
        with a time window) the pieces hold a history that would outgrow the state (linkage's dropped pairs,
        the recomputed checks' withdrawn batches): then the Detector is re-encoded (``Detector.snapshot``),
        the snapshot starts a new chain and replaces the old one too. Run once per :data:`COMPACT_BYTES`
        written (at least the chain's size when it re-encodes)."""
        reencoded = self._reencodes
        key = f"{self.prefix}{SNAPSHOT_PREFIX}{self.written:012d}"
        if reencoded:  # a withdrawal since the last snapshot, or a long chain: a new chain
            with deferring():  # the large frames made again as their chunks are cut: the state held once
                detector = self.detector.snapshot_parts()
            entries: dict[str, bytes | Encoded] = {**self._snapshot_meta(), DETECTOR_KEY: detector}
            snapshot = snapshot_chunks(key, entries, self.max_bytes)  # the Detector's parts, cut when written
            chunk_keys, size = snapshot.keys, snapshot.size
            outcome.snapshots.append(snapshot)
        else:
            assert self.pieces is not None
            link = {PIECE_PREFIX + name: piece for name, piece in self.pieces.items()}
            if self.last_snapshot is not None:
                link[EXTENDS_KEY] = str(self.last_snapshot).encode()
            # Many small pieces: packed as a record's entries are (measured: less memory kept after), the
            # pieces let go once packed, and the link's chunks cut as they are written, as a re-encoded
            # state's are (a link is about COMPACT_BYTES: its chunks and their write held it twice more).
            packed = packed_entries(self._snapshot_meta() | link)
            del link
            self.pieces = {}
            snapshot = Chunks(key, [packed], self.max_bytes)
            del packed
            chunk_keys, size = snapshot.keys, snapshot.size
            outcome.snapshots.append(snapshot)
        self.pieces = {}
        if reencoded:
            outcome.deletes, self.chain_keys, self.snapshot_bytes, self.links = self.log_keys, chunk_keys, size, 1
        else:
            outcome.deletes = self.record_keys
            self.chain_keys += chunk_keys
            self.snapshot_bytes += size
            self.links += 1
        self.record_keys = []
        self.last_snapshot = self.written
        self.since_snapshot = 0
        log.info(
            "state compacted: a %d-byte snapshot (%s) replaces %d entries",
            size,
            "the state re-encoded" if reencoded else "the pieces since the last one",
            len(outcome.deletes),
        )

    def _snapshot_meta(self) -> dict[str, bytes]:
        """A snapshot's entries besides the state: the fingerprint, the batch ids folded within the replay
        retention (those before are forgotten here), the column types, the offset, the last announcement,
        the view topics' offsets and the universal stream's counts."""
        if self.replay_retention_s is not None:
            horizon = dt.datetime.now(dt.UTC).timestamp() - self.replay_retention_s
            forgotten = [batch for batch, folded in self.applied.items() if folded < horizon]
            for batch in forgotten:
                del self.applied[batch]
            if forgotten:
                log.info("%d batch ids folded before the replay retention forgotten", len(forgotten))
        applied = pl.DataFrame(
            {"batch": list(self.applied), "folded": list(self.applied.values())},
            schema={"batch": pl.String, "folded": pl.Float64},
        )
        entries = {
            FINGERPRINT_KEY: self.fingerprint.encode(),
            APPLIED_KEY: frame_to_ipc(applied),
            DTYPES_KEY: frame_to_ipc(pl.DataFrame(schema=self.detector.dtypes)),
        }
        if self.offset is not None:
            entries[OFFSET_KEY] = str(self.offset).encode()
        if self.announced is not None:
            entries[ANNOUNCED_KEY] = self.announced
        entries |= {SOURCE_PREFIX + key: str(offset).encode() for key, offset in self.sources.items()}
        self.sources_written = dict(self.sources)
        if self.universal is not None and self.universal_state is not None:
            entries[UNIVERSAL_KEY] = self.universal.counts(self.universal_state)
        return entries


def _announcement(
    raised: Sequence[Any], cleared: Sequence[Any], read: Publication, batches: Sequence[str] | None
) -> bytes:
    """A fold's announcement as the state keeps it (:data:`ANNOUNCED_KEY`): finding ids per check."""
    said: dict[str, Any] = {"raised": {}, "cleared": {}}
    for kind, findings in (("raised", raised), ("cleared", cleared)):
        for finding in findings:
            said[kind].setdefault(finding.check, []).append(finding.id)
    said |= {"view": read.view, "batch": read.batch_id, "published": read.published.isoformat(), "batches": batches}
    return json.dumps(said, separators=(",", ":")).encode()


def _epoch(stamp: bytes) -> float:
    """An applied entry's stamp (ISO 8601, written at the fold) as epoch seconds."""
    return dt.datetime.fromisoformat(stamp.decode()).timestamp()


def runs(reads: Sequence[Publication], *, windowed: bool = False) -> list[list[Publication]]:
    """Consecutive publications that one Detector update may fold together, in order: all of them, as
    :func:`merged_batch` nets a withdrawal against the rows the run added before it; with a time window, a
    run breaks where the publication time changes (a batch has one). O(len(reads))."""
    out: list[list[Publication]] = []
    current: list[Publication] = []
    for read in reads:
        if current and windowed and read.published != current[-1].published:
            out.append(current)
            current = []
        current.append(read)
    if current:
        out.append(current)
    return out


def merged_batch(reads: Sequence[Publication]) -> Batch:
    """One batch of one or more publications' rows (a view's frames stacked; frames of one view must have
    the same schema, else polars raises; the table's rows go to ``table``, ``retracted_table``); published
    at the latest of the views' times. The private table is not a publication: its records do not move a
    time window on (a batch of table rows only has no publication time).

    A batch applies its withdrawals before its additions, so where a view's withdrawal comes after rows
    the run added to it, the view's rows are netted in order: a withdrawn row takes back a row the run
    added before it when there is one, else it is a withdrawal of a row published before the run. The
    batch then leaves the rows as the publications one by one would; where one of them would be refused,
    the batch is too (a withdrawal of a row published neither before nor earlier in the run), and the
    worker folds the run's halves apart (:meth:`DetectorService.fold_run`)."""
    views: dict[str | None, list[pl.DataFrame]] = {}
    retracted: dict[str | None, list[pl.DataFrame]] = {}
    ordered: dict[str | None, list[Publication]] = {}
    for read in reads:
        ordered.setdefault(read.view, []).append(read)
    for view, publications in ordered.items():
        first_add = next((i for i, read in enumerate(publications) if read.op == "add"), len(publications))
        if any(read.op == "retract" for read in publications[first_add:]):
            before_run, added = _netted(publications)
            retracted[view], views[view] = [before_run], [added]
            continue
        for read in publications:
            (retracted if read.op == "retract" else views).setdefault(view, []).append(read.rows)
    table = views.pop(None, None)
    withdrawn = retracted.pop(None, None)
    published = [read.published for read in reads if read.view is not None]
    return Batch(
        views={view: pl.concat(frames, how="vertical") for view, frames in views.items() if view is not None},
        retracted={view: pl.concat(frames, how="vertical") for view, frames in retracted.items() if view is not None},
        table=pl.concat(table, how="vertical") if table is not None else None,
        retracted_table=pl.concat(withdrawn, how="vertical") if withdrawn is not None else None,
        published=max(published).timestamp() if published else None,
    )


def _netted(publications: Sequence[Publication]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One view's publications in order as the rows withdrawn from before the run and the rows added
    (:func:`merged_batch`). O(rows)."""
    pending: Counter[tuple[Any, ...]] = Counter()
    before: list[tuple[Any, ...]] = []
    for read in publications:
        if read.op == "add":
            pending.update(read.rows.iter_rows())
            continue
        for row in read.rows.iter_rows():
            if pending[row] > 0:
                pending[row] -= 1
            else:
                before.append(row)
    schema = publications[0].rows.schema
    added = [row for row, count in pending.items() for _ in range(count)]
    return pl.DataFrame(before, schema=schema, orient="row"), pl.DataFrame(added, schema=schema, orient="row")


def _refused(message: str) -> DeadLetter:
    """The dead letter of a batch the Detector refused: only the kind of the rule is kept (its message may
    quote a value). An attribute the table does not type that arrives with another type than its earlier
    rows is ``wrong_type``, as a mistyped declared attribute is when read."""
    if "but earlier rows of it are" in message:
        return DeadLetter("wrong_type", "an attribute's type differs from earlier batches")
    if "never published" in message or "has published none" in message:
        return DeadLetter("refused", "withdraws a row that is not published")
    return DeadLetter("refused", "the detector refused the batch")
