"""The two stages of a worker that shares its work: route each view record to the partitions whose units
need it, then fold it into each unit's Detector (the split: streamdetect/partitioning.py).

Stage one (:class:`Router`) reads a view record as the single worker does (a record that cannot be read
is a dead letter there, once) and forwards it as it came to every partition of the route topic that
holds a unit. Stage two (:class:`Units`) keeps one :class:`~streamdetect.stream.service.DetectorService`
per unit of the partitions this worker holds, built from the state table at a partition's first record
and dropped when Kafka takes the partition away (another worker goes on from the table's changelog);
each unit folds its share of the rows (a value bucket's, or all). A replayed view record is routed again
with its batch id, and each unit skips a batch it has folded in, so replays stay harmless.

No Kafka or Faust here: the worker (:mod:`streamdetect.stream.worker`) moves the bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from streamdetect.checks.findings import Finding
from streamdetect.errors import StateError
from streamdetect.partitioning import Plan, Unit
from streamdetect.relational.universal_stream import UniversalStream
from streamdetect.stream.records import (
    HEADER_TABLE,
    HEADER_VIEW,
    DeadLetter,
    Headers,
    Publication,
    Topic,
    decode_record,
)
from streamdetect.stream.service import DetectorService, Outcome, runs
from streamdetect.stream.settings import COMPACT_BYTES, DEFAULT_MAX_BYTES, REPLAY_RETENTION_S
from streamdetect.stream.state_log import Source

#: A routed record is a view record stage one has read: no reason to refuse it for its size again.
_ROUTED_MAX_BYTES = 1 << 40
#: Header of a routed record: where stage one read it (``topic:partition:offset``, :class:`Source`).
HEADER_SOURCE = "streamdetect-source"
#: Header of a marker: a routed record without rows that stands for a view record stage one
#: dead-lettered, so that the view offsets reaching stage two stay contiguous (:meth:`Units.source_gap`).
HEADER_MARKER = "streamdetect-marker"


def source_of(headers: Headers) -> Source | None:
    """The source a routed record names (None: none, or not readable: a record routed by an older
    worker, checked no further)."""
    for key, raw in headers or ():
        if key == HEADER_SOURCE:
            try:
                return Source.decode(raw)
            except ValueError:
                return None
    return None


def is_marker(headers: Headers) -> bool:
    """Whether a routed record is a marker (:data:`HEADER_MARKER`)."""
    return any(key == HEADER_MARKER for key, _ in headers or ())


@dataclass
class Routed:
    """What stage one made of a record: a dead letter, or the publication and its routed records
    (partition of the route topic, value, headers)."""

    publication: Publication | None = None
    dead: DeadLetter | None = None
    records: list[tuple[int, bytes, list[tuple[str, bytes]]]] = field(default_factory=list)


class Router:
    """Stage one: read a view record and send it to every partition that holds a unit (stateless)."""

    def __init__(self, plan: Plan, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.plan = plan
        self.max_bytes = max_bytes
        self.partitions = sorted({plan.partition_of(unit) for unit in plan.units()})

    def handle(self, value: bytes | None, headers: Headers, view: Topic, source: Source | None = None) -> Routed:
        """The record's routed records: its value and headers as they came (the view named in a header,
        as the route topic does not tell it), once per partition holding a unit. O(size of the record).
        With its ``source`` (where it was read) in a header of each; a record that cannot be read is
        then routed as a marker (no value), so stage two sees every offset of the view topic."""
        read = decode_record(self.plan.topology, value, headers, view=view, max_bytes=self.max_bytes)
        origin = [] if source is None else [(HEADER_SOURCE, source.encode())]
        if isinstance(read, DeadLetter):
            marked = [] if source is None else [(p, b"", [*origin, (HEADER_MARKER, b"dead")]) for p in self.partitions]
            return Routed(dead=read, records=marked)
        assert value is not None  # a record without a value is a dead letter
        dropped = (HEADER_VIEW, HEADER_TABLE, HEADER_SOURCE, HEADER_MARKER)
        named = [(key, raw) for key, raw in headers or () if key not in dropped]
        said = (HEADER_VIEW, read.view.encode()) if read.view is not None else (HEADER_TABLE, b"")
        named += [said, *origin]
        return Routed(publication=read, records=[(partition, value, named) for partition in self.partitions])


class Units:
    """Stage two: the Detectors of the units in the partitions this worker holds.

    ``entries(prefix)`` returns the state table's entries whose keys start with ``prefix`` (what a
    unit's service wrote, possibly on another worker); a unit's service is rebuilt from them at its
    partition's first record."""

    def __init__(
        self,
        plan: Plan,
        entries: Callable[[str], Mapping[str, bytes]],
        universal_rows: int = 0,
        *,
        compact_bytes: int | None = COMPACT_BYTES,
        replay_retention_s: float | None = REPLAY_RETENTION_S,
    ) -> None:
        self.plan = plan
        self.entries = entries
        self.universal_rows = universal_rows
        self.compact_bytes = compact_bytes
        self.replay_retention_s = replay_retention_s
        self.services: dict[Unit, DetectorService] = {}
        #: The highest offset handled per partition since this worker got it (folded or not).
        self.seen: dict[int, int] = {}
        #: Per partition, the events its units' last folds announced, to send again since they were
        #: rebuilt (:meth:`DetectorService.take_resent`): with the partition's next outcome delivered.
        self.resent: dict[int, list[tuple[bytes, bytes | None]]] = {}
        #: Told the findings open in a unit restored from the table, before it folds anything; and, when
        #: units were dropped (their partitions went to another worker), the findings open in those left.
        self.on_restored: Callable[[list[Finding]], None] | None = None
        self.on_revoked: Callable[[list[Finding]], None] | None = None

    def service(self, unit: Unit) -> DetectorService:
        """The unit's service, restored from the table when this worker has not built it since it got
        the unit's partition."""
        found = self.services.get(unit)
        if found is None:
            if not self.services:
                self._refuse_stale()
            # Each identifier's units emit the channels whose first identifier is theirs: once each.
            universal = (
                UniversalStream(self.plan.topology, self.universal_rows, owner=unit.identifier)
                if self.universal_rows and unit.by_value
                else None
            )
            found = unit_service(
                self.plan,
                unit,
                universal=universal,
                compact_bytes=self.compact_bytes,
                replay_retention_s=self.replay_retention_s,
            )
            found.restore(self.entries(found.prefix))
            self.services[unit] = found
            self.resent.setdefault(self.plan.partition_of(unit), []).extend(found.take_resent())
            opened = found.take_restored_open()
            if self.on_restored is not None:
                self.on_restored(opened)
        return found

    def _refuse_stale(self) -> None:
        """Raise :class:`StateError` when the table holds entries of an earlier layout of the units that
        this plan would not read: its units would start empty and miss every row folded before."""
        current = tuple(f"{unit.name}/" for unit in self.plan.units())
        for prefix in self.plan.stale_prefixes():
            if any(not key.startswith(current) for key in self.entries(prefix)):
                raise StateError(
                    "the worker's state topic was written by an earlier version that kept every whole-state "
                    f"check in one unit ({prefix!r} keys); this version gives each check a unit of its own: "
                    "delete the application's changelog topics to start afresh"
                )

    def next_offset(self, partition: int) -> int | None:
        """The offset of the route record the units of ``partition`` expect next: one past the last they
        folded in (their state says, restored when not built), or None when no state records an offset.
        A record beyond it means records in between were not delivered (:meth:`handle` with offsets)."""
        offsets = [self.service(unit).offset for unit in self.plan.units_in(partition)]
        seen = [offset for offset in [*offsets, self.seen.get(partition)] if offset is not None]
        return max(seen) + 1 if seen else None

    def source_gap(self, partition: int, source: Source) -> tuple[int, int] | None:
        """The view records of ``source``'s topic partition that the units of ``partition`` have not seen
        and that come before it, as (start, end) offsets, or None (none missing, or nothing known of that
        topic partition yet). Stage one routes every view record (a dead-lettered one as a marker), so a
        jump means Kafka's consumer skipped records there: its offsets were committed past them (as
        Faust's were seen to do around a rebalance). O(units of the partition)."""
        expected = self.next_source_offsets(partition).get(source.key)
        return (expected, source.offset) if expected is not None and source.offset > expected else None

    def next_source_offsets(self, partition: int) -> dict[str, int]:
        """Per view topic partition known to the units of ``partition``, the offset of the view record
        they expect next (:meth:`source_gap`)."""
        expected: dict[str, int] = {}
        for unit in self.plan.units_in(partition):
            for key, offset in self.service(unit).sources.items():
                expected[key] = max(offset, expected.get(key, offset))
        return expected

    def note_source(self, partition: int, source: Source) -> None:
        """Remember that the view record ``source`` reached ``partition`` (folded or not), in each unit's
        state (written with its next fold)."""
        for unit in self.plan.units_in(partition):
            self.service(unit).note_source(source)

    def handle(self, value: bytes | None, headers: Headers, partition: int, offset: int | None = None) -> Outcome:
        """:meth:`_handle`, with the events the partition's rebuilt units announced again first (a dead
        letter's outcome is not delivered as events: they wait for the next outcome)."""
        outcome = self._handle(value, headers, partition, offset)
        if outcome.dead is None:
            outcome.events = [*self.resent.pop(partition, []), *outcome.events]
        return outcome

    def _handle(self, value: bytes | None, headers: Headers, partition: int, offset: int | None = None) -> Outcome:
        """Fold one routed record into the units of its partition, each its share of the rows: all or
        none (a batch one unit refuses is a dead letter and changes no unit). The outcome merges the
        units': their writes and events; replayed when every unit had folded the batch in. ``offset``
        (the record's in its route partition) is kept with each unit's state, for :meth:`next_offset`,
        and so is the view record its header names (where stage one read it), for :meth:`source_gap`.
        A marker changes nothing (an empty outcome)."""
        read = self._read(partition, value, headers, offset)
        if not isinstance(read, Publication):
            return read
        shares = self._shares(partition, read)
        if not shares:
            return Outcome(replayed=True, publication=read)
        if len(shares) > 1:  # atomic across units: none folds it if one would refuse it
            for service, share in shares:
                refused = service.refusal(share)
                if refused is not None:
                    return Outcome(dead=refused)
        folded = []
        for service, share in shares:
            outcome = service.fold(share, offset)
            if outcome.dead is not None:
                return outcome  # one unit only (checked above otherwise): nothing folded
            folded.append(outcome)
        return _merged(read, folded)

    def handle_many(self, partition: int, records: Sequence[tuple[bytes | None, Headers, int | None]]) -> list[Outcome]:
        """:meth:`handle` for consecutive routed records of one partition (value, headers, offset), each
        unit folding its shares in as few Detector updates as their order allows
        (:meth:`DetectorService.fold_run`): one outcome per record, in order, merged across the units (a
        record's is ``merged`` when every unit folded it with a later record, whose outcome carries the
        effects). All or none per record across units, as :meth:`handle`: when a unit would refuse a share
        as the state stands, the records go one by one."""
        reads: list[tuple[int, Publication, list[tuple[DetectorService, Publication]]]] = []
        outcomes = [Outcome() for _ in records]
        for position, (value, headers, offset) in enumerate(records):
            read = self._read(partition, value, headers, offset)
            if not isinstance(read, Publication):
                outcomes[position] = read
                continue
            shares = self._shares(partition, read)
            if len(shares) > 1 and any(service.refusal(share) is not None for service, share in shares):
                return self._one_by_one(partition, records, outcomes)
            outcomes[position] = Outcome(replayed=not shares, publication=read)
            reads.append((position, read, shares))
        by_service: dict[int, tuple[DetectorService, list[tuple[int, Publication]]]] = {}
        for position, _, shares in reads:
            for service, share in shares:
                by_service.setdefault(id(service), (service, []))[1].append((position, share))
        folded: dict[int, list[Outcome]] = {}
        for service, taken in by_service.values():
            at = {id(share): position for position, share in taken}
            for run in runs([share for _, share in taken], windowed=service.detector.window is not None):
                offsets = [records[at[id(share)]][2] for share in run]
                for share, outcome in zip(run, service.fold_run(run, offsets), strict=True):
                    folded.setdefault(at[id(share)], []).append(outcome)
        for position, read, shares in reads:
            if shares:
                outcomes[position] = _merged(read, folded[position])
        # The events the partition's rebuilt units announced again, with the first outcome delivered.
        first = next((outcome for outcome in outcomes if outcome.dead is None), None)
        if first is not None:
            first.events = [*self.resent.pop(partition, []), *first.events]
        return outcomes

    def _one_by_one(
        self, partition: int, records: Sequence[tuple[bytes | None, Headers, int | None]], outcomes: list[Outcome]
    ) -> list[Outcome]:
        """:meth:`handle_many`'s records folded one by one (none folded yet; the dead letters among those
        read so far have their outcomes, and a marker is handled again only to note its source)."""
        for position, (value, headers, offset) in enumerate(records):
            if outcomes[position].dead is None:
                outcomes[position] = self.handle(value, headers, partition, offset)
        return outcomes

    def _read(self, partition: int, value: bytes | None, headers: Headers, offset: int | None) -> Publication | Outcome:
        """A routed record read, its offset and source noted: the publication, or the outcome of a
        marker (empty) or of a record that cannot be read (a dead letter)."""
        if offset is not None:
            self.seen[partition] = max(offset, self.seen.get(partition, offset))
        source = source_of(headers)
        if source is not None:
            self.note_source(partition, source)
        if is_marker(headers):
            return Outcome()
        read = decode_record(self.plan.topology, value, headers, max_bytes=_ROUTED_MAX_BYTES)
        return Outcome(dead=read) if isinstance(read, DeadLetter) else read

    def _shares(self, partition: int, read: Publication) -> list[tuple[DetectorService, Publication]]:
        """The units of ``partition`` that fold ``read``, each with its share of the rows (those that have
        folded its batch already left out)."""
        shares = []
        for unit in self.plan.units_in(partition):
            service = self.service(unit)
            rows = self.plan.rows_for(unit, read.view, read.rows)
            # With a window, every view record moves the unit's time on, rows for it or not; the table's
            # records go to the units that read the table, even with no rows (an empty table is seen).
            moves = service.detector.window is not None and read.view is not None
            table = read.view is None and self.plan.reads_table(unit)
            if (rows.height or moves or table) and read.batch_id not in service.applied:
                shares.append((service, dataclasses.replace(read, rows=rows)))
        return shares

    def announce(self, partition: int) -> Outcome:
        """The status events of the units of ``partition`` that have not reported their checks' status
        since this worker got it (:meth:`DetectorService.status`; restoring them from the table first)."""
        announced = Outcome()
        for unit in self.plan.units_in(partition):
            service = self.service(unit)
            if service.table_readers and service.reported is None:
                status = service.status(Outcome())
                announced.events += status.events
                announced.take_status(status)
        # The events the units rebuilt above announced again go first.
        announced.events = [*self.resent.pop(partition, []), *announced.events]
        return announced

    def revoke(self, partitions: Iterable[int]) -> None:
        """Forget the units of partitions taken away: another worker goes on with them."""
        gone = set(partitions)
        for partition in gone:
            self.seen.pop(partition, None)
            self.resent.pop(partition, None)  # whoever rebuilds the units sends them
        dropped = [unit for unit in self.services if self.plan.partition_of(unit) in gone]
        for unit in dropped:
            del self.services[unit]
        if dropped and self.on_revoked is not None:
            self.on_revoked([finding for service in self.services.values() for finding in service.detector.findings()])

    @property
    def state_bytes(self) -> int:
        """Bytes of state held by the units built, as restored plus written since."""
        return sum(service.state_bytes for service in self.services.values())


