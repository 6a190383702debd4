"""The Faust worker: view topics in, findings and dead letters out, the Detector's state in a Faust table.

Every record goes through :class:`~streamdetect.stream.service.DetectorService`: a dead letter is produced
to the dead-letter topic (the record's value and headers, with the reason and detail as headers); a
publication is folded into the Detector, its raised and cleared findings go to the findings topic keyed
by finding id, and the state pieces it wrote go to a table whose changelog topic restores a replacement
worker. A replayed record (same batch id) changes nothing.

Two shapes, by the number of partitions the work is split into (``--partitions``):

* **1** (the default): one agent reads every view topic and folds each record into one Detector, whose
  state is the table ``state``. The view topics must have one partition: one worker holds it all.
* **P > 1**: the work is split into units, one per identifier and value bucket
  (:mod:`streamdetect.partitioning`), spread over the P partitions of the route topic. Agent
  ``split_records`` reads the view topics (any partition count), dead-letters what cannot be read and
  forwards each record to every partition holding a unit (:class:`~streamdetect.stream.routing.Router`);
  agent ``detect`` reads the route topic and folds each record into the units of its partition, each its
  share of the rows (:class:`~streamdetect.stream.routing.Units`), their state in the table ``units``,
  co-partitioned with the route topic (Faust writes a table entry to the partition of the record being
  processed). Kafka's consumer group shares the partitions of both topics among the workers of the
  application; a worker that gets a route partition rebuilds its units from the table's changelog, one
  that loses it forgets them. This is Faust's repartitioning (a topic between two agents, as
  ``group_by`` makes), with the partitions chosen by the plan rather than by Kafka's hash of a key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faust
from aiokafka.partitioner import DefaultPartitioner

from streamdetect.detector import Detector, checks_to_run, table_readers
from streamdetect.errors import StateError, TopologyError
from streamdetect.model.topology import Topology
from streamdetect.partitioning import plan
from streamdetect.relational.universal_stream import UniversalStream
from streamdetect.stream.metrics import WorkerMetrics
from streamdetect.stream.publish import committed_offsets, input_topics, read_range
from streamdetect.stream.records import DEFAULT_MAX_BYTES, FINDINGS_MAX_BYTES, DeadLetter, Topic
from streamdetect.stream.routing import Routed, Router, Units, source_of
from streamdetect.stream.security import from_environment
from streamdetect.stream.service import DetectorService, Outcome, Source
from streamdetect.stream.settings import COMPACT_BYTES, REPLAY_RETENTION_S
from streamdetect.stream.topics import dead_letter_topic, findings_topic, route_topic, universal_topic

log = logging.getLogger(__name__)
#: Why a worker stopped itself, by application (read by run_worker once the event loop is done).
_REFUSED: dict[int, StateError] = {}
_PARTITIONER = DefaultPartitioner()
_ILLEGAL = re.compile(r"[^A-Za-z0-9._-]")
#: Seconds the route agent must be idle before the tail check looks for records the consumer skipped.
TAIL_CHECK_S = 5.0
#: Seconds between two seeks back of one partition whose committed offset stops short of its end (:class:`_Unstick`).
UNSTICK_S = 30.0
#: Seconds a worker that refuses its state waits for Faust's table recovery to finish before it stops.
RECOVERY_WAIT_S = 30.0
#: Seconds the one-stage agent must be idle before a due state snapshot is taken (checked as often).
IDLE_SNAPSHOT_S = 0.5
_RAW: dict[str, Any] = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}
#: The producer's batch size: a record's outputs go as batches (_Outputs._produce), a few hundred finding
#: events each; under the brokers' default message size limit (1 MB).
BATCH_BYTES = 256 * 1024


def app_id(topology: Topology) -> str:
    """The Faust application (consumer group, changelog topic prefix) of a topology."""
    return f"streamdetect-{_ILLEGAL.sub('_', topology.name)}"


def state_table(partitions: int) -> str:
    """The name of the worker's state table: ``state`` with one partition, ``units`` with more (another
    changelog topic, as its keys differ)."""
    return "state" if partitions == 1 else "units"


class _Outputs:
    """What both shapes write: dead letters, finding events, state entries, and the metrics."""

    def __init__(self, app: faust.App, topology: Topology, table: Any, metrics: WorkerMetrics | None) -> None:
        self.app = app
        self.findings = app.topic(findings_topic(topology), **_RAW)
        self.dead_letters = app.topic(dead_letter_topic(topology), **_RAW)
        self.universal = app.topic(universal_topic(topology), **_RAW)
        #: The route topic's name: only its records carry a source header the worker wrote.
        self.route = route_topic(topology)
        self.table = table
        self.metrics = metrics
        self._stopping: asyncio.Future[None] | None = None

    async def dead_letter(self, event: faust.EventT[bytes], letter: DeadLetter) -> None:
        message = event.message
        await self.dead_letter_of(
            event.value, _headers(message), message.topic, letter, partition=message.partition, offset=message.offset
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
            await self.deliver(outcome, _At(table_partition, topic))

    async def deliver(self, outcome: Outcome, message: Any) -> None:
        """Send the record's finding events, then its state entries; return once the broker has both.

        Events go first: a worker killed in between sees the record again and sends the events again
        (consumers fold them idempotently); the other order could mark the record done with its events
        never sent. The state entries are produced to the table's changelog (in the partition of the
        record, as Faust's own table writes go) and awaited, then kept in the table's local store:
        Faust's table writes are buffered, and its flush before an offset commit gives up after 0.1 s,
        so under load it committed offsets of records whose state was not yet on the broker, and a
        worker killed then lost them (measured: the two-worker test's open set differed from check's)."""
        await self._produce(
            [(self.findings, finding_id, body, None, None) for finding_id, body in outcome.events]
            + [(self.universal, None, body, None, headers) for body, headers in outcome.universal]
        )
        changelog = self.table.changelog_topic
        await self._produce(
            [(changelog, name.encode(), piece, message.partition, None) for name, piece in outcome.writes.items()]
        )
        for name, piece in outcome.writes.items():
            self.table.data[name.encode()] = piece
        if outcome.deletes:
            # After the snapshot that replaces them is on the broker: tombstones, which compaction drops.
            await self._produce([(changelog, name.encode(), None, message.partition, None) for name in outcome.deletes])
            for name in outcome.deletes:
                self.table.data.pop(name.encode(), None)
        if outcome.events:
            log.info("%d finding event(s) from %s", len(outcome.events), message.topic)

    async def _produce(
        self, records: Sequence[tuple[Any, bytes | None, bytes | None, int | None, list[tuple[str, bytes]] | None]]
    ) -> None:
        """Send (topic, key, value, partition, headers) records and return once the broker has them all
        (every output of a record is delivered before its offset can be committed).

        As batches per topic partition, built with aiokafka's batch builder (its C record encoder) and
        handed to the producer whole: a record sent alone costs about three times as much Python (a
        future, a partitioner call, Faust's sensors), and a record's finding events can number a
        thousand. Keyed records go to the partition Kafka's default partitioner gives their key (murmur2,
        as before and as Java clients do: a compacted topic keeps one record per key); records without a
        key or partition (universal-relation tuples) are sent one by one, to a partition the producer
        picks. Order is kept within each partition."""
        if not records:
            return
        # Started here if nothing was sent before (a worker whose first act is reading skipped records).
        producer = await self.app.maybe_start_producer()
        # The aiokafka producer under Faust's: Faust wraps only one-record sends, not the batch builder.
        kafka = producer._ensure_producer()
        batches: dict[tuple[str, int], list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]] = {}
        partitions: dict[str, list[int]] = {}  # per topic, looked up once per call (not once per record)
        sent = []
        for topic, key, value, given, headers in records:
            name = topic.get_topic_name()
            partition = given
            if partition is None:
                if key is None:
                    sent.append(await producer.send(name, key, value, None, None, headers))
                    continue
                if name not in partitions:
                    partitions[name] = sorted(await kafka.partitions_for(name))
                known = partitions[name]
                partition = known[0] if len(known) == 1 else _PARTITIONER(key, known, known)
            batches.setdefault((name, partition), []).append((key, value, headers or []))
        for (name, partition), rows in batches.items():
            batch = kafka.create_batch()
            for key, value, headers in rows:
                if batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
                    # Full: send it, start the next (a first record always fits, whatever its size).
                    sent.append(await kafka.send_batch(batch, name, partition=partition))
                    batch = kafka.create_batch()
                    batch.append(key=key, value=value, timestamp=None, headers=headers)
            sent.append(await kafka.send_batch(batch, name, partition=partition))
        await asyncio.gather(*sent)

    def refuse(self, refused: StateError) -> None:
        """Stop the worker: its state table was written under other parameters (a restore refused it).
        :func:`run_worker` then raises the error, which the command reports in one line, exit code 2."""
        log.error("%s", refused)
        _REFUSED[id(self.app)] = refused
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
            if self.metrics is not None:
                self.metrics.folded(Outcome(dead=routed.dead), 0.0)
            await self.dead_letter(event, routed.dead)
        elif self.metrics is not None and routed.publication is not None:
            self.metrics.consumed(routed.publication)

    def lag(self, message: Any) -> None:
        if self.metrics is not None:
            # The highwater is the offset the next record will take: what is left after this one.
            left = self.app.consumer.highwater(message.tp) - message.offset - 1
            self.metrics.lag.labels(message.topic, str(message.partition)).set(max(left, 0))

    def entries(self, prefix: str = "") -> dict[str, bytes]:
        """The table's entries whose keys start with ``prefix``, keys as text."""
        return {name: value for key, value in self.table.items() if (name := _text(key)).startswith(prefix)}


