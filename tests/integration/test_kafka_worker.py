"""The Faust worker against a real broker: Table 1 published row by row, withdrawn, the worker killed."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import NoError
from kafka.structs import OffsetAndMetadata

import streamdetect
from streamdetect.io.sources import load_views
from streamdetect.model.topology import Topology
from streamdetect.partitioning import plan
from streamdetect.relational.universal import universal_relation
from streamdetect.stream.events import open_findings
from streamdetect.stream.publish import (
    committed_lag,
    create_topics,
    group_ready,
    read_records,
    read_records_keyed,
    read_records_with_keys,
    read_topic,
)
from streamdetect.stream.records import (
    CONTENT_TYPES,
    DEFAULT_MAX_BYTES,
    HEADER_CONTENT,
    HEADER_OP,
    HEADER_VIEW,
    Publication,
    encode_publication,
)
from streamdetect.stream.routing import Router
from streamdetect.stream.topics import dead_letter_topic, findings_topic, route_topic, universal_topic, view_topic
from streamdetect.stream.worker import IDLE_SNAPSHOT_S, app_id, state_table
from tests.integration.kafka_helpers import Feed, Worker, table1_stream, table1_topology, until


def _events(bootstrap: str, topology: Topology) -> list[dict[str, object]]:
    # Events only: a cleared finding's tombstone (None) keeps the compacted topic to the open set.
    return [json.loads(value) for value in read_topic(bootstrap, findings_topic(topology)) if value is not None]


def test_table1_row_by_row_raises_dan_flu_then_clears_it_and_survives_a_killed_worker(
    kafka_bootstrap: str, tmp_path: Path, workers: list[Worker]
) -> None:
    # Its state is compacted often (a snapshot replaces the entries once their bytes pass the last
    # snapshot's): the replacement below restores from a snapshot and the records after it.
    compact = ("--compact-bytes", "1")
    path, topology, views, feed = table1_stream(
        tmp_path, "worker-table1", kafka_bootstrap, workers, worker_args=compact
    )
    checked = streamdetect.check(topology).findings
    expected = {f.id for f in checked}
    dan_flu = next(f.id for f in checked if f.identifier_value == "Dan")

    for position in range(views["v1"].height):
        feed.send("v1", views["v1"].slice(position, 1), f"v1-{position}")
    dan = views["v2"].filter(pl.col("Name") == "Dan")
    others = views["v2"].filter(pl.col("Name") != "Dan")
    for position in range(others.height):
        feed.send("v2", others.slice(position, 1), f"v2-{position}")
    # Every finding but Dan's once the rows without Dan's are in: Dan is not disclosed yet.
    until(
        lambda: set(open_findings(read_topic(kafka_bootstrap, findings_topic(topology)))) == expected - {dan_flu},
        "the findings of the rows without Dan's v2 row",
        workers[-1],
    )

    feed.send("v2", dan, "v2-dan")
    until(
        lambda: set(open_findings(read_topic(kafka_bootstrap, findings_topic(topology)))) == expected,
        "Dan-Flu raised once Dan's v2 row arrived",
        workers[-1],
    )
    raising = [e for e in _events(kafka_bootstrap, topology) if e["id"] == dan_flu and e["event"] == "raised"]
    assert [(e["view"], e["batch"]) for e in raising] == [("v2", "v2-dan")]
    assert raising[0]["finding"]["level"] == 2  # type: ignore[index]

    # Its metrics count what it read and found, labelled by view, check and level only.
    _counts_what_it_read(workers[-1].metrics(), views, len(expected))

    # The findings command reports what check reports, with its exit code.
    command = [sys.executable, "-m", "streamdetect", "findings", str(path), "--bootstrap-servers", kafka_bootstrap]
    done = subprocess.run([*command, "--json"], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 1, done.stderr
    assert {f["id"] for f in json.loads(done.stdout)["findings"]} == expected

    # The worker dies; a new one recovers the state from the changelog and goes on.
    workers[-1].kill()
    changelog = read_records_keyed(kafka_bootstrap, f"{app_id(topology)}-state-changelog")
    assert any(key.startswith(b"snapshot/") for key, _ in changelog)
    assert any(value is None for _, value in changelog)  # the entries snapshots replaced: deleted
    workers.append(Worker(path, kafka_bootstrap, tmp_path, extra=compact))
    feed.send("v2", dan, "v2-dan")  # a replay (same batch id): changes nothing
    feed.send("v2", dan, "v2-dan-withdrawn", op="retract")
    until(
        lambda: dan_flu not in open_findings(read_topic(kafka_bootstrap, findings_topic(topology))),
        "Dan-Flu cleared when Dan's v2 row was withdrawn",
        workers[-1],
    )
    assert set(open_findings(read_topic(kafka_bootstrap, findings_topic(topology)))) == expected - {dan_flu}
    events = _events(kafka_bootstrap, topology)
    # The replay raised nothing; the replacement sent the last fold's events again once (it cannot know
    # whether the killed worker sent them), which consumers fold idempotently.
    trail = [e["event"] for e in events if e["id"] == dan_flu]
    assert trail in (["raised", "cleared"], ["raised", "raised", "cleared"])

    # Poison records go to the dead-letter topic with their reason; the worker keeps going.
    _, headers = encode_publication(Publication("v1", "add", "poison", dt.datetime.now(dt.UTC), views["v1"].head(1)))
    feed.producer.send(view_topic(topology, topology.views[0]), value=b"not arrow", headers=headers)
    feed.send("v2", dan, "v2-dan-again-withdrawn", op="retract")  # no longer published: refused
    feed.send("v2", dan, "v2-dan-back")
    until(
        lambda: dan_flu in open_findings(read_topic(kafka_bootstrap, findings_topic(topology))),
        "Dan-Flu raised again when the row came back",
        workers[-1],
    )
    assert sorted(_reasons(kafka_bootstrap, dead_letter_topic(topology))) == ["not_arrow", "refused"]
    # Keyed by where each was read, so a dead letter sent again for a replayed record has the same key.
    keys = sorted(key.decode() for key, _ in read_records_keyed(kafka_bootstrap, dead_letter_topic(topology)))
    assert [key.rsplit(":", 2)[0] for key in keys] == [view_topic(topology, view) for view in topology.views]
    assert all(re.fullmatch(r"\d+:\d+", key.split(":", 1)[1]) for key in keys), keys
    samples = workers[-1].metrics()
    _counts_dead_letters_and_replays(samples)
    # The replacement counts the findings it restored open, then those it raised and cleared since.
    assert sum(v for k, v in samples.items() if k.startswith("streamdetect_open_findings{")) == len(expected)
    scraped = workers[0].scraped + workers[-1].scraped
    # No value of the data in the worker's log (INFO and above).
    log = "\n".join(worker.output() for worker in workers)
    for value in ("Dan", "Flu", "387-399"):
        assert value not in log
        assert value not in scraped


@pytest.mark.parametrize("partitions", [1, 2])
def test_a_rocksdb_store_keeps_the_changelog_on_disk_and_a_restart_goes_on_from_it(
    kafka_bootstrap: str, tmp_path: Path, workers: list[Worker], partitions: int
) -> None:
    """``--store rocksdb://``: the state table's local copy is RocksDB files under --datadir, one per
    changelog partition, holding exactly what the changelog holds up to the offset it records (entries
    written, snapshots, the tombstones of what a snapshot replaced); a worker killed and started again on
    the same files restores the state and goes on: the open findings end equal to check's."""
    local = tmp_path / "local"
    args = ("--store", "rocksdb://", "--datadir", str(local), "--compact-bytes", "1")
    name = f"worker-rocksdb-{partitions}"
    path, topology, views, feed = table1_stream(tmp_path, name, kafka_bootstrap, workers, partitions, worker_args=args)
    checked = streamdetect.check(topology).findings
    expected = {f.id for f in checked}
    dan_flu = next(f.id for f in checked if f.identifier_value == "Dan")
    dan = views["v2"].filter(pl.col("Name") == "Dan")
    rows = [("v1", views["v1"]), ("v2", views["v2"].filter(pl.col("Name") != "Dan"))]
    for view, frame in rows:
        for position in range(frame.height):
            feed.send(view, frame.slice(position, 1), f"{view}-{position}")
    until(
        lambda: set(open_findings(read_topic(kafka_bootstrap, findings_topic(topology)))) == expected - {dan_flu},
        "the findings of the rows without Dan's v2 row",
        workers[-1],
    )
    workers[-1].kill()

    changelog = _changelog_by_partition(kafka_bootstrap, f"{app_id(topology)}-{state_table(partitions)}-changelog")
    stores = sorted(local.glob("**/*.db"))
    assert [store.name for store in stores] == [f"{state_table(partitions)}-{p}.db" for p in range(partitions)]
    for partition, store in enumerate(stores):
        offset, entries = _rocksdb_entries(store)
        assert offset is not None, f"{store}: no offset recorded"
        # Exactly the changelog replayed up to the recorded offset: every write and tombstone kept.
        replayed: dict[bytes, bytes] = {}
        for at, key, value in changelog[partition]:
            if at <= offset:
                if value is None:
                    replayed.pop(key, None)
                else:
                    replayed[key] = value
        assert entries == replayed, store
        assert any(key.startswith(b"snapshot/") or b"/snapshot/" in key for key in entries)
    assert any(value is None for records in changelog.values() for _, _, value in records)
    recorded = [_rocksdb_entries(store)[0] for store in stores]

    workers.append(Worker(path, kafka_bootstrap, tmp_path, partitions=partitions, extra=args))
    feed.send("v2", dan, "v2-dan")
    until(
        lambda: set(open_findings(read_topic(kafka_bootstrap, findings_topic(topology)))) == expected,
        "Dan-Flu raised by the worker started again on the same files",
        workers[-1],
    )
    feed.send("v2", dan, "v2-dan-withdrawn", op="retract")
    until(
        lambda: set(open_findings(read_topic(kafka_bootstrap, findings_topic(topology)))) == expected - {dan_flu},
        "Dan-Flu cleared when Dan's v2 row was withdrawn",
        workers[-1],
    )
    # Faust's recovery read each changelog partition from the offset its files recorded, not from the start.
    assert _recovery_starts(workers[-1].output()) == recorded, workers[-1].output()[-3000:]