def unit_service(
    plan: Plan,
    unit: Unit,
    *,
    universal: UniversalStream | None = None,
    compact_bytes: int | None = COMPACT_BYTES,
    replay_retention_s: float | None = REPLAY_RETENTION_S,
) -> DetectorService:
    """The service that folds ``unit``'s share: its checks' plan, and its entries in the table under the
    unit's prefix with the plan's partition count kept beside the fingerprint (a state built under another
    placement holds other values)."""
    planned = plan.check_plan(unit)
    return DetectorService(
        planned.topology,
        prefix=f"{unit.name}/",
        placement=f"partitions={plan.partitions}",
        universal=universal,
        compact_bytes=compact_bytes,
        replay_retention_s=replay_retention_s,
        plan=planned,
    )


def _merged(read: Publication, outcomes: Sequence[Outcome]) -> Outcome:
    """One record's outcomes in the units that folded it, as one: their writes, events and status; a
    dead letter when a unit refused it (then the others did too: :meth:`Units.handle`); ``merged`` or
    ``replayed`` only when every unit's is."""
    dead = next((outcome for outcome in outcomes if outcome.dead is not None), None)
    if dead is not None:
        return dead
    merged = Outcome(publication=read)
    carried = [outcome for outcome in outcomes if not outcome.merged and not outcome.replayed]
    merged.merged = not carried and any(outcome.merged for outcome in outcomes)
    merged.replayed = all(outcome.replayed for outcome in outcomes)
    earliest = [outcome.earliest for outcome in outcomes if outcome.earliest is not None]
    merged.earliest = min(earliest) if earliest else None
    for outcome in carried:
        merged.writes.update(outcome.writes)
        merged.snapshots += outcome.snapshots
        merged.deletes += outcome.deletes
        merged.events += outcome.events
        merged.raised += outcome.raised
        merged.cleared += outcome.cleared
        merged.universal += outcome.universal
        merged.take_status(outcome)
        for check, seconds in outcome.check_seconds.items():  # a check's units together
            merged.check_seconds[check] = merged.check_seconds.get(check, 0.0) + seconds
    return merged
