"""What both worker shapes write: dead letters, finding events and state entries (as batches to the
producer), and the metrics of what they folded; a worker that refuses its state stops here."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import faust
from aiokafka.partitioner import DefaultPartitioner
from faust.types import TP

from streamdetect.errors import StateError
from streamdetect.model.topology import Topology
from streamdetect.stream.records import DeadLetter
from streamdetect.stream.routing import Routed, source_of
from streamdetect.stream.sensor import WorkerSensor
from streamdetect.stream.service import Outcome
from streamdetect.stream.state_log import LookedUp
from streamdetect.stream.topics import dead_letter_topic, findings_topic, route_topic, universal_topic

log = logging.getLogger(__name__)


#: Why a worker stopped itself, by application (read by run_worker once the event loop is done).
REFUSED: dict[int, StateError] = {}


PARTITIONER = DefaultPartitioner()


#: Seconds a worker that refuses its state waits for Faust's table recovery to finish before it stops.
RECOVERY_WAIT_S = 30.0


RAW: dict[str, Any] = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}


#: A record to send: (topic, key, value, partition or None, headers or None).
Record = tuple[Any, bytes | None, bytes | None, int | None, list[tuple[str, bytes]] | None]
#: Where the broker put a record: (topic, partition, offset).
Landed = tuple[str, int, int]


#: The producer's batch size: a record's outputs go as batches (Outputs._produce), a few hundred finding
#: events each; under the brokers' default message size limit (1 MB).
BATCH_BYTES = 256 * 1024
#: A re-encoded state is sent and kept this many bytes of chunks at a time (each group awaited before the
#: next is cut): what it holds beside the state's encoded parts, where the whole state's chunks, the
#: producer's batches of them and a RocksDB write of them each held it once more.
SNAPSHOT_GROUP_BYTES = 8 << 20


class Outputs:
    """What both shapes write: dead letters, finding events, state entries, and the metrics."""

    def __init__(self, app: faust.App, topology: Topology, table: Any, metrics: WorkerSensor) -> None:
        self.app = app
        self.findings = app.topic(findings_topic(topology), **RAW)
        self.dead_letters = app.topic(dead_letter_topic(topology), **RAW)
        self.universal = app.topic(universal_topic(topology), **RAW)
        #: The route topic's name: only its records carry a source header the worker wrote.
        self.route = route_topic(topology)
        self.table = table
        self.metrics = metrics
        self._stopping: asyncio.Future[None] | None = None

    async def dead_letter(self, event: faust.EventT[bytes], letter: DeadLetter) -> None:
        message = event.message
        await self.dead_letter_of(
            event.value, headers_of(message), message.topic, letter, partition=message.partition, offset=message.offset
        )

    async def dead_letter_of(
        self,
        value: bytes | None,
        headers: list[tuple[str, bytes]],
        topic: str,
        letter: DeadLetter,
        *,
        partition: int,
        offset: int,
    ) -> None:
        """Send a record that cannot be folded in to the dead-letter topic, keyed by where it was read
        (``<topic>:<partition>:<offset>``): a record read again after a restart (delivery is at least
        once) is dead-lettered again under the same key, so a consumer counts it once (and a compacted
        topic keeps one). A route record is keyed by the view record it came from (its source header):
        the units of two route partitions that both refuse their shares of one view record send two dead
        letters under that one key. A view record's own source header is not read: stage one strips it
        when it routes, so only a publisher can have set it there, and the key says where it was read."""
        source = source_of(headers) if topic == self.route else None
        if source is not None:
            topic, partition, offset = source.topic, source.partition, source.offset
        labelled = [
            *headers,
            ("streamdetect-reason", letter.reason.encode()),
            ("streamdetect-detail", letter.detail.encode()),
            ("streamdetect-topic", topic.encode()),
        ]
        await self._produce([(self.dead_letters, f"{topic}:{partition}:{offset}".encode(), value, None, labelled)])
        log.warning("dead letter from %s: %s", topic, letter.reason)

    async def settle_read(
        self,
        outcome: Outcome,
        value: bytes | None,
        headers: list[tuple[str, bytes]],
        where: tuple[str, int, int],
        *,
        table_partition: int,
    ) -> None:
        """What a record read from the broker outside the consumer (``where``: topic, partition, offset)
        led to: a dead letter keyed where it was read, as the agents key theirs (once per record for a
        consumer), or its events and state entries in ``table_partition`` (the route partition of the
        units that folded it; 0 with one partition)."""
        topic, partition, offset = where
        if outcome.dead is not None:
            await self.dead_letter_of(value, headers, topic, outcome.dead, partition=partition, offset=offset)
        else:
            await self.deliver(outcome, At(table_partition, topic))

    async def deliver(self, outcome: Outcome, message: Any) -> None:
        """Write the record's state entries, then send its finding events; return once the broker has both.

        The state goes first: a worker killed in between leaves a state whose last fold's events may not
        have gone, and whoever restores it sends them again (``DetectorService.take_resent``: that fold's
        raised findings still open and cleared ones not, which a consumer folds idempotently). Events
        first could leave findings the state never held open for good: the record comes again, and when
        it is folded together with others (records taken together) a finding its events raised can be
        raised and cleared within the new run, so that no event clears it. The state entries are
        produced to the table's changelog (in the partition of the record, as Faust's own table writes
        go) and awaited, then kept in the table's local store: Faust's table writes are buffered, and its
        flush before an offset commit gives up after 0.1 s, so under load it committed offsets of records
        whose state was not yet on the broker, and a worker killed then lost them (measured: the
        two-worker test's open set differed from check's)."""
        await self._write_state(outcome.writes.items(), message.partition)
        for snapshot in outcome.snapshots:
            # A re-encoded state, a group of chunks at a time: cut from its parts, sent, kept, let go.
            for group in snapshot.groups(SNAPSHOT_GROUP_BYTES):
                await self._write_state(group.items(), message.partition)
        await self._produce(
            [(self.findings, finding_id, body, None, None) for finding_id, body in outcome.events]
            + [(self.universal, None, body, None, headers) for body, headers in outcome.universal]
        )
        if outcome.deletes:
            # After the snapshot that replaces them is on the broker: tombstones, which compaction drops.
            await self._write_state(((name, None) for name in outcome.deletes), message.partition)
        if outcome.events:
            log.info("%d finding event(s) from %s", len(outcome.events), message.topic)

    async def _write_state(self, entries: Iterable[tuple[str, bytes | None]], partition: int) -> None:
        """Produce state entries (a value None: a tombstone) to the table's changelog in ``partition``, await
        them, then keep them in the local store (:meth:`_keep`)."""
        changelog = self.table.changelog_topic
        records = [(changelog, name.encode(), value, partition, None) for name, value in entries]
        if records:
            self._keep(records, await self._produce(records))

    def _keep(self, records: Sequence[Record], landed: Sequence[Landed]) -> None:
        """Keep changelog records the broker has (``landed``: where each went) in the table's local store,
        as Faust's recovery writes what it reads from the changelog (``apply_changelog_batch``): every store
        takes them outside an event, a tombstone deletes, and a RocksDB store records each partition's last
        offset written, so that a restarted worker reads the changelog from there on, not from its start."""
        events = [
            _Changelog(key, value, _Written(TP(topic, partition), partition, offset, key, value))
            for (_, key, value, _, _), (topic, partition, offset) in zip(records, landed, strict=True)
        ]
        self.table.data.apply_changelog_batch(events, to_key=_same, to_value=_same)

    async def _produce(self, records: Sequence[Record]) -> list[Landed]:
        """Send (topic, key, value, partition, headers) records and return once the broker has them all
        (every output of a record is delivered before its offset can be committed): where each went, in
        the order given.

        As batches per topic partition, built with aiokafka's batch builder (its C record encoder) and
        handed to the producer whole: a record sent alone costs about three times as much Python (a
        future, a partitioner call, Faust's sensors), and a record's finding events can number a
        thousand. Keyed records go to the partition Kafka's default partitioner gives their key (murmur2,
        as before and as Java clients do: a compacted topic keeps one record per key); records without a
        key or partition (universal-relation tuples) are sent one by one, to a partition the producer
        picks. Order is kept within each partition."""
        if not records:
            return []
        # Started here if nothing was sent before (a worker whose first act is reading skipped records).
        producer = await self.app.maybe_start_producer()
        # The aiokafka producer under Faust's: Faust wraps only one-record sends, not the batch builder.
        kafka = producer._ensure_producer()
        batches: dict[tuple[str, int], list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]]] = {}
        partitions: dict[str, list[int]] = {}  # per topic, looked up once per call (not once per record)
        # Per future sent, the records it carries (their indices; a batch's are at its base offset on).
        sent: list[tuple[Any, list[int]]] = []
        for at, (topic, key, value, given, headers) in enumerate(records):
            name = topic.get_topic_name()
            partition = given
            if partition is None:
                if key is None:
                    sent.append((await producer.send(name, key, value, None, None, headers), [at]))
                    continue
                if name not in partitions:
                    partitions[name] = sorted(await kafka.partitions_for(name))
                known = partitions[name]
                partition = known[0] if len(known) == 1 else PARTITIONER(key, known, known)
            batches.setdefault((name, partition), []).append((at, key, value, headers or []))
        for (name, partition), rows in batches.items():
            batch = kafka.create_batch()
            carried: list[int] = []
            for at, key, value, headers in rows:
                if batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
                    # Full: send it, start the next (a first record always fits, whatever its size).
                    sent.append((await kafka.send_batch(batch, name, partition=partition), carried))
                    batch = kafka.create_batch()
                    carried = []
                    batch.append(key=key, value=value, timestamp=None, headers=headers)
                carried.append(at)
            sent.append((await kafka.send_batch(batch, name, partition=partition), carried))
        landed: list[Landed] = [("", 0, 0)] * len(records)
        metadata = await asyncio.gather(*(future for future, _ in sent))
        for where, (_, indices) in zip(metadata, sent, strict=True):
            for i, at in enumerate(indices):
                landed[at] = (where.topic, where.partition, where.offset + i)
        return landed

    def refuse(self, refused: StateError) -> None:
        """Stop the worker: its state table was written under other parameters (a restore refused it).
        :func:`run_worker` then raises the error, which the command reports in one line, exit code 2."""
        log.error("%s", refused)
        REFUSED[id(self.app)] = refused
        # Stop without waiting for the records taken and not folded: the agent returns with the ones
        # take_events still holds (handed over or not), which nothing acknowledges then, and Faust's stop
        # would wait for them for good. Unacknowledged, they are not committed: this worker folded none.
        self.app.conf.stream_wait_empty = False
        self._stopping = asyncio.ensure_future(self._stop_once_recovered())

    async def _stop_once_recovered(self) -> None:
        """Faust's own clean stop (SIGTERM, as Ctrl-C or a supervisor's), once its table recovery has
        finished: a stop in the middle of it (the tail check can restore a unit then) cancels Faust's
        seek to the committed offsets, which logs a traceback (a CI run saw one)."""
        recovery = getattr(self.app.tables, "recovery", None)
        completed = getattr(recovery, "completed", None)
        if completed is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(completed.wait(), timeout=RECOVERY_WAIT_S)
        os.kill(os.getpid(), signal.SIGTERM)

    async def settle(self, event: faust.EventT[bytes], outcome: Outcome) -> None:
        """What a folded record leads to: its lag noted, then a dead letter or its events and state."""
        self.lag(event.message)
        if outcome.dead is not None:
            await self.dead_letter(event, outcome.dead)
        else:
            await self.deliver(outcome, event.message)

    async def routed(self, event: faust.EventT[bytes], routed: Routed) -> None:
        """What the first stage made of a view record: its lag noted, then a dead letter or its count."""
        self.lag(event.message)
        if routed.dead is not None:
            self.metrics.folded(Outcome(dead=routed.dead), 0.0)
            await self.dead_letter(event, routed.dead)
        elif routed.publication is not None:
            self.metrics.consumed(routed.publication)

    def lag(self, message: Any) -> None:
        # The highwater is the offset the next record will take: what is left after this one.
        left = self.app.consumer.highwater(message.tp) - message.offset - 1
        self.metrics.lag(message.topic, message.partition, left)

    def entries(self, prefix: str = "") -> LookedUp:
        """The table's entries whose keys start with ``prefix``, keys as text, each value read from the
        table's store when looked up (a RocksDB store's entries are then never all in memory at once)."""
        store = self.table.data
        return LookedUp(store, {name: key for key in store if (name := key_text(key)).startswith(prefix)})


def headers_of(message: Any) -> list[tuple[str, bytes]]:
    """A record's headers as a list of pairs (Faust types them as a list or a mapping)."""
    raw = message.headers or ()
    return list(raw.items()) if isinstance(raw, Mapping) else list(raw)


@dataclass(frozen=True)
class At:
    """Where a record read outside the consumer came from (what :meth:`Outputs.deliver` needs of it)."""

    partition: int
    topic: str = ""


@dataclass(frozen=True)
class _Written:
    """What a store's ``apply_changelog_batch`` reads of a changelog record's message."""

    tp: TP
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class _Changelog:
    """A changelog record written by the worker, shaped as the events Faust's recovery hands its store."""

    key: bytes | None
    value: bytes | None
    message: _Written


def _same(value: Any) -> Any:
    return value


def key_text(key: object) -> str:
    return key.decode() if isinstance(key, bytes) else str(key)
