"""``streamdetect capture``: the private table's changes, as Debezium's connector writes them to Kafka
(``streamdetect connect``), become the records of the table's topic and of every view's
(:mod:`streamdetect.stream.changes` translates them).

Exactly what the database changed reaches the worker, whatever is killed and when:

* Changes are read in runs from the change topic (one partition: the order of a row's changes is the
  order of its records). Before a run is translated, the capture commits, with its group's offset still at
  the run's start, the run's end and where the translation stood (the offset's metadata); after the run's
  records are acknowledged, it commits the offset at the run's end. A capture killed in between reads
  that plan when it starts again and translates the same run again from the same point: the same records
  under the same batch ids, which the worker skips when it folded them already.
* Debezium sends changes again after a restart of the connector: those are skipped by their position in
  the write-ahead log (:class:`~streamdetect.stream.changes.ChangeTranslator`).
* A view's records all carry one key, so they stay in one partition of its topic, in order: a
  withdrawal never overtakes the addition of its row.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from streamdetect.errors import TopologyError
from streamdetect.io import postgres
from streamdetect.io.sources import DTYPES
from streamdetect.model.topology import Topology
from streamdetect.stream.broker import BrokerError
from streamdetect.stream.changes import Change, ChangeTranslator, Progress, read_change
from streamdetect.stream.publish import create_topics, input_topics, kafka_client
from streamdetect.stream.records import TABLE_LABEL, Carried, Publication, split_publication
from streamdetect.stream.topics import changes_prefix, table_topic, view_topic

log = logging.getLogger(__name__)

#: Changes translated together at most (a run).
MAX_RUN = 5_000
#: How long a poll waits for changes (milliseconds): the latency a quiet table adds.
POLL_MS = 50
#: How often, at most, a capture with nothing to read asks whether the connector still runs (seconds).
WATCH_S = 2.0
_PLAN = 1  # the version of the plan kept in the offset's metadata


@dataclass(frozen=True)
class Capture:
    """What a capture reads and writes: the change topic, the table's database and the table there, the
    translator and the topic of each target (a view's name, None for the table)."""

    topic: str
    uri: str
    table: postgres.CapturedTable
    translator: ChangeTranslator
    targets: dict[str | None, str]


def capture_of(topology: Topology, database: str | None = None) -> Capture:
    """The capture of ``topology``'s table (in ``database``, else ``table.source``): checks that the table's
    changes can be captured (logical decoding, whole old images) and builds the translator."""
    uri = database or topology.table.source
    if not postgres.is_database(uri):
        raise TopologyError(
            "change capture reads a PostgreSQL table: give table.source as a postgresql:// URI, or --database",
            file=topology.path,
            key="table.source",
        )
    assert uri is not None
    table = postgres.captured_table(uri, topology.table.name, topology.table.attributes)
    problems = _problems(table)
    if problems:
        raise TopologyError("; ".join(problems), file=postgres.shown(uri))
    declared = topology.table.types
    dtypes = {
        attribute: DTYPES[declared[attribute]] if attribute in declared else table.dtypes[attribute]
        for attribute in topology.table.attributes
    }
    carried = input_topics(topology)
    with_table = Carried.TABLE in carried.values()
    translator = ChangeTranslator(topology, table.columns, dtypes, with_table=with_table)
    targets: dict[str | None, str] = {view.name: view_topic(topology, view) for view in topology.views}
    if with_table:
        targets[None] = table_topic(topology)
    return Capture(f"{changes_prefix(topology)}.{table.schema}.{table.name}", uri, table, translator, targets)


def _problems(table: postgres.CapturedTable) -> list[str]:
    """What keeps ``table``'s changes from being captured exactly, each with its fix."""
    problems = []
    if not table.logical:
        problems.append("the server does not write logical decoding: set wal_level = logical and restart it")
    if not table.full_images:
        problems.append(
            f"changes of {table.schema}.{table.name} would not carry the rows' old images: run ALTER TABLE "
            f"{table.schema}.{table.name} REPLICA IDENTITY FULL"
        )
    if table.not_utf8 is not None:
        problems.append(
            f"{table.not_utf8} of {table.schema}.{table.name} holds text that is not UTF-8 (the database is "
            "SQL_ASCII: bytes in no declared encoding); Debezium reads text as UTF-8 only and would retry its "
            "snapshot without end: convert that text to UTF-8, or the database to the encoding it is in"
        )
    return problems


def run_capture(
    topology: Topology,
    bootstrap: str,
    *,
    database: str | None = None,
    max_run: int = MAX_RUN,
    stop: Callable[[], bool] = lambda: False,
    report: Callable[[int, int], None] | None = None,
    failure: Callable[[], str | None] = lambda: None,
) -> None:
    """Translate the table's changes into the topics' records until ``stop()`` says so (or forever).
    ``report(changes, records)`` after each run. Raises :class:`~streamdetect.stream.changes.ChangeError`
    when a change cannot be taken exactly, and :class:`BrokerError` once every change read is translated
    while ``failure()`` says why the connector stopped sending them (asked every :data:`WATCH_S` seconds
    while there is nothing to read)."""
    capture = capture_of(topology, database)
    create_topics(topology, bootstrap)
    group = f"streamdetect-{topology.name}-capture"
    consumer = kafka_client(
        KafkaConsumer,
        bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=16 << 20,  # a run of changes (both images, JSON) in one fetch
        fetch_max_bytes=64 << 20,
    )
    producer = kafka_client(KafkaProducer, bootstrap, acks="all", linger_ms=5, client_id=group)
    try:
        partition = _partition(consumer, capture.topic, stop)
        if partition is None:
            return
        consumer.assign([partition])
        committed = consumer.committed(partition, metadata=True)
        plan = _plan(committed)
        start = committed.offset if committed is not None else 0
        consumer.seek(partition, start)
        progress = Progress.from_json(plan)
        pending_end: int | None = plan.get("end")
        log.info("capturing %s from offset %d into %d topics", capture.topic, start, len(capture.targets))
        watched = time.monotonic()
        while not stop():
            if pending_end is not None:
                changes, end = _read_until(consumer, partition, start, pending_end)
            else:
                changes, end = _read_run(consumer, partition, start, max_run)
                if end == start:
                    if time.monotonic() - watched >= WATCH_S:
                        watched = time.monotonic()
                        _stop_on(failure())
                    continue
                _commit(consumer, partition, start, progress, end)  # the plan, before any record is sent
            translated = capture.translator.translate(changes, progress)
            run = f"{partition.partition}.{start}-{end}"
            records = _send(producer, capture, translated.rows, run, translated.committed_ms)
            _commit(consumer, partition, end, progress, None)
            if report is not None:
                report(translated.taken, records)
            start, pending_end = end, None
    finally:
        producer.close()
        consumer.close()


def _stop_on(failed: str | None) -> None:
    if failed is None:
        return
    fix = (
        "Fix the cause; `streamdetect connect start` then restarts the connector, and `streamdetect capture` "
        "started again goes on from where this one stopped"
    )
    if "invalid byte sequence" in failed:
        fix = (
            "The change stays in the write-ahead log, so a restarted connector meets it again: convert the "
            "database's text to UTF-8 and start over (`streamdetect connect stop --forget`, new view topics)"
        )
    raise BrokerError(f"Debezium's connector failed, so no change comes after those translated: {failed}. {fix}")


def _partition(consumer: KafkaConsumer, topic: str, stop: Callable[[], bool]) -> TopicPartition | None:
    """The change topic's one partition, once Debezium (or ``connect start``) created it."""
    waited = False
    while not stop():
        partitions = consumer.partitions_for_topic(topic)
        if partitions:
            if len(partitions) != 1:
                raise BrokerError(
                    f"the change topic {topic} has {len(partitions)} partitions: its changes must keep their order, "
                    "so it needs exactly one (`streamdetect connect start` creates it so)"
                )
            return TopicPartition(topic, next(iter(partitions)))
        if not waited:
            log.info("waiting for the change topic %s (start the connector: streamdetect connect start)", topic)
            waited = True
        time.sleep(1.0)
    return None


def _plan(committed: OffsetAndMetadata | None) -> dict[str, Any]:
    if committed is None or not committed.metadata:
        return {}
    try:
        plan = json.loads(committed.metadata)
    except ValueError:
        return {}
    return plan if isinstance(plan, dict) and plan.get("v") == _PLAN else {}


def _commit(
    consumer: KafkaConsumer, partition: TopicPartition, offset: int, progress: Progress, end: int | None
) -> None:
    metadata = json.dumps({"v": _PLAN, "end": end, **progress.to_json()}, separators=(",", ":"))
    consumer.commit({partition: OffsetAndMetadata(offset, metadata, -1)})


def _read_run(consumer: KafkaConsumer, partition: TopicPartition, start: int, max_run: int) -> tuple[list[Change], int]:
    """The changes available now from ``start`` (at most ``max_run``), and the offset after them."""
    polled = consumer.poll(timeout_ms=POLL_MS, max_records=max_run)
    messages = polled.get(partition, [])
    if not messages:
        return [], start
    return _changes(messages), messages[-1].offset + 1


def _read_until(consumer: KafkaConsumer, partition: TopicPartition, start: int, end: int) -> tuple[list[Change], int]:
    """The changes at offsets [``start``, ``end``): a run planned before a crash, read again exactly."""
    messages: list[Any] = []
    while not messages or messages[-1].offset + 1 < end:
        polled = consumer.poll(timeout_ms=1000, max_records=end - start - len(messages))
        messages += [message for message in polled.get(partition, []) if message.offset < end]
    return _changes(messages), end


def _changes(messages: list[Any]) -> list[Change]:
    return [change for message in messages if (change := read_change(message.value)) is not None]


def _send(
    producer: KafkaProducer,
    capture: Capture,
    rows: dict[str | None, tuple[pl.DataFrame, pl.DataFrame]],
    run: str,
    committed_ms: int | None,
) -> int:
    """Each target's withdrawals, then its additions, as records keyed by the target (one partition, in
    order), under batch ids the run determines; waits until all are acknowledged. Returns the records sent."""
    published = dt.datetime.fromtimestamp((committed_ms or time.time() * 1000) / 1000, dt.UTC)
    failures: list[BaseException] = []
    sent = 0
    for target, (withdrawn, added) in rows.items():
        label = TABLE_LABEL if target is None else target
        for op, frame in (("retract", withdrawn), ("add", added)):
            if frame.is_empty():
                continue
            publication = Publication(target, op, f"changes.{run}.{label}.{op}", published, frame)  # type: ignore[arg-type]
            for value, headers, _ in split_publication(publication):
                future = producer.send(capture.targets[target], value=value, key=label.encode(), headers=headers)
                future.add_errback(failures.append)
                sent += 1
    producer.flush()
    if failures:
        raise BrokerError(f"sending the changes' records failed: {failures[0]}")
    return sent
