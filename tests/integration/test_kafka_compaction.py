"""The findings topic outlives its retention: compacted by finding id, a tombstone when a finding clears.

A findings topic that rolls a segment every second, cleans at once and keeps tombstones a second (and
whose retention, which a compacted topic does not apply, is a second too): Table 1's findings raised,
Dan's cleared by a withdrawal, time passes, segments roll and the cleaner runs; `findings --json` still
equals `check`'s open set and the worker's, and Dan's finding does not come back. A findings topic made
beforehand with `cleanup.policy=delete` is reported at the worker's start.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

import streamdetect
from streamdetect.stream.publish import read_records_keyed
from streamdetect.stream.topics import findings_topic, topic_configs
from tests.integration.kafka_helpers import Worker, table1_stream, table1_topology, until

SHORT = {
    "segment.ms": "1000",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1000",
    "min.compaction.lag.ms": "0",
    "retention.ms": "1000",
}


def _findings(bootstrap: str, path: Path) -> tuple[int, dict[str, object]]:
    command = [sys.executable, "-m", "streamdetect", "findings", str(path), "--bootstrap-servers", bootstrap, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    return done.returncode, json.loads(done.stdout)


def test_open_findings_outlive_the_retention_and_cleared_ones_do_not_come_back(
    kafka_bootstrap: str, tmp_path: Path, workers: list[Worker]
) -> None:
    path, topology, views, feed = table1_stream(tmp_path, "compacted", kafka_bootstrap, workers)
    topic = findings_topic(topology)
    assert topic_configs(topology)[topic]["cleanup.policy"] == "compact"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:  # created compacted by the topics' creation; made short-lived and eager to clean here (AlterConfigs
        # replaces a topic's settings: its own are given again)
        configs = {**topic_configs(topology)[topic], **SHORT}
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)])
    finally:
        admin.close()
    checked = streamdetect.check(topology).findings
    expected = {f.id for f in checked}
    dan_flu = next(f.id for f in checked if f.identifier_value == "Dan")
    for name, rows in views.items():
        feed.send(name, rows, f"{name}-all")
    until(lambda: _findings(kafka_bootstrap, path)[0] == 1, "the findings raised", workers[-1])
    until(
        lambda: {f["id"] for f in _findings(kafka_bootstrap, path)[1]["findings"]} == expected,  # type: ignore[union-attr]
        "check's findings",
        workers[-1],
    )
    dan = views["v2"].filter(pl.col("Name") == "Dan")
    feed.send("v2", dan, "dan-withdrawn", op="retract")
    until(
        lambda: {f["id"] for f in _findings(kafka_bootstrap, path)[1]["findings"]} == expected - {dan_flu},  # type: ignore[union-attr]
        "Dan-Flu cleared",
        workers[-1],
    )
    keyed = read_records_keyed(kafka_bootstrap, topic)
    assert (dan_flu.encode(), None) in keyed  # the tombstone
    # Time passes beyond the retention; other findings cleared and raised again roll the segments (a
    # segment is cleaned once it is no longer the active one), and the cleaner drops what later records
    # replaced: Dan-Flu's raised and cleared events, then its tombstone.
    other = views["v1"].head(1)
    deadline = time.monotonic() + 180
    turn = 0
    while time.monotonic() < deadline:
        time.sleep(2)
        turn += 1
        feed.send("v1", other, f"other-out-{turn}", op="retract")
        feed.send("v1", other, f"other-back-{turn}")
        if not any(key == dan_flu.encode() for key, _ in read_records_keyed(kafka_bootstrap, topic)):
            break
    else:
        raise AssertionError(f"the cleaner did not drop Dan-Flu's records: {workers[-1].output()[-2000:]}")
    until(
        lambda: {f["id"] for f in _findings(kafka_bootstrap, path)[1]["findings"]} == expected - {dan_flu},  # type: ignore[union-attr]
        "the open set after the turns",
        workers[-1],
    )
    status, report = _findings(kafka_bootstrap, path)
    assert status == 1
    # Every open finding's raised event is older than the retention, and still there.
    assert {f["id"] for f in report["findings"]} == expected - {dan_flu}  # type: ignore[union-attr]


def test_a_findings_topic_that_deletes_by_retention_is_reported_at_the_start(
    kafka_bootstrap: str, tmp_path: Path, workers: list[Worker]
) -> None:
    path = table1_topology(tmp_path, "retention-deleted")
    topology = streamdetect.load_topology(path)
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:  # made by hand with the broker's defaults (cleanup.policy=delete)
        admin.create_topics([NewTopic(findings_topic(topology), num_partitions=1, replication_factor=1)])
    finally:
        admin.close()
    workers.append(Worker(path, kafka_bootstrap, tmp_path))
    until(lambda: "warning: topic " in workers[-1].output(), "the warning on stderr", workers[-1])
    assert "cleanup.policy is 'delete'" in workers[-1].output()
    until(lambda: "[WARNING] topic " in workers[-1].output(), "the WARNING line in the worker's log", workers[-1])
    until(lambda: bool(_metric(workers[-1])), "the metric", workers[-1])
    samples = workers[-1].metrics()
    assert samples['streamdetect_topic_misconfigured{setting="cleanup.policy",topic="findings"}'] == 1
    assert samples['streamdetect_topic_misconfigured{setting="cleanup.policy",topic="dead-letters"}'] == 0


def _metric(worker: Worker) -> bool:
    try:
        return any(name.startswith("streamdetect_topic_misconfigured") for name in worker.metrics())
    except OSError:
        return False
