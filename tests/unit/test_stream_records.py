"""Kafka records of published views: encoded and read back, and every unreadable kind dead-lettered."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest
import yaml

from streamdetect.errors import TopologyError
from streamdetect.io.sources import load_views
from streamdetect.io.topology_file import load_topology
from streamdetect.model.topology import Topology
from streamdetect.stream.records import (
    HEADER_BATCH,
    HEADER_CONTENT,
    HEADER_OP,
    HEADER_PUBLISHED,
    HEADER_VIEW,
    DeadLetter,
    Publication,
    decode_record,
    encode_publication,
)
from streamdetect.stream.topics import dead_letter_topic, findings_topic, view_topic

ROOT = Path(__file__).resolve().parents[2]


def parse_topology(raw: dict[str, object], directory: Path) -> Topology:
    """The topology of a YAML document, as loading its file gives it."""
    path = directory / "t.yaml"
    path.write_text(yaml.safe_dump({**raw, "checks": {"linkage": {"k": 2}}}))
    return load_topology(path)


WHEN = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def table1() -> tuple[object, dict[str, pl.DataFrame]]:
    topology = load_topology(ROOT / "topologies" / "dou-patients.yaml")
    return topology, load_views(topology)


@pytest.mark.parametrize("form", ["arrow", "json"])
def test_a_publication_reads_back_as_published(table1: tuple[object, dict[str, pl.DataFrame]], form: str) -> None:
    topology, views = table1
    for name, rows in views.items():
        value, headers = encode_publication(Publication(name, "add", f"b-{name}", WHEN, rows), form)
        read = decode_record(topology, value, headers)
        assert isinstance(read, Publication), read
        assert (read.view, read.op, read.batch_id, read.published) == (name, "add", f"b-{name}", WHEN)
        assert read.rows.equals(rows)  # same values, same types (SSN '387-399' stays text)


def _typed_topology(directory: Path, where: str | None = None) -> Topology:
    view = {"name": "v", "attributes": ["Id", "Age", "Born", "Disease"]}
    if where is not None:
        view["where"] = where
    return parse_topology(
        {
            "name": "records",
            "table": {
                "name": "T",
                "attributes": {"Id": "str", "Age": "int", "Born": "date", "Disease": "str"},
                "identifiers": ["Id"],
                "sensitive": ["Disease"],
            },
            "views": [{**view, "source": "unused.csv"}],
        },
        directory,
    )


def _json(lines: list[str], **headers: str) -> tuple[bytes, list[tuple[str, bytes]]]:
    base = {
        HEADER_VIEW: "v",
        HEADER_OP: "add",
        HEADER_BATCH: "b1",
        HEADER_PUBLISHED: WHEN.isoformat(),
        HEADER_CONTENT: "application/x-ndjson",
    }
    base.update(headers)
    return "\n".join(lines).encode(), [(key, value.encode()) for key, value in base.items()]


GOOD = '{"Id": "a", "Age": 40, "Born": "1986-01-02", "Disease": "Flu"}'


def test_json_lines_take_the_declared_types(tmp_path: Path) -> None:
    value, headers = _json([GOOD, '{"Id": "b", "Age": null, "Born": null, "Disease": "HD"}'], **{HEADER_OP: "retract"})
    read = decode_record(_typed_topology(tmp_path), value, headers)
    assert isinstance(read, Publication)
    assert read.op == "retract"
    assert read.rows.schema == {"Id": pl.String, "Age": pl.Int64, "Born": pl.Date, "Disease": pl.String}
    assert read.rows.row(0) == ("a", 40, dt.date(1986, 1, 2), "Flu")


@pytest.mark.parametrize(
    ("lines", "headers", "reason", "mentions"),
    [
        (["{not json"], {}, "not_json", "line 1"),
        (['["a", 1]'], {}, "not_json", "line 1"),
        (['{"Id": "a", "Age": 1, "Born": "1986-01-02"}'], {}, "missing_attribute", "'Disease'"),
        ([GOOD.replace("}", ', "Name": "Dan"}')], {}, "unknown_attribute", "'Name'"),
        ([GOOD.replace('"Age": 40', '"Age": "forty"')], {}, "wrong_type", "'Age'"),
        ([GOOD.replace('"Age": 40', '"Age": 40.5')], {}, "wrong_type", "'Age'"),
        ([GOOD.replace("1986-01-02", "02/01/1986")], {}, "wrong_type", "'Born'"),
        ([GOOD.replace('"Age": 40', '"Age": true')], {}, "wrong_type", "'Age'"),
        ([GOOD], {HEADER_VIEW: "nope"}, "unknown_view", HEADER_VIEW),
        ([GOOD], {HEADER_OP: "upsert"}, "bad_header", HEADER_OP),
        ([GOOD], {HEADER_PUBLISHED: "yesterday"}, "bad_header", HEADER_PUBLISHED),
        ([GOOD], {HEADER_PUBLISHED: "2026-11-26T12:00:00"}, "bad_header", "UTC offset"),
        ([GOOD], {HEADER_BATCH: ""}, "bad_header", HEADER_BATCH),
        ([GOOD], {HEADER_CONTENT: "text/csv"}, "bad_header", HEADER_CONTENT),
        ([GOOD], {HEADER_CONTENT: "application/vnd.apache.arrow.stream"}, "not_arrow", "Arrow"),
    ],
)
def test_unreadable_records_are_dead_lettered_with_a_reason_and_no_value(
    lines: list[str], headers: dict[str, str], reason: str, mentions: str, tmp_path: Path
) -> None:
    value, encoded = _json(lines, **headers)
    read = decode_record(_typed_topology(tmp_path), value, encoded)
    assert isinstance(read, DeadLetter)
    assert read.reason == reason
    assert mentions in read.detail
    for secret in ("Flu", "Dan", "forty", "02/01/1986", "nope", "upsert", "yesterday", "text/csv"):
        assert secret not in read.detail


def test_rows_outside_the_views_selection_are_dead_lettered(tmp_path: Path) -> None:
    value, headers = _json([GOOD, GOOD.replace('"Age": 40', '"Age": 12')])
    read = decode_record(_typed_topology(tmp_path, "Age >= 18"), value, headers)
    assert read == DeadLetter("violates_where", "row(s) 2 do not satisfy the where of view 'v'")


def test_a_record_over_the_size_limit_is_dead_lettered_unread(tmp_path: Path) -> None:
    value, headers = _json([GOOD] * 50)
    read = decode_record(_typed_topology(tmp_path), value, headers, max_bytes=100)
    assert isinstance(read, DeadLetter)
    assert read.reason == "too_large"


def test_an_arrow_batch_of_another_type_is_dead_lettered(tmp_path: Path) -> None:
    rows = pl.DataFrame({"Id": ["a"], "Age": ["40"], "Born": [dt.date(1986, 1, 2)], "Disease": ["Flu"]})
    value, headers = encode_publication(Publication("v", "add", "b", WHEN, rows))
    read = decode_record(_typed_topology(tmp_path), value, headers)
    assert read == DeadLetter("wrong_type", "attribute 'Age' is String, the table declares Int64")


def test_topics_default_to_the_topology_and_view_names() -> None:
    topology = load_topology(ROOT / "topologies" / "dou-patients.yaml")
    assert view_topic(topology, topology.views[0]) == "streamdetect.dou-patients.view.v1"
    assert findings_topic(topology) == "streamdetect.dou-patients.findings"
    assert dead_letter_topic(topology) == "streamdetect.dou-patients.dead-letters"


def test_a_views_topic_must_be_a_kafka_topic_name(tmp_path: Path) -> None:
    raw = {
        "name": "t",
        "table": {"name": "T", "attributes": ["Id", "D"], "identifiers": ["Id"], "sensitive": ["D"]},
        "views": [{"name": "v", "attributes": ["Id", "D"], "source": "x.csv", "topic": "bad topic!"}],
    }
    with pytest.raises(TopologyError, match=r"views\[0\]\.topic"):
        parse_topology(raw, tmp_path)
    raw["views"][0]["topic"] = "hospital.v"  # type: ignore[index]
    assert parse_topology(raw, tmp_path).views[0].topic == "hospital.v"