def _recovery_starts(log: str) -> list[int]:
    """The offsets Faust's recovery logs it starts reading the changelog's partitions at, in order (its
    table "Reading Starts At - Active": a row per partition, the topic named once)."""
    table = log.split("Reading Starts At - Active", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\|\s*\S+\s*\|\s*(\d+)\s*\|\s*(-?\d+)\s*\|", table, flags=re.MULTILINE)
    return [int(offset) for _, offset in sorted(rows, key=lambda row: int(row[0]))]


def _changelog_by_partition(bootstrap: str, topic: str) -> dict[int, list[tuple[int, bytes, bytes | None]]]:
    """Every record of a changelog topic as (offset, key, value), per partition."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        records: dict[int, list[tuple[int, bytes, bytes | None]]] = {tp.partition: [] for tp in partitions}
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in partitions) and time.monotonic() < deadline:
            for tp, batch in consumer.poll(timeout_ms=500).items():
                records[tp.partition].extend((record.offset, record.key, record.value) for record in batch)
        return records
    finally:
        consumer.close()


def _rocksdb_entries(store: Path) -> tuple[int | None, dict[bytes, bytes]]:
    """The offset a RocksDB table store recorded (Faust's key for it) and its other entries."""
    import rocksdict

    offset_key = b"__faust\0offset__"
    db = rocksdict.Rdict(
        str(store), options=rocksdict.Options(raw_mode=True), access_type=rocksdict.AccessType.read_only()
    )
    try:
        entries = {key: value for key, value in db.items() if key != offset_key}
        recorded = db.get(offset_key)
    finally:
        db.close()
    return (int(recorded) if recorded is not None else None), entries


@pytest.mark.parametrize("partitions", [1, 2])
def test_poison_records_of_every_kind_are_dead_lettered_while_the_worker_goes_on(
    kafka_bootstrap: str, tmp_path: Path, workers: list[Worker], partitions: int
) -> None:
    """Poison records through a running worker: a record of each kind that cannot be read (not Arrow,
    not JSON, a bad header, an unknown view, a missing, unknown or mistyped attribute, a row outside its
    view's ``where``, over the size limit, a withdrawal of a row never published) lands in the
    dead-letter topic with its reason and is counted, and the valid records sent around them are folded:
    the open findings end equal to check's. With one stage and with two (the first reads, the units fold)."""
    path = table1_topology(tmp_path, f"worker-poison-{partitions}")
    v2 = "    attributes: [Name, ZIP, Job, Sex]\n"
    path.write_text(path.read_text().replace(v2, v2 + "    where: \"Sex <> 'X'\"\n"))
    topology = streamdetect.load_topology(path)
    views = load_views(topology)
    create_topics(topology, kafka_bootstrap)
    workers.append(Worker(path, kafka_bootstrap, tmp_path, partitions=partitions))
    feed = Feed(topology, kafka_bootstrap)
    until(lambda: group_ready(kafka_bootstrap, app_id(topology), 1), "the worker joined its group", workers[-1], 120)
    v1, v2_rows = views["v1"], views["v2"]
    topic = view_topic(topology, topology.views[0])

    def record(rows: pl.DataFrame, **changed: str) -> tuple[bytes, list[tuple[str, bytes]]]:
        value, headers = encode_publication(Publication("v1", "add", "poison", dt.datetime.now(dt.UTC), rows))
        named = dict(headers) | {key: text.encode() for key, text in changed.items()}
        return value, list(named.items())

    json_lines = {HEADER_CONTENT: CONTENT_TYPES["json"]}
    poison = {
        "not_arrow": (b"not arrow", record(v1.head(1))[1]),
        "not_json": (b"{not json", record(v1.head(1), **json_lines)[1]),
        "bad_header": record(v1.head(1), **{HEADER_OP: "upsert"}),
        "unknown_view": record(v1.head(1), **{HEADER_VIEW: "nope"}),
        "missing_attribute": record(v1.head(1).drop("Disease")),
        "unknown_attribute": record(v1.head(1).with_columns(pl.lit("Dan").alias("Name"))),
        "wrong_type": record(v1.head(1).with_columns(pl.lit(7).alias("DOB"))),
        "too_large": (b" " * (DEFAULT_MAX_BYTES + 1000), record(v1.head(1), **json_lines)[1]),
    }
    feed.send("v1", v1.head(2), "v1-first")
    for value, headers in poison.values():
        feed.producer.send(topic, value=value, headers=headers).get(timeout=30)
    feed.send("v2", v2_rows.head(1).with_columns(pl.lit("X").alias("Sex")), "v2-outside")  # violates_where
    feed.send("v2", v2_rows.tail(1), "v2-never", op="retract")  # refused: never published
    feed.send("v1", v1.slice(2), "v1-rest")
    feed.send("v2", v2_rows, "v2-all")

    expected = {finding.id for finding in streamdetect.check(topology).findings}
    until(
        lambda: set(open_findings(read_topic(kafka_bootstrap, findings_topic(topology)))) == expected,
        "the valid records folded around the poison ones",
        workers[-1],
    )
    reasons = [*poison, "violates_where", "refused"]

    def letters() -> dict[str, str]:
        """Reason by key: where the view record was read (with two stages, the units of both route
        partitions refuse their shares of a mistyped record or a withdrawal: two letters, one key)."""
        keyed = read_records_with_keys(kafka_bootstrap, dead_letter_topic(topology))
        return {key.decode(): dict(headers)["streamdetect-reason"].decode() for key, _, headers in keyed}

    until(lambda: len(letters()) >= len(reasons), "every poison record dead-lettered", workers[-1])
    keyed = letters()
    assert sorted(keyed.values()) == sorted(reasons)
    assert {key.rsplit(":", 2)[0] for key in keyed} == {view_topic(topology, view) for view in topology.views}
    counted = workers[-1].metrics()
    for reason in reasons:
        # Counted per unit partition that refused it (two stages), once per record where it was read.
        assert 1 <= counted[f'streamdetect_dead_letters_total{{reason="{reason}"}}'] <= partitions, reason
    assert workers[-1].process.poll() is None


def test_a_worker_takes_a_due_snapshot_while_idle(kafka_bootstrap: str, tmp_path: Path, workers: list[Worker]) -> None:
    """The one-stage worker compacts between records, not on their path (docs/streaming.md, "Compaction"):
    Table 1's rows sent one at a time, each followed by a pause longer than the worker's idle delay, leave
    it idle with a snapshot due (half the threshold written since the last one: a record of Table 1 writes
    about 5 KB, under the 16 KB that would force one), which it takes."""
    _, _, views, feed = table1_stream(
        tmp_path, "worker-idle", kafka_bootstrap, workers, worker_args=("--compact-bytes", "8000")
    )
    worker = workers[-1]
    sent = 0

    def folded() -> bool:
        try:
            samples = worker.metrics()
        except OSError:  # its metrics endpoint is not up yet
            return False
        return sum(v for k, v in samples.items() if k.startswith("streamdetect_rows_consumed_total")) >= sent

    rows = [(name, views[name].slice(position, 1)) for name in ("v1", "v2") for position in range(views[name].height)]
    for number, (name, row) in enumerate(rows):
        feed.send(name, row, f"{name}-{number}")
        sent += 1
        until(folded, f"record {number} folded in", worker)
        time.sleep(3 * IDLE_SNAPSHOT_S)  # idle for longer than the delay, and the timer's interval
        if "state snapshot taken while idle" in worker.output():
            break
    assert "state snapshot taken while idle" in worker.output(), worker.output()[-3000:]
    assert worker.metrics()["streamdetect_state_compactions_total"] >= 1


def _counts_what_it_read(samples: dict[str, float], views: dict[str, pl.DataFrame], findings: int) -> None:
    assert samples['streamdetect_rows_consumed_total{op="add",view="v1"}'] == views["v1"].height
    assert samples['streamdetect_rows_consumed_total{op="add",view="v2"}'] == views["v2"].height
    assert samples['streamdetect_open_findings{certain="true",check="linkage",level="2"}'] == 1
    assert samples['streamdetect_findings_raised_total{check="linkage"}'] >= findings
    assert samples["streamdetect_detection_latency_seconds_count"] >= findings
    assert samples["streamdetect_state_written_bytes_total"] > 0
    assert samples["streamdetect_state_compactions_total"] >= 1  # --compact-bytes 1
    assert samples['streamdetect_tasks{check="linkage",kind="tasks"}'] == 3  # as check counts them


def _counts_dead_letters_and_replays(samples: dict[str, float]) -> None:
    assert samples["streamdetect_state_bytes"] > 0  # restored from the changelog by this second worker
    assert samples['streamdetect_dead_letters_total{reason="not_arrow"}'] == 1
    assert samples['streamdetect_dead_letters_total{reason="refused"}'] == 1
    # At least the record sent twice; also those the killed worker had read but not committed.
    assert samples['streamdetect_records_replayed_total{view="v2"}'] >= 1


def _reasons(bootstrap: str, topic: str) -> list[str]:
    return [dict(headers)["streamdetect-reason"].decode() for _, headers in read_records(bootstrap, topic)]


def test_the_worker_refuses_view_topics_it_cannot_keep_whole(kafka_bootstrap: str, tmp_path: Path) -> None:
    path = table1_topology(tmp_path, "worker-wide")
    create_topics(streamdetect.load_topology(path), kafka_bootstrap, partitions=2)
    command = [sys.executable, "-m", "streamdetect", "worker", str(path), "--bootstrap-servers", kafka_bootstrap]
    done = subprocess.run(
        [*command, "--datadir", str(tmp_path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2
    assert "one partition" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("partitions", [1, 2])
def test_a_state_written_under_other_thresholds_stops_the_worker_with_exit_2(
    kafka_bootstrap: str, tmp_path: Path, workers: list[Worker], partitions: int
) -> None:
    name = f"worker-refuses-{partitions}"
    path, topology, views, feed = table1_stream(tmp_path, name, kafka_bootstrap, workers, partitions=partitions)
    feed.send("v1", views["v1"], "v1-all")
    until(lambda: bool(read_topic(kafka_bootstrap, findings_topic(topology))), "the first findings", workers[-1])
    # Stopped before its state entries are on the broker, the worker would leave no state to refuse (a
    # CI run saw that). Stop it once the state is on the broker.
    changelog = f"{app_id(topology)}-{state_table(partitions)}-changelog"
    until(lambda: bool(read_topic(kafka_bootstrap, changelog)), "the state entries", workers[-1])
    workers[-1].stop()
    path.write_text(path.read_text().replace("linkage: {k: 2}", "linkage: {k: 3}"))  # same name, other k
    workers.append(Worker(path, kafka_bootstrap, tmp_path, partitions=partitions))
    feed.send("v2", views["v2"], "v2-all")  # the first record makes the worker restore its state
    try:
        workers[-1].process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker went on with a state of other thresholds: {workers[-1].output()[-2000:]}")
    assert workers[-1].process.returncode == 2, workers[-1].output()[-2000:]
    assert "error: the worker's state topic was written under another topology" in workers[-1].output()
    assert "Traceback" not in workers[-1].output()


def test_a_window_clears_what_its_leaving_rows_completed_across_shared_units(
    kafka_bootstrap: str, tmp_path: Path, workers: list[Worker]
) -> None:
    # Two partitions: units in both must see every record's time, rows for them or not. Their state is
    # compacted at nearly every record (with a window, a snapshot re-encodes the Detector).
    _, topology, views, feed = table1_stream(
        tmp_path,
        "worker-window",
        kafka_bootstrap,
        workers,
        partitions=2,
        extra="window: 1d\n",
        worker_args=("--compact-bytes", "1"),
    )
    checked = streamdetect.check(topology).findings  # files: one publication, the window withdraws nothing
    dan_flu = next(f.id for f in checked if f.identifier_value == "Dan")
    start = dt.datetime.now(dt.UTC) - dt.timedelta(days=10)
    feed.send("v1", views["v1"], "v1-all", published=start)
    feed.send("v2", views["v2"], "v2-all", published=start + dt.timedelta(hours=1))
    until(
        lambda: set(open_findings(read_topic(kafka_bootstrap, findings_topic(topology)))) == {f.id for f in checked},
        "every finding while both views are in the window",
        workers[-1],
    )
    # Two days on, both views' rows have left the window: one v2 row alone discloses nothing.
    feed.send("v2", views["v2"].head(1), "v2-later", published=start + dt.timedelta(days=2))
    until(
        lambda: open_findings(read_topic(kafka_bootstrap, findings_topic(topology))) == {},
        "every finding cleared once the rows left the window",
        workers[-1],
    )
    trail = [(e["event"], e["batch"]) for e in _events(kafka_bootstrap, topology) if e["id"] == dan_flu]
    assert trail[1:] == [("cleared", "v2-later")]
    assert trail[0] in {("raised", "v1-all"), ("raised", "v2-all")}  # the views' topics are read in any order
    # A late record (published before the window) adds nothing; v1 published now is alone: level 1 only.
    feed.send("v1", views["v1"], "v1-late", published=start)
    feed.send("v1", views["v1"], "v1-again", published=start + dt.timedelta(days=2, hours=1))
    alone = {f.id for f in checked if f.views == ("v1",)}
    assert len(alone) == views["v1"].height  # each SSN with its Disease
    until(
        lambda: set(open_findings(read_topic(kafka_bootstrap, findings_topic(topology)))) == alone,
        "v1's own findings, Dan's no longer",
        workers[-1],
    )
    raised_by = {e["batch"] for e in _events(kafka_bootstrap, topology) if e["event"] == "raised"}
    assert "v1-late" not in raised_by


@pytest.mark.parametrize("partitions", [1, 2])
def test_the_universal_topic_carries_the_joined_tuple_that_ties_dan_to_flu(
    kafka_bootstrap: str, tmp_path: Path, workers: list[Worker], partitions: int
) -> None:
    name = f"worker-universal-{partitions}"
    path = table1_topology(tmp_path, name)
    topology = streamdetect.load_topology(path)
    create_topics(topology, kafka_bootstrap)
    workers.append(Worker(path, kafka_bootstrap, tmp_path, partitions, extra=("--universal-rows", "100")))
    views = load_views(topology)
    feed = Feed(topology, kafka_bootstrap)
    feed.send("v1", views["v1"], "v1-all")
    feed.send("v2", views["v2"], "v2-all")
    topic = universal_topic(topology)

    def merged() -> pl.DataFrame:
        frames = [pl.read_ipc_stream(value) for value, _ in read_records(kafka_bootstrap, topic)]
        return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()

    # What `closure --universal` writes over the files, for the channels holding an identifier and Disease.
    whole = universal_relation(topology.views, views, topology.table.attributes, 100)
    expected = whole.filter(pl.col("_channel").is_in(["{v1}", "{v1, v2}"]))
    until(lambda: merged().height == expected.height, "the closure's tuples on the universal topic", workers[-1])
    tuples = merged()
    assert sorted(tuples.rows(), key=repr) == sorted(expected.select(tuples.columns).rows(), key=repr)
    joined = tuples.filter(pl.col("_channel") == "{v1, v2}")
    assert joined.columns[:7] == ["SSN", "Name", "ZIP", "DOB", "Sex", "Job", "Disease"]  # the union schema
    dan = joined.filter(pl.col("Name") == "Dan")
    assert dan.select("Job", "Disease", "_level").rows() == [("Dancer", "Flu", 2)]
    # Each record names its channel and the batch that added its tuples (the views' records may be read
    # in either order: the joined tuples come with the second).
    for value, headers in read_records(kafka_bootstrap, topic):
        named = dict(headers)
        assert named["streamdetect-batch"] in {b"v1-all", b"v2-all"}
        assert set(pl.read_ipc_stream(value).get_column("_channel")) == {named["streamdetect-channel"].decode()}


@pytest.mark.parametrize(
    ("partitions", "where"), [(2, "middle"), (2, "tail"), (2, "first"), (1, "middle"), (1, "first")]
)
def test_a_view_record_the_consumer_skipped_is_read_directly_and_folded(
    kafka_bootstrap: str, tmp_path: Path, workers: list[Worker], partitions: int, where: str
) -> None:
    """The state keeps, per view topic partition, the offset after the last record handled (with two
    stages every route record names the view record it came from): a view record the consumer skipped
    (its offset committed past it and never delivered, as the two-worker test saw, and a restarted
    one-stage worker once) shows as a jump, and the worker reads it from the view topic. The skip is made
    by hand: the group's offset of v2's topic is moved past Dan's record while no worker runs
    (``middle``: the next v2 record shows the jump), past the last two (``tail``: none follows, the
    idle worker's tail check compares with the group's committed offsets), or past every v2 record when
    the state has seen none (``first``: the tail check reads that partition from its start)."""
    name = f"worker-view-gap-{partitions}-{where}"
    path, topology, views, feed = table1_stream(tmp_path, name, kafka_bootstrap, workers, partitions)
    group = app_id(topology)
    until(lambda: group_ready(kafka_bootstrap, group, 1), "the worker joined its group", workers[-1], 120)
    v2 = views["v2"]
    dan = v2.get_column("Name").to_list().index("Dan")
    others = [position for position in range(v2.height) if position != dan]
    feed.send("v1", views["v1"], "v1-all")
    if where != "first":
        feed.send("v2", v2[others[:1]], "v2-first")  # offset 0 of v2's topic: the state knows where v2 stands
    topics = [view_topic(topology, view) for view in topology.views] + [route_topic(topology)][: partitions - 1]
    until(lambda: committed_lag(kafka_bootstrap, group, topics) == 0, "v1 folded and committed", workers[-1])
    workers[-1].stop()

    feed.send("v2", v2.slice(dan, 1), "v2-dan")  # the record that ties Dan to Flu, skipped
    feed.send("v2", v2[others[1:]] if where != "first" else v2[others], "v2-rest")
    topic = view_topic(topology, next(view for view in topology.views if view.name == "v2"))
    skip = {TopicPartition(topic, 0): {"middle": 2, "tail": 3, "first": 2}[where]}
    said = "were never routed (its consumer skipped them)" if partitions > 1 else "were not delivered by the consumer"
    _resume_past(kafka_bootstrap, tmp_path, workers, path, skip, said, partitions)


@pytest.mark.parametrize("where", ["middle", "tail"])
def test_a_route_record_the_consumer_skipped_is_read_directly_and_folded(
    kafka_bootstrap: str, tmp_path: Path, workers: list[Worker], where: str
) -> None:
    """The units' state records the last route offset they folded; a record past it means the consumer
    skipped some (as Faust's did after a rebalance): the worker reads them from the broker and folds them.
    Here the skip is made by hand: the group's offsets are moved past one routed record while no worker
    runs (``middle``: a later record shows the jump) or past both (``tail``: no record follows, the idle
    worker's tail check finds them)."""
    path, topology, views, feed = table1_stream(tmp_path, f"worker-gap-{where}", kafka_bootstrap, workers, partitions=2)
    group, route = app_id(topology), route_topic(topology)
    until(lambda: group_ready(kafka_bootstrap, group, 1), "the worker joined its group", workers[-1], 120)
    feed.send("v1", views["v1"], "v1-all")
    topics = [view_topic(topology, view) for view in topology.views] + [route]
    until(lambda: committed_lag(kafka_bootstrap, group, topics) == 0, "v1 folded and committed", workers[-1])
    workers[-1].stop()

    # Two v2 records routed straight to the route topic (as the first stage does); the group's offsets
    # then skip the first, the one that ties Dan to Flu.
    router = Router(plan(topology, 2))
    dan = views["v2"].get_column("Name").to_list().index("Dan")
    first, second = views["v2"].slice(dan, 1), pl.concat([views["v2"].head(dan), views["v2"].slice(dan + 1)])
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    sent: dict[int, list[int]] = {}
    for batch, rows in (("v2-dan", first), ("v2-rest", second)):
        value, headers = encode_publication(Publication("v2", "add", batch, dt.datetime.now(dt.UTC), rows))
        for partition, body, named in router.handle(value, headers, "v2").records:
            meta = producer.send(route, value=body, headers=named, partition=partition).get(timeout=30)
            sent.setdefault(partition, []).append(meta.offset)
    producer.close()
    past = {
        TopicPartition(route, p): offsets[1] if where == "middle" else offsets[1] + 1 for p, offsets in sent.items()
    }
    _resume_past(kafka_bootstrap, tmp_path, workers, path, past, "were not delivered by the consumer; reading them", 2)


def _resume_past(
    bootstrap: str,
    tmp_path: Path,
    workers: list[Worker],
    path: Path,
    offsets: dict[TopicPartition, int],
    said: str,
    partitions: int,
) -> None:
    """Move the stopped worker's group past records (``offsets``: where it goes on from), start another
    worker and wait until the open findings are check's; the worker must have ``said`` why."""
    topology = streamdetect.load_topology(path)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        skip = {tp: OffsetAndMetadata(offset, "", -1) for tp, offset in offsets.items()}
        assert all(error is NoError for error in admin.alter_group_offsets(app_id(topology), skip).values())
    finally:
        admin.close()
    workers.append(Worker(path, bootstrap, tmp_path, partitions=partitions))
    expected = {f.id for f in streamdetect.check(topology).findings}
    until(
        lambda: set(open_findings(read_topic(bootstrap, findings_topic(topology)))) == expected,
        "every finding of check, Dan's included",
        workers[-1],
    )
    assert said in workers[-1].output()