def build_app(
    topology: Topology,
    bootstrap: str,
    *,
    datadir: Path,
    partitions: int = 1,
    checks: Sequence[str] | None = None,
    store: str = "memory://",
    web_port: int | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    metrics: WorkerMetrics | None = None,
    session_timeout_s: float = 30.0,
    universal_rows: int = 0,
    coalesce: int = 32,
    coalesce_wait_s: float = 0.01,
    compact_bytes: int | None = COMPACT_BYTES,
    replay_retention_s: float | None = REPLAY_RETENTION_S,
) -> faust.App:
    """The worker's Faust application for ``topology`` on the brokers ``bootstrap`` (host:port, comma
    separated), in the shape ``partitions`` gives (module docstring). Faust's web server binds 127.0.0.1
    only, and only when ``web_port`` is given: two workers on one host would otherwise both take port
    6066. ``metrics`` counts what every record led to (served by the caller, :meth:`WorkerMetrics.serve`).
    ``session_timeout_s``: how long the group waits for a silent worker before its partitions go to the
    others (a killed worker's partitions wait that long). ``universal_rows``: with more than zero, the
    universal-relation stream is written to its topic, at most that many tuples per channel (per unit
    with several partitions); it follows the linkage check's closure, so the topology must run linkage.
    ``coalesce``: at most that many records taken together (those already waiting, or arriving within
    ``coalesce_wait_s`` of the end of the previous update: Faust's ``take_events`` waits that long
    whenever fewer are waiting, so it is idle time on every update of a backlog) and folded in as few
    Detector updates as their order allows (:meth:`DetectorService.handle_many`): a worker with a
    backlog folds bigger batches, which cost far less per row; a quiet stream is folded record by record
    after at most ``coalesce_wait_s``. ``compact_bytes``: a unit's state entries are replaced by a
    snapshot once that many bytes were written since the last one (:class:`DetectorService`), so the
    compacted changelog, and a replacement worker's restore, stay bounded by about twice the state;
    ``replay_retention_s``: how long a folded batch id is remembered past a snapshot (a record redelivered
    later is folded again)."""
    security = from_environment()
    brokers = [f"kafka://{address.strip()}" for address in bootstrap.split(",") if address.strip()]
    app = faust.App(
        app_id(topology),
        broker=brokers,
        broker_credentials=security.faust_credentials(),
        store=store,
        datadir=str(datadir),
        web_enabled=web_port is not None,
        web_host="127.0.0.1",
        web_port=web_port or 6066,
        topic_partitions=partitions,
        consumer_auto_offset_reset="earliest",
        # No standby copies of the state: measured here, a standby's changelog records could stall Faust's
        # fetcher after a rebalance for good (both workers idle, lag frozen; as robinhood/faust#583
        # describes). A worker taking a partition over reads its changelog from the start instead, as the
        # memory store does after any restart.
        table_standby_replicas=0,
        broker_session_timeout=session_timeout_s,
        broker_heartbeat_interval=min(3.0, session_timeout_s / 3),
        producer_acks=-1,
        # Finding events can be large (a SIND class lists its members): up to the findings topic's limit.
        producer_max_request_size=max(max_bytes, FINDINGS_MAX_BYTES) + 64 * 1024,
        producer_max_batch_size=BATCH_BYTES,
        consumer_max_fetch_size=max(max_bytes + 64 * 1024, 4_194_304),
    )
    # bytes keys and values: Faust then writes and recovers the changelog raw (other types go through JSON).
    table = app.Table(state_table(partitions), default=None, partitions=partitions, key_type=bytes, value_type=bytes)
    out = _Outputs(app, topology, table, metrics)
    if universal_rows and "linkage" not in checks_to_run(topology, checks):
        raise TopologyError(
            "the universal-relation stream (--universal-rows) follows the linkage check's closure, "
            "and this topology does not run linkage",
            file=topology.path,
            key="checks",
        )
    if partitions == 1:
        universal = UniversalStream(topology, universal_rows) if universal_rows else None
        service = DetectorService(
            topology,
            checks,
            max_bytes,
            universal=universal,
            compact_bytes=compact_bytes,
            replay_retention_s=replay_retention_s,
            defer_compaction=True,  # snapshots in idle time (_one_stage), not on the records' path
        )
        _one_stage(app, topology, out, service, coalesce=coalesce, wait_s=coalesce_wait_s, bootstrap=bootstrap)
        examined = service.detector
    else:
        units = Units(
            plan(topology, partitions, checks),
            out.entries,
            universal_rows,
            compact_bytes=compact_bytes,
            replay_retention_s=replay_retention_s,
        )
        _two_stages(app, topology, out, units, max_bytes, bootstrap=bootstrap)
        examined = Detector(topology, checks)  # what the checks examine as `check` counts it, units together
    if metrics is not None:
        metrics.examined(examined.summaries({}), table_readers(topology, checks))
    return app


