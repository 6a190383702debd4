"""Four workers share the BP benchmark through a real broker; one is killed mid-stream and replaced.

Four workers in one group, four partitions, process the BP views with linkage and k-anonymity by views
(linkage's units per identifier, k-anonymity's per identifier and sensitive pair, spread over the
partitions) and the findings topic's open set ends equal to ``streamdetect check``; killing one
(SIGKILL) and starting another still ends with the same open set, none lost, and the group's committed
lag back to zero within a stated time.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kafka import KafkaConsumer, TopicPartition

import streamdetect
from streamdetect.bench.bp import generate_bp, write_bp
from streamdetect.io.sources import load_views
from streamdetect.io.topology_file import load_topology
from streamdetect.model.codecs import frame_from_ipc
from streamdetect.model.topology import Topology
from streamdetect.stream.events import open_findings
from streamdetect.stream.publish import (
    committed_lag,
    committed_offsets,
    create_topics,
    group_ready,
    publish,
    read_range,
    read_records,
    read_records_keyed,
    read_topic,
)
from streamdetect.stream.state_log import APPLIED_KEY, read_entries, whole_entries
from streamdetect.stream.topics import dead_letter_topic, findings_topic, route_topic, view_topic
from streamdetect.stream.worker import app_id
from tests.integration.kafka_helpers import Worker

#: After the last record is published, the group must have processed and committed everything within
#: this time (the replacement's takeover included: a 10 s session timeout, the changelog replay, the
#: killed worker's uncommitted records again). Measured: docs/benchmarks.md, "Two workers".
DRAINED_WITHIN_S = 300.0
#: Workers in the group and partitions of the work.
WORKERS = PARTITIONS = 4


def _rows_read(workers: list[Worker]) -> float:
    total = 0.0
    for worker in workers:
        if worker.process.poll() is None:
            total += sum(v for k, v in worker.metrics().items() if k.startswith("streamdetect_rows_consumed_total"))
    return total


def _wait(condition: object, what: str, timeout_s: float, workers: list[Worker]) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(1.0)
    logs = "\n".join(worker.output()[-2000:] for worker in workers)
    raise AssertionError(f"{what} within {timeout_s:.0f} s; worker logs:\n{logs}")


def test_four_workers_share_bp_and_a_killed_one_is_replaced(
    kafka_bootstrap: str, tmp_path: Path, workers: list[Worker]
) -> None:
    table, _ = generate_bp(seed=8)
    path = write_bp(table, tmp_path / "bp", name="bp-shared")
    path.write_text(path.read_text().replace("checks:\n", "checks:\n  k-anonymity:\n    k: 2\n"))
    topology = load_topology(path)
    assert [config.name for config in topology.checks] == ["k-anonymity", "linkage"]
    views = load_views(topology)
    rows = sum(frame.height for frame in views.values())
    expected = {finding.id for finding in streamdetect.check(topology, views).findings}
    group = app_id(topology)
    create_topics(topology, kafka_bootstrap, partitions=PARTITIONS)
    # Each unit's state is compacted every megabyte or so: the replacement restores from snapshots.
    compact = ("--compact-bytes", str(1 << 20))
    workers += [Worker(path, kafka_bootstrap, tmp_path, PARTITIONS, compact) for _ in range(WORKERS)]
    _wait(lambda: group_ready(kafka_bootstrap, group, WORKERS), "every worker joined", 180, workers)

    publisher = threading.Thread(target=publish, args=(topology, views, kafka_bootstrap), kwargs={"batch_rows": 1000})
    publisher.start()
    _wait(lambda: _rows_read(workers) >= rows / 3, "a third of the rows read", 300, workers)
    workers[0].kill()  # mid-stream: records read and not yet committed come again to the others
    workers.append(Worker(path, kafka_bootstrap, tmp_path, PARTITIONS, compact))
    publisher.join()
    published = time.monotonic()

    topics = [view_topic(topology, view) for view in topology.views] + [route_topic(topology)]
    try:
        _wait(lambda: committed_lag(kafka_bootstrap, group, topics) == 0, "lag back to zero", DRAINED_WITHIN_S, workers)
    except AssertionError as stalled:  # which partitions stopped short, and where
        raise AssertionError(f"{_lagging(kafka_bootstrap, group, topics)}\n{stalled}") from None
    drained_s = time.monotonic() - published
    values = read_topic(kafka_bootstrap, findings_topic(topology), timeout_s=120)
    events = [json.loads(value) for value in values if value is not None]  # (tombstones of cleared findings)
    opened = open_findings([json.dumps(event).encode() for event in events])
    missing, extra = expected - set(opened), set(opened) - expected
    if missing or extra:
        pytest.fail(_explain(kafka_bootstrap, topology, events, missing, extra, drained_s))
    assert read_records(kafka_bootstrap, dead_letter_topic(topology)) == []
    changelog = read_records_keyed(kafka_bootstrap, f"{group}-units-changelog", timeout_s=120)
    assert any(b"/snapshot/" in key for key, _ in changelog)  # the units' entries were compacted
    # A finding raised again (a replay, a takeover) carries the same id and the same content.
    bodies: dict[str, set[str]] = defaultdict(set)
    for event in events:
        if event["finding"] is not None:  # (a cleared event sent again after a restore carries none)
            bodies[event["id"]].add(json.dumps(event["finding"], sort_keys=True))
    assert all(len(found) == 1 for found in bodies.values())
    for worker in workers[1:]:
        assert worker.process.poll() is None, worker.output()[-2000:]
    # The idle workers' offset look-ups (tail checks, seeks back) keep kafka-python's connection lines
    # at DEBUG: at INFO each look-up logged ten.
    assert not any("IO loop starting" in worker.output() for worker in workers)


def _lagging(bootstrap: str, group: str, topics: list[str]) -> str:
    """The partitions of ``topics`` whose committed offset stops short of their end: (topic, partition,
    committed, end)."""
    done = committed_offsets(bootstrap, group)
    short = []
    for topic in topics:
        for partition in range(PARTITIONS):
            end = _end(bootstrap, topic, partition)
            if done.get((topic, partition), 0) < end:
                short.append((topic, partition, done.get((topic, partition)), end))
    return f"partitions short of their end (topic, partition, committed, end): {short}"


def _explain(
    bootstrap: str, topology: Topology, events: list[dict[str, Any]], missing: set[str], extra: set[str], drained: float
) -> str:
    """What a failing run looked like: the differing ids' events, dead letters, each unit's applied batches."""
    lines = [
        f"{len(missing)} findings of check not open, {len(extra)} open that check does not report ({drained:.0f} s)"
    ]
    for finding in sorted(missing)[:2] + sorted(extra)[:2]:
        trail = [(e["event"], e["view"], e["batch"][:8]) for e in events if e["id"] == finding]
        lines.append(f"{finding}: {trail}")
    by_id = {e["id"]: e["finding"] for e in events if e["finding"] is not None}
    for finding in sorted(extra)[:2]:  # the other findings of the same identifier value, with their events
        who = by_id[finding].get("identifier")
        related = [e for e in events if (e["finding"] or by_id.get(e["id"], {})).get("identifier") == who]
        trail = [(e["event"], e["id"], (e["finding"] or {}).get("level")) for e in related]
        lines.append(f"{finding}'s value: {trail}")
    reasons = [
        dict(headers).get("streamdetect-reason") for _, headers in read_records(bootstrap, dead_letter_topic(topology))
    ]
    lines.append(f"dead letters: {reasons}")
    batches, applied = _published_and_applied(bootstrap, topology)
    lines.append(f"{len(batches)} batches published; per unit, batches applied (replays included) and missing:")
    lost: set[str] = set()
    for unit, found in sorted(applied.items()):
        missing_batches = sorted(batches - set(found))
        lost.update(missing_batches[:5])
        lines.append(f"  {unit}: {len(found)} applied, missing {len(missing_batches)}: {missing_batches[:5]}")
    topics = [view_topic(topology, view) for view in topology.views] + [route_topic(topology)]
    for topic in topics:  # where the lost batches were published and routed: (partition, offset)
        places = _places(bootstrap, topic, lost)
        if places:
            lines.append(f"  {topic}: {places}")
    return "\n".join(lines)


def _places(bootstrap: str, topic: str, batches: set[str]) -> list[tuple[str, int, int]]:
    """(batch id, partition, offset) of the records of ``topic`` that carry one of ``batches``."""
    found = []
    for partition in range(PARTITIONS):
        end = _end(bootstrap, topic, partition)
        for offset, _, headers in read_range(bootstrap, topic, partition, start=0, end=end):
            batch = dict(headers).get("streamdetect-batch", b"").decode()
            if batch in batches:
                found.append((batch[:8], partition, offset))
    return found


def _end(bootstrap: str, topic: str, partition: int) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(topic, partition)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def _published_and_applied(bootstrap: str, topology: Topology) -> tuple[set[str], dict[str, list[str]]]:
    """The batch ids published, and per unit the batch ids its changelog entries applied (chunked
    entries put back together; replays included)."""
    batches = {
        dict(headers)["streamdetect-batch"].decode()
        for v in topology.views
        for _, headers in read_records(bootstrap, view_topic(topology, v))
    }
    entries = read_records_keyed(bootstrap, f"{app_id(topology)}-units-changelog", timeout_s=120)
    by_unit: dict[str, dict[str, dict[str, bytes]]] = defaultdict(lambda: {"record": {}, "snapshot": {}})
    for key, value in entries:  # the latest value of each key; a tombstone deletes it
        unit, kind, number = re.split(r"/(record|snapshot)/", key.decode(), maxsplit=1)
        if value is None:
            by_unit[unit][kind].pop(number, None)
        else:
            by_unit[unit][kind][number] = value
    applied: dict[str, list[str]] = {}
    for unit, kinds in by_unit.items():
        found = []
        for whole in whole_entries(kinds["snapshot"]).values():
            snapshot = _unpacked(whole)
            if APPLIED_KEY in snapshot:
                found += frame_from_ipc(snapshot[APPLIED_KEY]).get_column("batch").to_list()
        for whole in whole_entries(kinds["record"]).values():
            found += [k[len("applied/") :] for k in _unpacked(whole) if k.startswith("applied/")]
        applied[unit] = found
    return batches, applied


def _unpacked(value: bytes) -> dict[str, bytes]:
    try:
        return read_entries(value)
    except (OSError, ValueError, pl.exceptions.PolarsError):  # not an entry (never expected here)
        return {}
