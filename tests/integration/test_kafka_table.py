"""The private table through a real broker: the publisher-side checks live in the worker, and a worker
that has seen no row of the table says so (status events, metric, log, ``findings``), never "clean".

The patients of Yao, Wang, Wang & Jajodia's Figure 1 with the two views of Figure 4 (computed from the
table), checked by SIND, table k-anonymity and l-diversity, and by linkage (split by identifier value
with two partitions: the table's rows go to the unit of the whole checks only).
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaProducer

import streamdetect
from streamdetect.io.sources import load_data
from streamdetect.io.topology_file import load_topology
from streamdetect.stream.events import fold_events
from streamdetect.stream.publish import create_topics, read_topic
from streamdetect.stream.records import Publication, encode_publication
from streamdetect.stream.topics import findings_topic, table_topic
from tests.integration.kafka_helpers import ROOT, Worker, until

CHECKS = ("sind", "table-k-anonymity", "l-diversity")


def _topology(tmp_path: Path, name: str, checks: str) -> Path:
    text = (ROOT / "topologies" / "sind-figure4.yaml").read_text()
    text = text.replace("name: sind-figure4", f"name: {name}").replace("data/sind/", f"{ROOT}/topologies/data/sind/")
    path = tmp_path / f"{name}.yaml"
    path.write_text(text.replace("checks:\n  sind: {k: 2}", f"checks:\n{checks}"))
    return path


def _streamdetect(*arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "streamdetect", *arguments]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=180)


def _status(bootstrap: str, path: Path) -> tuple[set[str], dict[str, str]]:
    opened, incomplete = fold_events(read_topic(bootstrap, findings_topic(load_topology(path))))
    return set(opened), incomplete


@pytest.mark.parametrize("partitions", [1, 2])
def test_the_table_and_views_through_their_topics_end_in_checks_findings(
    kafka_bootstrap: str, tmp_path: Path, workers: list[Worker], partitions: int
) -> None:
    checks = "  linkage: {k: 2}\n  sind: {k: 2}\n  table-k-anonymity: {k: 2}\n  l-diversity: {l: 2}\n"
    path = _topology(tmp_path, f"table-stream-{partitions}", checks)
    topology = load_topology(path)
    expected = {f.id for f in streamdetect.check(topology).findings}
    assert {f.check for f in streamdetect.check(topology).findings} == set(CHECKS)
    create_topics(topology, kafka_bootstrap, partitions)
    workers.append(Worker(path, kafka_bootstrap, tmp_path, partitions=partitions))
    bootstrap = ("--bootstrap-servers", kafka_bootstrap)

    # The views only: the checks that read the table are incomplete, and say so.
    sent = _streamdetect("publish", str(path), *bootstrap, "--no-table", "--partitions", str(partitions))
    assert sent.returncode == 0, sent.stderr
    until(lambda: set(_status(kafka_bootstrap, path)[1]) == set(CHECKS), "the blind checks reported", workers[-1])
    found = _streamdetect("findings", str(path), *bootstrap, "--json")
    assert found.returncode == 1, found.stderr  # the views' own findings fail the run
    assert set(json.loads(found.stdout)["incomplete"]) == set(CHECKS)
    human = _streamdetect("findings", str(path), *bootstrap, "--format", "human")
    assert "INCOMPLETE" in human.stdout
    samples = workers[-1].metrics()
    for check in CHECKS:
        assert samples[f'streamdetect_inputs_missing{{check="{check}",input="table"}}'] == 1
    assert samples['streamdetect_inputs_missing{check="sind",input="table"}'] == 1
    assert "incomplete" in workers[-1].output()

    # The table, as any Kafka client may send it (a header says the rows are the table's; its topic too),
    # in batches of 5 rows: the findings of `check`, nothing blind.
    _, table = load_data(topology, with_table=True)
    assert table is not None
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for start in range(0, table.height, 5):
        publication = Publication(None, "add", f"table-{start}", dt.datetime.now(dt.UTC), table.slice(start, 5))
        value, headers = encode_publication(publication, "json" if start else "arrow")
        producer.send(table_topic(topology), value=value, headers=headers)
    producer.flush()
    producer.close()
    until(lambda: _status(kafka_bootstrap, path) == (expected, {}), "check's findings, complete", workers[-1])
    samples = workers[-1].metrics()
    for check in CHECKS:
        assert samples[f'streamdetect_inputs_missing{{check="{check}",input="table"}}'] == 0
    found = _streamdetect("findings", str(path), *bootstrap, "--json")
    assert found.returncode == 1, found.stderr
    report = json.loads(found.stdout)
    assert "incomplete" not in report
    assert {f["id"] for f in report["findings"]} == expected


def test_a_worker_that_has_seen_no_table_never_reports_clean(
    kafka_bootstrap: str, tmp_path: Path, workers: list[Worker]
) -> None:
    """SIND only, nothing published: the worker says at its start that it is blind; `findings` exits 4."""
    path = _topology(tmp_path, "table-none", "  sind: {k: 2}\n")
    create_topics(load_topology(path), kafka_bootstrap)
    workers.append(Worker(path, kafka_bootstrap, tmp_path))
    until(lambda: "sind" in _status(kafka_bootstrap, path)[1], "the missing table reported", workers[-1])
    found = _streamdetect("findings", str(path), "--bootstrap-servers", kafka_bootstrap)
    assert found.returncode == 4, found.stdout + found.stderr
    assert "no disclosure found" in found.stdout
    assert "INCOMPLETE" in found.stdout
    assert "no row of the private table has arrived" in found.stdout
    assert workers[-1].metrics()['streamdetect_inputs_missing{check="sind",input="table"}'] == 1
    assert "[WARNING] the sind check(s) are incomplete" in workers[-1].output()
    # `publish` sends the table when a configured check reads it: then the findings of `check`.
    sent = _streamdetect("publish", str(path), "--bootstrap-servers", kafka_bootstrap, "--batch-rows", "5")
    assert sent.returncode == 0, sent.stderr
    assert "(table): 12 rows in 3 records" in sent.stderr
    expected = {f.id for f in streamdetect.check(load_topology(path)).findings}
    assert expected
    until(lambda: _status(kafka_bootstrap, path) == (expected, {}), "check's findings, complete", workers[-1])
    assert workers[-1].metrics()['streamdetect_inputs_missing{check="sind",input="table"}'] == 0