def _one_stage(
    app: faust.App,
    topology: Topology,
    out: _Outputs,
    service: DetectorService,
    *,
    coalesce: int,
    wait_s: float,
    bootstrap: str,
) -> None:
    topics = input_topics(topology, list(service.detector.checks))
    metrics = out.metrics
    # One fold at a time, the agent's, the idle snapshot's or the tail check's; when the agent last
    # finished one, and when the tail check last compared with the group's commits.
    folding = asyncio.Lock()
    folded_at = [time.monotonic()]
    checked_at = [0.0]
    skipped = _Skipped(service, out, topics, bootstrap)
    unstick = _Unstick.installed(app, bootstrap, topics, folding)

    @app.agent(app.topic(*topics, **_RAW), concurrency=1)
    async def ingest(stream: faust.StreamT[bytes]) -> None:
        # take_events acks the events it yields once the loop's body is done with them: their offsets
        # are committed after their effects are delivered (settle), as one event at a time would be.
        async for events in stream.take_events(coalesce, within=wait_s):  # type: ignore[attr-defined]  # on Stream, not in StreamT
            unstick.touch()
            async with folding:
                if not service.restored and not await _restored(service, out):
                    return
                await skipped.before([Source(e.message.topic, e.message.partition, e.message.offset) for e in events])
                began = time.perf_counter()
                items = [(e.value, list(e.message.headers or ()), topics.get(e.message.topic)) for e in events]
                outcomes = service.handle_many(items)
                elapsed = time.perf_counter() - began
                for event, outcome in zip(events, outcomes, strict=True):
                    await out.settle(event, outcome)
                    if metrics is not None:
                        # Counted once delivered: a finding's latency runs until its event is on the broker.
                        metrics.record(outcome, elapsed)
                if metrics is not None:
                    metrics.state_size.set(service.state_bytes)
                folded_at[0] = time.monotonic()

    @app.timer(interval=TAIL_CHECK_S)  # type: ignore[untyped-decorator]  # faust.App.timer is untyped
    async def catch_up_tails() -> None:
        """Once after each spell of folding, when idle for a whole interval outside any rebalance or
        recovery: view records below the group's committed offsets that the state has not seen (the
        consumer committed past them without delivering them) are read from the broker and folded."""
        if app.rebalancing or getattr(app, "in_recovery", False) or folding.locked():
            return
        if time.monotonic() - folded_at[0] < TAIL_CHECK_S or checked_at[0] >= folded_at[0]:
            return
        if not service.restored and not app.tables.recovery.completed.is_set():  # type: ignore[attr-defined]
            return  # the table is not recovered yet
        async with folding:
            checked_at[0] = folded_at[0]
            # No record yet: what they skipped may be all there is, and the checks' status is not known.
            if not service.restored and not await _restored(service, out):
                return
            await skipped.tails(app.conf.id)

    @app.timer(interval=IDLE_SNAPSHOT_S)  # type: ignore[untyped-decorator]  # faust.App.timer is untyped
    async def snapshot_when_idle() -> None:
        """Take a due state snapshot while no record is being folded (DetectorService.idle_compaction_due):
        in the update path it held up every record waiting behind it (measured: p99 detection latency
        1.44-1.47 s with it there, 0.99 s without, at 10,000 rows/s). Its entries go to the table's one
        partition like a record's; records arriving meanwhile wait for the lock, as behind a fold."""
        if not service.restored or app.rebalancing or getattr(app, "in_recovery", False) or folding.locked():
            return
        if time.monotonic() - folded_at[0] < IDLE_SNAPSHOT_S or not service.idle_compaction_due():
            return
        async with folding:
            snapshot = service.compact()
            await out.deliver(snapshot, _At(0))
            log.info("state snapshot taken while idle (%d bytes)", service.snapshot_bytes)
            if metrics is not None:
                metrics.stored(snapshot)
                metrics.state_size.set(service.state_bytes)


