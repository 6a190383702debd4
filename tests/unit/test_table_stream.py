"""The private table on the stream, without a broker: its records, the Detector's knowledge of it, the
worker service's status events, the routing of its rows, and what ``findings`` makes of a blind check.

A check that reads the table (SIND here, Figure 4 of Yao, Wang, Wang & Jajodia) and has seen none of it
must say so everywhere a user looks: never read as "no disclosure".
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl
import pytest

from streamdetect.check_plan import table_readers
from streamdetect.detector import NO_TABLE, Detector
from streamdetect.engine import EXIT_INCOMPLETE, Report
from streamdetect.errors import TopologyError
from streamdetect.io.sources import load_data
from streamdetect.io.topology_file import load_topology
from streamdetect.model.batch import Batch
from streamdetect.partitioning import plan
from streamdetect.reporting.document import layout
from streamdetect.reporting.junit import junit_xml
from streamdetect.stream.events import fold_events
from streamdetect.stream.publish import input_topics
from streamdetect.stream.records import (
    HEADER_TABLE,
    TABLE_LABEL,
    Carried,
    DeadLetter,
    Publication,
    decode_record,
    encode_publication,
)
from streamdetect.stream.routing import Router, Units
from streamdetect.stream.service import DetectorService, Outcome
from streamdetect.stream.topics import table_topic

ROOT = Path(__file__).resolve().parents[2]
SIND = ROOT / "topologies" / "sind-figure4.yaml"
NOW = dt.datetime(2026, 11, 28, tzinfo=dt.UTC)


def _table_record(rows: pl.DataFrame, batch: str, op: str = "add") -> tuple[bytes, list[tuple[str, bytes]]]:
    return encode_publication(Publication(None, op, batch, NOW, rows))  # type: ignore[arg-type]


def test_only_a_run_with_a_check_that_reads_the_table_has_its_topic() -> None:
    topology = load_topology(SIND)
    assert table_readers(topology) == ["sind"]
    assert input_topics(topology)[table_topic(topology)] is Carried.TABLE
    dou = load_topology(ROOT / "topologies" / "dou-patients.yaml")
    assert table_readers(dou) == []
    assert Carried.TABLE not in input_topics(dou).values()
    assert table_topic(topology) == "streamdetect.sind-figure4.table"


def test_the_table_topic_can_be_named(tmp_path: Path) -> None:
    text = SIND.read_text().replace(
        "  source: data/sind/", f"  topic: hospital.patients\n  source: {SIND.parent}/data/sind/"
    )
    (tmp_path / "t.yaml").write_text(text.replace("source: data/sind/", f"source: {SIND.parent}/data/sind/"))
    assert table_topic(load_topology(tmp_path / "t.yaml")) == "hospital.patients"
    (tmp_path / "t.yaml").write_text(text.replace("hospital.patients", "no spaces allowed"))
    with pytest.raises(TopologyError, match=r"table\.topic"):
        load_topology(tmp_path / "t.yaml")


def test_a_table_record_reads_back_by_its_header_or_its_topic() -> None:
    topology = load_topology(SIND)
    _, table = load_data(topology, with_table=True)
    assert table is not None
    value, headers = _table_record(table, "b1")
    assert (HEADER_TABLE, b"") in headers
    for carried in (None, Carried.TABLE):
        read = decode_record(topology, value, headers, view=carried)
        assert isinstance(read, Publication)
        assert read.view is None
        assert read.label == TABLE_LABEL
        assert read.rows.equals(table)
    # A publisher that says nothing in its headers: the table's topic tells.
    bare = [(key, raw) for key, raw in headers if key != HEADER_TABLE]
    assert isinstance(decode_record(topology, value, bare, view=Carried.TABLE), Publication)
    assert decode_record(topology, value, bare).reason == "bad_header"  # type: ignore[union-attr]


def test_a_table_record_is_read_as_strictly_as_a_views() -> None:
    topology = load_topology(SIND)
    _, table = load_data(topology, with_table=True)
    assert table is not None
    value, headers = _table_record(table.drop(table.columns[0]), "b1")
    missing = decode_record(topology, value, headers)
    assert isinstance(missing, DeadLetter)
    assert missing.reason == "missing_attribute"
    value, headers = _table_record(table, "b1")
    both = decode_record(topology, value, [*headers, ("streamdetect-view", b"v1")])
    assert isinstance(both, DeadLetter)
    assert both.reason == "bad_header"


def test_the_detector_says_a_check_is_blind_until_a_table_batch_arrives() -> None:
    topology = load_topology(SIND)
    views, table = load_data(topology, with_table=True)
    assert table is not None
    detector = Detector(topology)
    detector.update(Batch(views=views))
    assert detector.findings() == []
    assert set(detector.incomplete()) == {"sind"}
    assert NO_TABLE in detector.incomplete()["sind"]
    # Kept across a restore from a snapshot or from the pieces written.
    pieces = detector.changes()
    detector.update(Batch(table=table.clear()))  # an empty table is a table: seen
    assert detector.incomplete() == {}
    pieces |= detector.changes()
    assert any(key.startswith("inputs/") for key in pieces)
    replica = Detector(topology)
    replica.apply_changes(pieces)
    assert replica.incomplete() == {}
    restored = Detector(topology)
    restored.restore(detector.snapshot())
    assert restored.incomplete() == {}
    detector.update(Batch(table=table))
    assert detector.findings()


def test_a_table_batch_of_other_columns_is_refused() -> None:
    topology = load_topology(SIND)
    _, table = load_data(topology, with_table=True)
    assert table is not None
    with pytest.raises(TopologyError, match="of the table have columns"):
        Detector(topology).update(Batch(table=table.drop(table.columns[0])))


def test_the_service_reports_the_status_once_per_change_and_findings_folds_it() -> None:
    topology = load_topology(SIND)
    views, table = load_data(topology, with_table=True)
    assert table is not None
    service = DetectorService(topology)
    service.restore({})
    stored: dict[str, bytes] = {}  # the worker's state table
    first = service.status(Outcome())
    assert first.incomplete is not None
    assert set(first.incomplete) == {"sind"}
    assert service.status(Outcome()).events == []  # unchanged: nothing new to say
    events = [value for _, value in first.events]
    name = next(iter(views))
    value, headers = encode_publication(Publication(name, "add", "v", NOW, views[name]))
    outcome = service.handle(value, headers, None)
    stored |= outcome.written()
    assert outcome.incomplete is None  # still blind, said already
    events += [value for _, value in outcome.events]
    opened, incomplete = fold_events(events)
    assert opened == {}
    assert set(incomplete) == {"sind"}
    value, headers = _table_record(table, "t")
    outcome = service.handle(value, headers, Carried.TABLE)
    stored |= outcome.written()
    assert outcome.incomplete == {}
    events += [value for _, value in outcome.events]
    opened, incomplete = fold_events(events)
    assert incomplete == {}
    assert opened  # the table's findings, raised by the table's record
    assert [json.loads(v)["event"] for v in events].count("complete") == 1
    # A restarted service knows it has the table, and says so again (folded idempotently).
    again = DetectorService(topology)
    again.restore(stored)
    assert again.status(Outcome()).incomplete == {}


def test_findings_of_a_blind_check_exit_4_and_say_why() -> None:
    topology = load_topology(SIND)
    detector = Detector(topology)
    report = Report(topology.name, tuple(detector.summaries({})), (), incomplete=detector.incomplete())
    assert report.exit_code == EXIT_INCOMPLETE
    assert report.to_dict()["incomplete"] == detector.incomplete()
    verdict = layout(report).summary
    assert "no disclosure found" in verdict
    assert "INCOMPLETE" in verdict
    assert NO_TABLE in verdict
    assert 'type="incomplete"' in junit_xml(report)
    assert Report(topology.name, tuple(detector.summaries({})), ()).exit_code == 0


def test_table_records_go_to_the_unit_that_reads_the_table_only(tmp_path: Path) -> None:
    """Two partitions: linkage's unit in partition 0, SIND's own unit in partition 1; the table's rows
    reach SIND's unit only, and an empty table record reaches it too (the table is seen)."""
    text = SIND.read_text().replace("source: data/", f"source: {SIND.parent}/data/")
    path = tmp_path / "t.yaml"
    path.write_text(text.replace("checks:\n", "checks:\n  linkage: {k: 2}\n"))
    topology = load_topology(path)
    split = plan(topology, 2)
    _, table = load_data(topology, with_table=True)
    assert table is not None
    for rows in (table, table.clear()):
        value, headers = _table_record(rows, f"t{rows.height}")
        routed = Router(split).handle(value, headers, Carried.TABLE)
        units = Units(split, lambda prefix: {})
        folded = {}
        for partition, body, named in routed.records:
            outcome = units.handle(body, named, partition)
            folded[partition] = outcome.publication is not None and not outcome.replayed
        assert folded == {0: False, 1: True}
        whole = next(service for unit, service in units.services.items() if unit.check == "sind")
        assert whole.detector.incomplete() == {}


