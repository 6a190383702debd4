"""Publishing onto a real Kafka broker and reading the records back: topics and records."""

from __future__ import annotations

import datetime as dt
import json
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import polars as pl
import pytest
from kafka import KafkaConsumer, KafkaProducer

import streamdetect
from streamdetect.detector import Detector
from streamdetect.io.sources import load_views
from streamdetect.model.batch import Batch
from streamdetect.stream import broker
from streamdetect.stream.publish import publish
from streamdetect.stream.records import DeadLetter, Publication, decode_record, encode_publication
from streamdetect.stream.topics import view_topic
from tests.integration.kafka_helpers import table1_topology

ROOT = Path(__file__).resolve().parents[2]


def _read_all(bootstrap: str, topics: list[str], expected: int) -> list[tuple[str, bytes, list[tuple[str, bytes]]]]:
    consumer = KafkaConsumer(
        *topics,
        bootstrap_servers=bootstrap,
        group_id=f"test-{uuid.uuid4().hex}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    records = []
    try:
        for message in consumer:
            records.append((message.topic, message.value, list(message.headers)))
            if len(records) == expected:
                break
    finally:
        consumer.close()
    return records


@pytest.mark.parametrize("form", ["arrow", "json"])
def test_views_published_row_by_row_read_back_to_the_findings_of_check(
    kafka_bootstrap: str, tmp_path: Path, form: str
) -> None:
    topology = streamdetect.load_topology(table1_topology(tmp_path, f"table1-{form}"))
    views = load_views(topology)
    sent = publish(topology, views, kafka_bootstrap, batch_rows=1, form=form)  # type: ignore[arg-type]
    assert sent.rows == {name: frame.height for name, frame in views.items()}
    topics = {view_topic(topology, view): view.name for view in topology.views}
    records = _read_all(kafka_bootstrap, list(topics), sum(sent.records.values()))
    assert len(records) == sum(frame.height for frame in views.values())
    detector = Detector(topology, ["linkage"])
    for topic, value, headers in records:
        publication = decode_record(topology, value, headers, view=topics[topic])
        assert isinstance(publication, Publication), publication
        assert publication.published.tzinfo is not None
        detector.update(Batch(views={publication.view: publication.rows}))
    expected = streamdetect.check(topology, checks=["linkage"]).findings
    assert sorted(f.id for f in detector.findings()) == sorted(f.id for f in expected)
    assert any(f.identifier_value == "Dan" and f.level == 2 for f in detector.findings())


def test_poison_records_come_back_as_dead_letters(kafka_bootstrap: str, tmp_path: Path) -> None:
    topology = streamdetect.load_topology(table1_topology(tmp_path, "table1-poison"))
    topic = view_topic(topology, topology.views[0])
    good, headers = encode_publication(
        Publication("v1", "add", "b1", dt.datetime.now(dt.UTC), load_views(topology)["v1"].head(1))
    )
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    poison = [
        (b"not arrow at all", headers),
        (good, [(key, value) for key, value in headers if key != "streamdetect-published"]),
        (b'{"SSN": "1"}', [*headers[:-1], ("content-type", b"application/x-ndjson")]),
    ]
    for value, record_headers in poison:
        producer.send(topic, value=value, headers=record_headers)
    producer.flush()
    producer.close()
    records = _read_all(kafka_bootstrap, [topic], len(poison))
    letters = [decode_record(topology, value, headers, view="v1") for _, value, headers in records]
    assert [letter.reason for letter in letters if isinstance(letter, DeadLetter)] == [
        "not_arrow",
        "bad_header",
        "missing_attribute",
    ]


def test_the_broker_commands_start_once_and_stop(kafka_bootstrap: str) -> None:
    port = broker.free_port()
    command = [sys.executable, "-m", "streamdetect", "broker"]
    started = subprocess.run([*command, "start", "--port", str(port)], capture_output=True, text=True, check=False)
    try:
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip() == f"127.0.0.1:{port}"
        again = subprocess.run([*command, "start", "--port", str(port)], capture_output=True, text=True, check=False)
        assert again.stdout == started.stdout  # the running broker is kept, not a second one started
        assert broker.answers(f"127.0.0.1:{port}")
        with socket.socket() as other:  # a port some other program listens on
            other.bind(("127.0.0.1", 0))
            other.listen()
            taken = subprocess.run(
                [*command, "start", "--port", str(other.getsockname()[1])], capture_output=True, text=True, check=False
            )
        assert taken.returncode == 2
        assert "in use by another program" in taken.stderr
    finally:
        stopped = subprocess.run([*command, "stop", "--port", str(port)], capture_output=True, text=True, check=False)
    assert stopped.returncode == 0
    assert "stopped" in stopped.stderr
    assert broker.running(port) is None
    assert not broker.answers(f"127.0.0.1:{port}", timeout_s=1.0)


def test_publishing_without_a_broker_says_how_to_get_one(tmp_path: Path) -> None:
    topology = table1_topology(tmp_path, "table1-nobroker")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamdetect",
            "publish",
            str(topology),
            "--bootstrap-servers",
            f"127.0.0.1:{broker.free_port()}",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 2
    assert "streamdetect broker start" in done.stderr
    assert "Traceback" not in done.stderr


def test_frames_compare_equal_after_a_round_trip_through_kafka(kafka_bootstrap: str, tmp_path: Path) -> None:
    topology = streamdetect.load_topology(table1_topology(tmp_path, "table1-types"))
    rows = load_views(topology)["v1"]
    publish(topology, {"v1": rows}, kafka_bootstrap, batch_rows=1000)
    [(_, value, headers)] = _read_all(kafka_bootstrap, [view_topic(topology, topology.views[0])], 1)
    publication = decode_record(topology, value, headers)
    assert isinstance(publication, Publication)
    assert publication.rows.equals(rows)
    assert publication.rows.schema == rows.schema
    assert isinstance(publication.rows, pl.DataFrame)


OPTIONS = ("--batch-rows", "2", "--format", "json", "--partitions", "2")


def test_the_publish_command_streams_every_view(kafka_bootstrap: str, tmp_path: Path) -> None:
    path = table1_topology(tmp_path, "table1-cli")
    done = subprocess.run(
        [sys.executable, "-m", "streamdetect", "publish", str(path), "--bootstrap-servers", kafka_bootstrap, *OPTIONS],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    topology = streamdetect.load_topology(path)
    views = load_views(topology)
    for name, frame in views.items():
        assert f"{name}: {frame.height:,} rows in {(frame.height + 1) // 2:,} records" in done.stderr
    expected = sum((frame.height + 1) // 2 for frame in views.values())
    records = _read_all(kafka_bootstrap, [view_topic(topology, view) for view in topology.views], expected)
    assert sum(len(decode_record(topology, value, headers).rows) for _, value, headers in records) == sum(  # type: ignore[union-attr]
        frame.height for frame in views.values()
    )


BENCH = ("--batch-rows", "2", "--json")


@pytest.mark.parametrize(("prefix", "prefix_rows"), [("0", 0), ("0.5", 6)])
def test_bench_stream_measures_a_worker_and_checks_its_findings(
    kafka_bootstrap: str, prefix: str, prefix_rows: int
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamdetect",
            "bench",
            "stream",
            str(ROOT / "topologies" / "dou-patients.yaml"),
            *BENCH,
            "--prefix",
            prefix,
            "--bootstrap-servers",
            kafka_bootstrap,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    # With a prefix, half of each view is folded in first; the figures count the rest.
    assert (outcome["rows"], outcome["prefix_rows"]) == (12 - prefix_rows, prefix_rows)
    assert outcome["same_as_check"] is True  # over every row, the prefix's included
    assert outcome["findings"] == 7
    assert outcome["rows_per_second"] > 0
    assert outcome["detection_latency_s"]["p99"] is not None
    # The worker's time in each check over the measured rows, from its per-check counter.
    assert set(outcome["check_s"]) == {"linkage"}
    assert outcome["check_s"]["linkage"] > 0