async def _restored(service: DetectorService, out: _Outputs) -> bool:
    """Restore the one-stage worker's service from the table, then say which checks are blind to an
    input (:meth:`DetectorService.status`: events, metric, log) before any record: a worker that has
    seen no table must say so even while nothing arrives. False when the table is refused (the worker
    stops)."""
    try:
        service.restore(out.entries())
    except StateError as refused:
        out.refuse(refused)
        return False
    announced = service.status(Outcome())
    await out.deliver(announced, _At(0, "the restored state"))
    if out.metrics is not None:
        out.metrics.status(announced)
    return True


class _Unstick:
    """Partitions whose committed offset stops short of their end while the worker is idle: sought back.

    Faust's consumer was seen to leave a partition's committed offset short of the end for good after a
    rebalance, both workers idle (a hole in its acked offsets that its commits never pass: records it
    skipped and never delivers again; docs/streaming.md, "A lag that stops short of zero"). Once
    the agents have been idle for :data:`TAIL_CHECK_S` outside a rebalance or recovery, each partition
    held here whose committed offset (the group's, from the broker) lies below the consumer's end is
    sought back to it, at most once per :data:`UNSTICK_S`: Faust delivers those records again, the agents
    fold or route them (a record folded already is a replay, skipped by batch id) and ack them, and the
    commits move on."""

    def __init__(self, app: faust.App, bootstrap: str, topics: Iterable[str]) -> None:
        self.app = app
        self.bootstrap = bootstrap
        self.topics = set(topics)
        #: When an agent last took a record or the assignment last changed (``time.monotonic``), the
        #: assignment then, and when each partition was sought back.
        self.active_at = time.monotonic()
        self.assigned: frozenset[Any] = frozenset()
        self.sought: dict[Any, float] = {}
        #: The idle clock and the ends of the last look that found every partition at its end: until
        #: either moves, a look would find the same (no broker call every few seconds while idle).
        self.clean: tuple[float, dict[Any, int]] | None = None

    @classmethod
    def installed(cls, app: faust.App, bootstrap: str, topics: Iterable[str], folding: asyncio.Lock) -> _Unstick:
        """One for ``app``'s partitions of ``topics``, checked by a timer while ``folding`` is free."""
        unstick = cls(app, bootstrap, topics)

        @app.timer(interval=TAIL_CHECK_S)  # type: ignore[untyped-decorator]  # faust.App.timer is untyped
        async def unstick_partitions() -> None:
            if not folding.locked():
                await unstick.check()

        return unstick

    def touch(self) -> None:
        """An agent took a record now."""
        self.active_at = time.monotonic()

    async def check(self) -> None:
        """Seek back the partitions held here whose committed offset stops short of their end."""
        app = self.app
        if app.rebalancing or getattr(app, "in_recovery", False) or time.monotonic() - self.active_at < TAIL_CHECK_S:
            return
        consumer = app.consumer
        assigned = frozenset(tp for tp in consumer.assignment() if tp.topic in self.topics)
        if assigned != self.assigned:
            # A new assignment restarts the idle clock: a worker just given partitions has its table
            # recovery and first fetches ahead of it, not a stall.
            self.assigned, self.active_at = assigned, time.monotonic()
            return
        ends = {tp: end for tp in assigned if (end := consumer.highwater(tp))}
        looked = (self.active_at, ends)
        if not ends or self.clean == looked:
            return
        committed = await asyncio.to_thread(committed_offsets, self.bootstrap, app.conf.id)
        now = time.monotonic()
        done_at = {tp: committed.get((tp.topic, tp.partition), 0) for tp in ends}
        short = [(tp, end, done_at[tp]) for tp, end in ends.items() if done_at[tp] < end]
        self.clean = None if short else looked
        for tp, end, done in short:
            if now - self.sought.get(tp, -UNSTICK_S) < UNSTICK_S or now - self.active_at < TAIL_CHECK_S:
                continue
            self.sought[tp] = now
            log.warning(
                "%s partition %d: committed offset %d stops short of its end %d while idle; seeking back to it",
                tp.topic,
                tp.partition,
                done,
                end,
            )
            try:
                await consumer.seek(tp, done)
            except Exception as failed:  # a partition taken away meanwhile: the next check
                log.warning("seeking %s partition %d back failed: %s", tp.topic, tp.partition, type(failed).__name__)