def test_each_unit_reports_the_table_status_of_its_own_checks_only(tmp_path: Path) -> None:
    """SIND's units and l-diversity's sit in different partitions: a partition whose unit saw the table
    says its checks see it, and leaves the inputs-missing gauge of the other unit's checks as it was."""
    from streamdetect.stream.metrics import WorkerMetrics

    text = SIND.read_text().replace("source: data/", f"source: {SIND.parent}/data/")
    path = tmp_path / "t.yaml"
    path.write_text(text.replace("checks:\n", "checks:\n  l-diversity: {l: 2}\n"))
    topology = load_topology(path)
    split = plan(topology, 2)
    assert [[unit.name for unit in split.units_in(p)] for p in range(2)] == [["#sind/Problem"], ["#l-diversity"]]
    metrics = WorkerMetrics()
    metrics.examined((), ["sind", "l-diversity"])
    units = Units(split, lambda prefix: {})
    announced = units.announce(1)  # l-diversity's unit: no table yet
    assert announced.reporting == ("l-diversity",)
    metrics.status(announced)
    _, table = load_data(topology, with_table=True)
    assert table is not None
    value, headers = _table_record(table, "t1")
    routed = Router(split).handle(value, headers, Carried.TABLE)
    [(partition, body, named)] = [record for record in routed.records if record[0] == 0]
    outcome = units.handle(body, named, partition)
    assert outcome.incomplete == {}
    assert outcome.reporting == ("sind",)
    metrics.status(outcome)
    gauge = {
        check: metrics.registry.get_sample_value("streamdetect_inputs_missing", {"input": "table", "check": check})
        for check in ("sind", "l-diversity")
    }
    assert gauge == {"sind": 0.0, "l-diversity": 1.0}


