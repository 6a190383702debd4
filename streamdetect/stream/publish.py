"""Publish views onto Kafka (create the topology's topics, stream each view's rows in batches) and read
topics back.

How a publisher, a test or a demo feeds the detector (``streamdetect publish``). Batches go round-robin
across views, as a publication of several views interleaves them, the private table's (for the checks
that read it, on its own topic) taking its turn as one more input; each is one record
(:mod:`streamdetect.stream.records`) keyed by its batch id, so a view's batches spread over the topic's
partitions. A batch whose record would exceed the record size limit is split in halves until it fits.
Withdrawals are the publisher's to send (``op: retract``) once their rows were published: Kafka orders
records within a partition only, so a retraction sent at once could overtake its row.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import socket
import time
import uuid
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import polars as pl
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import KafkaError, SaslAuthenticationFailedError, TopicAlreadyExistsError

from streamdetect.check_plan import table_readers
from streamdetect.model.topology import Topology
from streamdetect.stream.broker import BrokerError
from streamdetect.stream.records import (
    FINDINGS_MAX_BYTES,
    TABLE_LABEL,
    Carried,
    Format,
    Publication,
    Topic,
    split_publication,
)
from streamdetect.stream.security import from_environment
from streamdetect.stream.settings import DEFAULT_MAX_BYTES
from streamdetect.stream.topics import (
    dead_letter_topic,
    findings_topic,
    route_topic,
    table_topic,
    topic_configs,
    universal_topic,
    view_topic,
)

Client = TypeVar("Client", KafkaAdminClient, KafkaProducer, KafkaConsumer)
K = TypeVar("K", bound=Hashable)
#: How long a client waits to bootstrap from a broker that accepts the connection (milliseconds): a broker
#: refusing a SASL login drops the connection without a word, and the client's own default waits 30 s.
BOOTSTRAP_TIMEOUT_MS = 10_000
#: Seconds a worker's start waits for its consumer group's coordinator (a fresh broker makes its offsets
#: topic at the first look-up and answers "not available" until it is ready).
COORDINATOR_WAIT_S = 30.0


@dataclass
class Published:
    """What a run sent: records and rows per view (the table's under :data:`TABLE_LABEL`)."""

    records: dict[str, int]
    rows: dict[str, int]


def input_topics(topology: Topology, checks: Sequence[str] | None = None) -> dict[str, Topic]:
    """The topics a worker reads, with what each carries: every view's, and the private table's when a
    check of the run reads it (:func:`~streamdetect.detector.table_readers`)."""
    topics: dict[str, Topic] = {view_topic(topology, view): view.name for view in topology.views}
    if table_readers(topology, checks):
        topics[table_topic(topology)] = Carried.TABLE
    return topics


def create_topics(topology: Topology, bootstrap: str, partitions: int = 1) -> list[str]:
    """Create the input (views, table), findings and dead-letter topics that do not exist yet, the output
    topics with their configuration (:func:`~streamdetect.stream.topics.topic_configs`: compacted); the
    names created."""
    names = [*input_topics(topology), findings_topic(topology), dead_letter_topic(topology)]
    return _create_missing(bootstrap, dict.fromkeys(names, partitions), "streamdetect-publish", topic_configs(topology))


def topic_problems(topology: Topology, bootstrap: str) -> list[tuple[str, str, str]]:
    """The output topics that exist with another configuration than :func:`topic_configs` gives, as
    (topic, setting, what is wrong): a findings topic that deletes by retention forgets open findings, one
    that takes smaller records cuts the events of large classes further. Read from the broker's effective
    values (a topic's own, else the broker's defaults)."""
    wanted = topic_configs(topology)
    admin = _admin(bootstrap, "streamdetect-worker")
    try:
        present = [name for name in wanted if name in set(admin.list_topics())]
        if not present:
            return []
        resources = [
            ConfigResource(ConfigResourceType.TOPIC, name, configs=dict.fromkeys(wanted[name])) for name in present
        ]
        described = admin.describe_configs(resources, config_filter="all").get("topic", {})
    finally:
        admin.close()
    problems = []
    for name in present:
        found = {key: str(entry.get("value")) for key, entry in described.get(name, {}).items()}
        policy = found.get("cleanup.policy")
        if "cleanup.policy" in wanted[name] and policy is not None and policy != wanted[name]["cleanup.policy"]:
            problems.append(
                (name, "cleanup.policy", f"is {policy!r}, not 'compact': records are deleted after the retention")
            )
        size, least = found.get("max.message.bytes"), wanted[name].get("max.message.bytes")
        if least is not None and size is not None and size.isdigit() and int(size) < int(least):
            problems.append((name, "max.message.bytes", f"is {size}, below {least}"))
    return problems


def _create_missing(
    bootstrap: str,
    partitions: Mapping[str, int],
    client_id: str,
    configs: Mapping[str, Mapping[str, str]] | None = None,
) -> list[str]:
    """Create those of the topics (name -> partition count) that do not exist yet, each with its
    ``configs`` (topic configuration); the names created."""
    admin = _admin(bootstrap, client_id)
    try:
        existing = set(admin.list_topics())
        wanted = [
            NewTopic(
                name, num_partitions=count, replication_factor=1, topic_configs=dict((configs or {}).get(name, {}))
            )
            for name, count in partitions.items()
            if name not in existing
        ]
        if wanted:
            with contextlib.suppress(TopicAlreadyExistsError):  # another client created them meanwhile
                admin.create_topics(wanted)
        return [topic.name for topic in wanted]
    finally:
        admin.close()


def topic_partitions(bootstrap: str, names: list[str]) -> dict[str, int]:
    """The number of partitions of each of the topics ``names`` that exists."""
    admin = _admin(bootstrap, "streamdetect-worker")
    try:
        existing = set(admin.list_topics())
        present = [name for name in names if name in existing]
        described = admin.describe_topics(present) if present else []  # none given would describe every topic
        return {topic["name"]: len(topic["partitions"]) for topic in described}
    finally:
        admin.close()


def prepare_worker_topics(
    topology: Topology, bootstrap: str, partitions: int, application: str, *, universal: bool = False
) -> None:
    """Before a worker starts: create the view, findings and dead-letter topics that do not exist, with
    ``partitions`` partitions (so that the workers share the reading too), and with more than one the
    route topic; refuse, with :class:`~streamdetect.stream.broker.BrokerError`, what the worker could not
    run right: view topics of several partitions for a worker of one; a route topic or state changelog of
    another partition count; the changelog of the other shape (its state would be ignored while the view
    offsets committed under it stand). ``application``: the Faust application id (changelog topics are
    ``<id>-<table>-changelog``). ``universal``: create the universal-relation topic too."""
    create_topics(topology, bootstrap, partitions)
    if universal:
        _create_missing(bootstrap, {universal_topic(topology): partitions}, "streamdetect-worker")
    await_coordinator(bootstrap, application)
    route = route_topic(topology)
    one, many = f"{application}-state-changelog", f"{application}-units-changelog"
    inputs = list(input_topics(topology))
    counts = topic_partitions(bootstrap, [*inputs, route, one, many])
    other, mine = (many, one) if partitions == 1 else (one, many)
    if other in counts:
        raise BrokerError(
            f"the state of this application was kept by workers of {'more partitions' if partitions == 1 else 'one'}"
            f" ({other} exists): start the workers as before, or delete the application's topics to start afresh"
        )
    if mine in counts and counts[mine] != partitions:
        raise BrokerError(
            f"the state of this application is split in {counts[mine]} partitions ({mine}); "
            f"start the workers with --partitions {counts[mine]}, or delete the application's topics to start afresh"
        )
    if partitions == 1:
        wide = sorted(name for name in inputs if counts.get(name, 1) > 1)
        if wide:
            raise BrokerError(
                f"a worker of one partition keeps the whole state and reads input topics of one partition; "
                f"{', '.join(wide)} has more: start the workers with --partitions N to share the work "
                "(docs/streaming.md)"
            )
        return
    if route in counts and counts[route] != partitions:
        raise BrokerError(f"the route topic {route} has {counts[route]} partitions, not {partitions}")
    _create_missing(bootstrap, {route: partitions}, "streamdetect-worker")


def _admin(bootstrap: str, client_id: str) -> KafkaAdminClient:
    return kafka_client(KafkaAdminClient, bootstrap, client_id=client_id)


def _reachable(bootstrap: str) -> bool:
    """Whether some bootstrap address accepts a TCP connection (a quick no before the client's 30 s one)."""
    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            with socket.create_connection((host or "127.0.0.1", int(port)), timeout=3):
                return True
        except (OSError, ValueError):
            continue
    return False


def kafka_client(kind: type[Client], bootstrap: str, **settings: Any) -> Client:
    """A kafka-python client of ``kind`` on ``bootstrap`` with the environment's security settings
    (:mod:`streamdetect.stream.security`); a broker that does not answer or refuses the credentials is a
    :class:`~streamdetect.stream.broker.BrokerError` saying so."""
    security = from_environment()
    if not _reachable(bootstrap):
        raise BrokerError(
            f"no Kafka broker answers at {bootstrap}: start one with `streamdetect broker start` or give "
            "--bootstrap-servers"
        )
    try:
        settings = {"bootstrap_timeout_ms": BOOTSTRAP_TIMEOUT_MS, **settings}
        return kind(bootstrap_servers=bootstrap, **settings, **security.client_settings())
    except SaslAuthenticationFailedError as error:
        raise BrokerError(
            f"the Kafka broker at {bootstrap} refused the credentials of {security!r}: {error}; "
            "check STREAMDETECT_KAFKA_SASL_USERNAME and STREAMDETECT_KAFKA_SASL_PASSWORD"
        ) from None
    except KafkaError as error:
        if security.sasl:  # a broker refusing a login just drops the connection: the client times out
            raise BrokerError(
                f"no Kafka broker at {bootstrap} accepted a {security.protocol} login as {security.username!r} "
                f"with {security.mechanism} ({type(error).__name__}): check STREAMDETECT_KAFKA_SASL_USERNAME, "
                "_PASSWORD and _MECHANISM, and that the address is the brokers' SASL listener"
            ) from None
        raise BrokerError(
            f"no Kafka broker answers at {bootstrap} over {security.protocol} ({type(error).__name__}): start "
            "one with `streamdetect broker start`, give --bootstrap-servers, or check "
            "STREAMDETECT_KAFKA_SECURITY_PROTOCOL"
        ) from None


def batches(views: Mapping[K, pl.DataFrame], batch_rows: int) -> Iterator[tuple[K, pl.DataFrame]]:
    """Each view's rows in batches of ``batch_rows``, round-robin across views (and the table, under
    None, as one more)."""
    offsets = dict.fromkeys(views, 0)
    while any(offsets[name] < frame.height for name, frame in views.items()):
        for name, frame in views.items():
            if offsets[name] < frame.height:
                yield name, frame.slice(offsets[name], batch_rows)
                offsets[name] += batch_rows


def publish(
    topology: Topology,
    views: Mapping[str, pl.DataFrame],
    bootstrap: str,
    *,
    batch_rows: int = 500,
    rate: float | None = None,
    loop: bool = False,
    form: Format = "arrow",
    partitions: int = 1,
    max_bytes: int = DEFAULT_MAX_BYTES,
    progress: Callable[[int], None] | None = None,
    table: pl.DataFrame | None = None,
) -> Published:
    """Create the topics, then send every view's rows in batches (forever with ``loop``, replaying the
    same rows under new batch ids); ``rate``: at most that many rows per second over all views.
    ``progress`` gets the rows sent since its last call. ``table``: the private table's rows, sent to its
    topic in batches taking their turn with the views' (an empty table as one record with no rows: the
    worker then knows it has the table, and that it is empty). Waits until every record is acknowledged."""
    create_topics(topology, bootstrap, partitions)
    producer = kafka_client(
        KafkaProducer,
        bootstrap,
        client_id="streamdetect-publish",
        acks="all",
        linger_ms=5,
        max_request_size=max(max_bytes + 64 * 1024, 1_048_576),
    )
    topics: dict[str | None, str] = {view.name: view_topic(topology, view) for view in topology.views}
    topics[None] = table_topic(topology)
    inputs: dict[str | None, pl.DataFrame] = {}
    inputs.update(views)
    if table is not None:
        inputs[None] = table
    labels = {name: TABLE_LABEL if name is None else name for name in inputs}
    sent = Published(records=dict.fromkeys(labels.values(), 0), rows=dict.fromkeys(labels.values(), 0))
    started = time.monotonic()
    total = 0
    failures: list[BaseException] = []
    try:
        for _ in itertools.count() if loop else range(1):
            empty = [(None, table.clear())] if table is not None and table.is_empty() else []
            for name, rows in [*empty, *batches(inputs, batch_rows)]:
                publication = Publication(name, "add", uuid.uuid4().hex, dt.datetime.now(dt.UTC), rows)
                for value, headers, count in split_publication(publication, form, max_bytes):
                    key = dict(headers)["streamdetect-batch"]
                    future = producer.send(topics[name], value=value, key=key, headers=headers)
                    future.add_errback(failures.append)
                    if failures:
                        raise failures[0]
                    sent.records[labels[name]] += 1
                    sent.rows[labels[name]] += count
                    total += count
                    if progress is not None:
                        progress(count)
                    if rate is not None:
                        # Pace to the rate over the whole run (not per batch: a slow send catches up).
                        ahead = total / rate - (time.monotonic() - started)
                        if ahead > 0:
                            time.sleep(ahead)
        producer.flush()
        if failures:
            raise failures[0]
    except KafkaError as error:
        raise BrokerError(f"publishing to {bootstrap} failed: {type(error).__name__}: {error}") from None
    finally:
        producer.close()
    return sent


def read_topic(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[bytes | None]:
    """Every value of ``topic`` from its beginning to its end as of now (:func:`read_records`; None: a
    tombstone)."""
    return [value for value, _ in read_records(bootstrap, topic, timeout_s)]


def read_records(
    bootstrap: str, topic: str, timeout_s: float = 30.0
) -> list[tuple[bytes | None, list[tuple[str, bytes]]]]:
    """Every record of ``topic`` as (value, headers) (:func:`read_records_with_keys`)."""
    return [(value, headers) for _, value, headers in read_records_with_keys(bootstrap, topic, timeout_s)]


def read_records_keyed(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[tuple[bytes, bytes | None]]:
    """Every record of ``topic`` as (key, value) (:func:`read_records_with_keys`)."""
    return [(key, value) for key, value, _ in read_records_with_keys(bootstrap, topic, timeout_s)]


def read_records_with_keys(
    bootstrap: str, topic: str, timeout_s: float = 30.0
) -> list[tuple[bytes, bytes | None, list[tuple[str, bytes]]]]:
    """Every record of ``topic`` as (key, value, headers) from its beginning to its end as of now, in order
    within each partition (a consumer outside any group: it commits nothing and moves no one's offsets);
    the other readers keep parts of these. Gives up when no record comes for ``timeout_s``, however long
    the whole read takes."""
    # Fetches as large as the largest record a streamdetect topic takes (a findings record can pass 1 MB).
    fetch = FINDINGS_MAX_BYTES + (1 << 20)
    consumer = kafka_client(
        KafkaConsumer, bootstrap, enable_auto_commit=False, max_partition_fetch_bytes=fetch, fetch_max_bytes=fetch
    )
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not partitions:
            return []
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        records: list[tuple[bytes, bytes | None, list[tuple[str, bytes]]]] = []
        stalled = _Stall(timeout_s)
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            at = sum(consumer.position(tp) for tp in partitions)
            if stalled(at):
                raise BrokerError(
                    f"reading {topic} from {bootstrap} stalled: no record for {timeout_s:.0f} s, at offset "
                    f"{at:,} of {sum(ends.values()):,}"
                )
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend((record.key, record.value, list(record.headers or ())) for record in batch)
        return records
    finally:
        consumer.close()


class _Stall:
    """Whether a read has stalled: ``timeout_s`` without progress (a count that grows as records come).
    A reader times out when the broker stops answering, not because the topic is long: a findings topic
    can hold a hundred megabytes, read at the client's pace."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.progress = -1
        self.since = time.monotonic()

    def __call__(self, progress: int) -> bool:
        now = time.monotonic()
        if progress != self.progress:
            self.progress, self.since = progress, now
        return now - self.since > self.timeout_s


def read_range(
    bootstrap: str, topic: str, partition: int, *, start: int, end: int, timeout_s: float = 60.0
) -> list[tuple[int, bytes | None, list[tuple[str, bytes]]]]:
    """The records of one partition from offset ``start`` up to ``end`` (excluded): (offset, value,
    headers), in order (a consumer outside any group: it commits nothing). Records the log no longer
    holds (deleted by retention) are missing from the answer. Gives up when no record comes for
    ``timeout_s``."""
    consumer = kafka_client(KafkaConsumer, bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        # From the first record the log still holds (retention may have deleted the ones before it).
        consumer.seek(tp, max(start, consumer.beginning_offsets([tp])[tp]))
        records: list[tuple[int, bytes | None, list[tuple[str, bytes]]]] = []
        stalled = _Stall(timeout_s)
        while consumer.position(tp) < end:
            if stalled(consumer.position(tp)):
                raise BrokerError(
                    f"reading {topic}[{partition}] from {bootstrap} stalled: no record for {timeout_s:.0f} s, "
                    f"at offset {consumer.position(tp):,} of {end:,}"
                )
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(
                    (record.offset, record.value, list(record.headers or ())) for record in batch if record.offset < end
                )
        return records
    finally:
        consumer.close()


def committed_lag(bootstrap: str, group: str, topics: list[str]) -> int:
    """Records of ``topics`` the consumer group ``group`` has not committed yet: the sum over their
    partitions of the end offset minus the group's committed offset (the whole partition when it has
    committed none). Zero once the group has processed and committed everything published so far."""
    done = committed_offsets(bootstrap, group)
    consumer = kafka_client(KafkaConsumer, bootstrap, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
        ends = consumer.end_offsets(partitions) if partitions else {}
        return sum(max(ends[tp] - done.get((tp.topic, tp.partition), 0), 0) for tp in partitions)
    finally:
        consumer.close()


def committed_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """The offsets the consumer group ``group`` has committed, per (topic, partition): where it goes on
    from (partitions it has committed nothing for are absent)."""
    admin = _admin(bootstrap, "streamdetect-lag")
    try:
        committed = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {(tp.topic, tp.partition): meta.offset for tp, meta in committed.items() if meta.offset >= 0}


def await_coordinator(bootstrap: str, group: str, timeout_s: float = COORDINATOR_WAIT_S) -> bool:
    """Wait until the broker names a coordinator for the consumer group ``group`` (at most ``timeout_s``),
    and say whether it did. A fresh broker creates its offsets topic at the first look-up and answers
    "coordinator not available" until that topic is ready: Faust's consumer would log each such answer at
    ERROR, in a start where nothing is wrong. Past the wait, the consumer goes on retrying by itself."""
    admin = _admin(bootstrap, "streamdetect-worker")
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                admin.describe_groups([group])
            except KafkaError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.2)
            else:
                return True
    finally:
        admin.close()


def group_ready(bootstrap: str, group: str, members: int) -> bool:
    """Whether the consumer group ``group`` is stable with ``members`` members that have received their
    assignments (the workers of a group have joined and shared the topics out)."""
    admin = _admin(bootstrap, "streamdetect-lag")
    try:
        described = admin.describe_groups([group]).get(group) or {}
    except KafkaError:  # no coordinator yet (a fresh broker creates its offsets topic on first use)
        return False
    finally:
        admin.close()
    joined = [member for member in described.get("members") or () if member.get("member_assignment")]
    return described.get("group_state") == "Stable" and len(joined) == members