@dataclass
class _Skipped:
    """View records the one-stage worker's consumer did not deliver, read from the broker and folded.

    The state keeps, per view topic partition, the offset after the last record handled
    (:meth:`DetectorService.note_source`); Faust's consumer was seen to commit past records it never
    delivered (docs/streaming.md), which then show as a jump in a partition's offsets, or, at its end, as
    a committed offset past what the state has seen."""

    service: DetectorService
    out: _Outputs
    #: Input topic -> what it carries (a view's name, the table).
    topics: Mapping[str, Topic]
    bootstrap: str

    async def before(self, sources: Sequence[Source]) -> None:
        """Fold what the consumer skipped before the records read at ``sources``, and note those."""
        for source in sources:
            expected = self.service.sources.get(source.key)
            if expected is not None and source.offset > expected:
                await self.fill(source.topic, source.partition, expected, source.offset)
            self.service.note_source(source)

    async def tails(self, group: str) -> None:
        """Fold the records below ``group``'s committed offsets that the state has not seen (of a topic
        partition it has seen nothing of: from its start)."""
        committed = await asyncio.to_thread(committed_offsets, self.bootstrap, group)
        for (topic, partition), end in sorted(committed.items()):
            start = self.service.sources.get(f"{topic}:{partition}", 0)
            if topic in self.topics and end > start:
                await self.fill(topic, partition, start, end)

    async def fill(self, topic: str, partition: int, start: int, end: int) -> None:
        """Fold the records ``start`` to ``end`` (excluded) of ``topic``'s ``partition``, as the agent
        folds records (one folded already is a replay); their dead letters are keyed as the agent's."""
        log.warning(
            "%s partition %d: records %d to %d were not delivered by the consumer; reading them directly",
            topic,
            partition,
            start,
            end - 1,
        )
        missing = await asyncio.to_thread(read_range, self.bootstrap, topic, partition, start=start, end=end)
        for offset, _, _ in missing:
            self.service.note_source(Source(topic, partition, offset))
        began = time.perf_counter()
        outcomes = self.service.handle_many([(value, headers, self.topics.get(topic)) for _, value, headers in missing])
        elapsed = time.perf_counter() - began
        for (offset, value, headers), outcome in zip(missing, outcomes, strict=True):
            await self.out.settle_read(outcome, value, headers, (topic, partition, offset), table_partition=0)
            if self.out.metrics is not None:
                self.out.metrics.record(outcome, elapsed)