def test_a_large_class_is_listed_in_part_in_its_events_and_keeps_its_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIND class of many members: its events list the first ones and say how many there are (and fewer
    still over the topic's record limit), under the whole finding's id, which ``findings`` keeps."""
    from streamdetect.checks.findings import SindFinding, finding_from_dict
    from streamdetect.stream import events

    members = tuple((("Zip", f"{n:05d}"), ("Age", n)) for n in range(400))
    finding = SindFinding(2, "Problem", members, ("v1",), "every member can take only one private value")
    publication = Publication("v1", "add", "b", NOW, pl.DataFrame())  # type: ignore[arg-type]
    [(key, value)] = events.finding_events([finding], "raised", publication)
    assert key == finding.id.encode()
    body = fold_events([value])[0][finding.id]
    assert body["truncated"] == {"members": 400}
    assert len(body["members"]) == events.EVENT_MEMBERS
    rebuilt = finding_from_dict(body)
    rebuilt.__dict__["id"] = finding.id  # as `findings` pins it
    assert rebuilt.to_dict()["id"] == finding.id
    # Over the topic's byte limit too: fewer members still.
    monkeypatch.setattr(events, "_EVENT_BODY_BYTES", 2_000)
    [(_, value)] = events.finding_events([finding], "raised", publication)
    assert len(value) < 3_000
    assert 0 < len(fold_events([value])[0][finding.id]["members"]) < events.EVENT_MEMBERS
    small = SindFinding(2, "Problem", members[:3], ("v1",), "class of 3")
    [(_, value)] = events.finding_events([small], "raised", publication)
    assert "truncated" not in fold_events([value])[0][small.id]