def _two_stages(
    app: faust.App,
    topology: Topology,
    out: _Outputs,
    units: Units,
    max_bytes: int,
    *,
    bootstrap: str,
) -> None:
    split = units.plan
    topics = input_topics(topology, [*split.split, *split.whole])
    route = app.topic(route_topic(topology), partitions=split.partitions, **_RAW)
    router = Router(split, max_bytes)
    metrics = out.metrics
    # One fold at a time, the agent's or the tail check's; when the agent last finished one.
    folding = asyncio.Lock()
    folded_at = [time.monotonic()]
    unstick = _Unstick.installed(app, bootstrap, [*topics, route.get_topic_name()], folding)

    @app.agent(app.topic(*topics, **_RAW), concurrency=1)
    async def split_records(stream: faust.StreamT[bytes]) -> None:
        async for event in stream.events():
            unstick.touch()
            message = event.message
            routed = router.handle(
                event.value,
                list(message.headers or ()),
                topics.get(message.topic),
                Source(message.topic, message.partition, message.offset),
            )
            await out.routed(event, routed)
            # Delivered before this record's offset is committed (once the next one is taken); a dead
            # letter's are markers (Router.handle).
            sent = [
                await route.send(key=message.key, value=body, headers=headers, partition=partition)
                for partition, body, headers in routed.records
            ]
            if sent:
                await asyncio.gather(*sent)

    gaps = _Gaps(app, out, units, router, topics, bootstrap=bootstrap, topic=route.get_topic_name())

    @app.agent(route, concurrency=1)
    async def detect(stream: faust.StreamT[bytes]) -> None:
        # Record by record: taking route records together (take_events) stalled the group after a
        # worker was killed in the two-worker test (twice in two runs); the one-stage worker takes them.
        async for event in stream.events():
            unstick.touch()
            async with folding:
                went_on = await _fold_routed(app, out, units, event, gaps)
                folded_at[0] = time.monotonic()
            if not went_on:
                return

    @app.timer(interval=TAIL_CHECK_S)  # type: ignore[untyped-decorator]  # faust.App.timer is untyped
    async def catch_up_tails() -> None:
        """Fold route records the consumer skipped at the end of a partition: the gap check of
        :func:`_fold_routed` sees a skip only when a later record arrives, and a skipped last record has
        none. Once the agent has been idle for a whole interval outside any rebalance or recovery, a
        partition held here whose end (the consumer's highwater) lies past the offset its units expect
        next has records the consumer will not deliver: they are read from the broker and folded."""
        if app.rebalancing or getattr(app, "in_recovery", False) or folding.locked():
            return
        if time.monotonic() - folded_at[0] < TAIL_CHECK_S:
            return
        async with folding:
            try:
                await _catch_up_tails(app, out, units, gaps, since=folded_at[0])
            except StateError as refused:
                out.refuse(refused)

    async def forget(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        """Partitions taken away: another worker reports their lag now."""
        del sender, signal, kwargs
        if metrics is not None:
            for tp in args[0]:
                with contextlib.suppress(KeyError):
                    metrics.lag.remove(tp.topic, str(tp.partition))

    async def renew(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        """Partitions assigned (after every revocation): every unit is rebuilt from the table at its
        partition's next record. Those of partitions taken away are another worker's now; those whose
        partition stayed here go too, as a record taken while the revocation ran could have rebuilt one
        from a table the rebalance then moved on from."""
        del sender, signal, kwargs
        units.revoke(range(split.partitions))
        owned = sorted(tp.partition for tp in args[0] if tp.topic == route.get_topic_name())
        log.info("route partitions %s assigned: their units will be rebuilt from the table", owned)

    app.on_partitions_revoked.connect(forget)
    app.on_partitions_assigned.connect(renew)


async def _fold_routed(app: faust.App, out: _Outputs, units: Units, event: faust.EventT[bytes], gaps: _Gaps) -> bool:
    """Fold one route record into the units of its partition (records the consumers skipped first) and
    deliver what it led to. False when the worker must stop (its state table was refused)."""
    message = event.message
    metrics = out.metrics
    try:
        expected = units.next_offset(message.partition)
        if expected is not None and message.offset > expected:
            await gaps.fill_route(message.partition, expected, message.offset)
        headers = _headers(message)
        source = source_of(headers)
        missing = None if source is None else units.source_gap(message.partition, source)
        if source is not None and missing is not None:
            await gaps.fill_source(message.partition, source.topic, source.partition, *missing)
        began = time.perf_counter()
        outcome = units.handle(event.value, headers, message.partition, message.offset)
        elapsed = time.perf_counter() - began
    except StateError as refused:
        out.refuse(refused)
        return False
    if message.tp not in app.consumer.assignment():
        # The partition went to another worker while this one folded (a rebalance it was late for):
        # writing now would put a second writer's entries, numbered as the new owner's, in the unit's
        # changelog. Drop the fold; the new owner folds the record from the committed offset (Faust
        # discards commits of revoked partitions).
        units.revoke([message.partition])
        log.warning("route partition %d was reassigned while folding: its outcome is dropped", message.partition)
        return True
    await out.settle(event, outcome)
    if metrics is not None and (outcome.publication is not None or outcome.dead is not None):
        # Counted once delivered (a dropped fold is the new owner's to count); a marker counts nothing.
        metrics.folded(outcome, elapsed)
        metrics.state_size.set(units.state_bytes)
    return True


async def _catch_up_tails(app: faust.App, out: _Outputs, units: Units, gaps: _Gaps, *, since: float) -> None:
    """For each route partition assigned here: fold the records between the offset its units expect
    next and the partition's end, when the consumer is known to have the end (its highwater). Then, once
    after each spell of folding (``since``: when the last fold ended), for each partition whose route
    records are all folded: the view records its units have not seen below the group's committed offsets
    of the view topics (stage one committed past them: routed, or skipped by its consumer)."""
    caught_up = []
    for tp in sorted(app.consumer.assignment()):
        if tp.topic != gaps.topic:
            continue
        # Before any record: which checks are blind to an input (the units restored from the table).
        announced = units.announce(tp.partition)
        if announced.events:
            await out.deliver(announced, _At(tp.partition, gaps.topic))
            if out.metrics is not None:
                out.metrics.status(announced)
        end = app.consumer.highwater(tp)
        if not end:  # not known yet, or an empty partition: nothing can be missing (units not rebuilt)
            continue
        expected = units.next_offset(tp.partition)
        if expected is None:
            continue
        if end > expected:
            await gaps.fill_route(tp.partition, expected, end)
            if out.metrics is not None:
                out.metrics.state_size.set(units.state_bytes)
        caught_up.append(tp.partition)
    if not caught_up or gaps.sources_checked >= since:
        return
    gaps.sources_checked = since
    committed = await asyncio.to_thread(committed_offsets, gaps.bootstrap, app.conf.id)
    for partition in caught_up:
        seen = units.next_source_offsets(partition)
        for (topic, number), end in sorted(committed.items()):
            start = seen.get(f"{topic}:{number}", 0)  # none seen: from the start
            if topic in gaps.views and end > start:
                await gaps.fill_source(partition, topic, number, start, end)


@dataclass
class _Gaps:
    """Records the consumers did not deliver, read from the broker and folded (two-stage worker).

    Faust's consumer was seen to skip records around a rebalance: offsets committed past a record never
    delivered (its stale acks, as faust-streaming issues 216 and 312 describe). The units' state keeps
    the offsets they have folded, so a skip shows as a jump: of the route topic's offsets (stage two's
    consumer skipped route records) or of a view topic partition's, which every route record names (stage
    one's consumer skipped view records: no route record was ever made for them). Both topics' offsets
    are contiguous (no transactions, no compaction; stage one routes a view record it dead-letters as a
    marker), so the records in a jump are read straight from the broker and folded; records folded
    already (a false jump after a restart) are replays, skipped by batch id."""

    app: faust.App
    out: _Outputs
    units: Units
    router: Router
    #: Input topic -> what it carries (a view's name, the table).
    views: Mapping[str, Topic]
    bootstrap: str
    #: The route topic.
    topic: str
    #: When the tail check last compared the view offsets with the group's commits (``time.monotonic``).
    sources_checked: float = 0.0

    async def fill_route(self, partition: int, start: int, end: int) -> None:
        """Fold the route records ``start`` to ``end`` (excluded) of ``partition``."""
        log.warning(
            "route partition %d: records %d to %d were not delivered by the consumer; reading them directly",
            partition,
            start,
            end - 1,
        )
        missing = await asyncio.to_thread(read_range, self.bootstrap, self.topic, partition, start=start, end=end)
        for offset, value, headers in missing:
            await self._fold(partition, value, headers, offset=offset, where=(self.topic, partition, offset))

    async def fill_source(self, partition: int, topic: str, view_partition: int, start: int, end: int) -> None:
        """Fold into the units of route ``partition`` the view records ``start`` to ``end`` (excluded) of
        ``topic``'s ``view_partition``, routed here as stage one would have."""
        log.warning(
            "%s partition %d: records %d to %d were never routed (its consumer skipped them); reading them "
            "directly for route partition %d",
            topic,
            view_partition,
            start,
            end - 1,
            partition,
        )
        missing = await asyncio.to_thread(read_range, self.bootstrap, topic, view_partition, start=start, end=end)
        for offset, value, headers in missing:
            source = Source(topic, view_partition, offset)
            routed = self.router.handle(value, headers, self.views.get(topic), source)
            for body, named in [(body, named) for p, body, named in routed.records if p == partition]:
                if routed.dead is None:
                    await self._fold(partition, body, named, offset=None, where=(topic, view_partition, offset))
                    continue
                self.units.handle(body, named, partition)  # its marker: the offset is seen here
                where = (topic, view_partition, offset)
                await self.out.settle_read(Outcome(dead=routed.dead), value, headers, where, table_partition=partition)
                if self.out.metrics is not None:
                    self.out.metrics.folded(Outcome(dead=routed.dead), 0.0)

    async def _fold(
        self,
        partition: int,
        value: bytes | None,
        headers: list[tuple[str, bytes]],
        *,
        offset: int | None,
        where: tuple[str, int, int],
    ) -> None:
        """Fold a record read from the broker (``where``: topic, partition, offset) into the units of
        route ``partition`` and deliver what it led to, as the consumer's records are."""
        began = time.perf_counter()
        outcome = self.units.handle(value, headers, partition, offset)
        elapsed = time.perf_counter() - began
        await self.out.settle_read(outcome, value, headers, where, table_partition=partition)
        metrics = self.out.metrics
        if metrics is not None and (outcome.publication is not None or outcome.dead is not None):
            metrics.folded(outcome, elapsed)


def _headers(message: Any) -> list[tuple[str, bytes]]:
    """A record's headers as a list of pairs (Faust types them as a list or a mapping)."""
    raw = message.headers or ()
    return list(raw.items()) if isinstance(raw, Mapping) else list(raw)


@dataclass(frozen=True)
class _At:
    """Where a record read outside the consumer came from (what :meth:`_Outputs.deliver` needs of it)."""

    partition: int
    topic: str = ""


def _text(key: object) -> str:
    return key.decode() if isinstance(key, bytes) else str(key)


def run_worker(app: faust.App, loglevel: str = "warn") -> None:
    """Run the worker until SIGINT or SIGTERM (then it stops cleanly, committing what it processed).
    Raises :class:`StateError` when it stopped because its state table was written under another
    topology, other checks, thresholds or partition count."""
    from faust.worker import Worker  # noqa: PLC0415 (imports the event loop machinery only to run)

    if loglevel != "debug":
        # kafka-python logs every connection of the offset look-ups (tail checks, idle seeks: one admin
        # client every few seconds while idle) at INFO: ten lines a look-up, none of them news.
        logging.getLogger("kafka").setLevel(logging.WARNING)
    worker = Worker(app, loglevel=loglevel, quiet=True)
    if not worker.stdout.isatty():
        # Faust's start-up spinner writes terminal escape codes (hide the cursor, back-space): on a log
        # file or a pipe they are noise. Without it, Faust logs "Ready" at INFO.
        worker.spinner = None
    try:
        worker.execute_from_commandline()
    except SystemExit:
        refused = _REFUSED.pop(id(app), None)
        if refused is not None:
            raise refused from None
        raise
