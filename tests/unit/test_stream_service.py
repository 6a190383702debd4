"""The worker's per-record service without Kafka: replays, refusals, restore from the table it writes."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

import streamdetect
from streamdetect.errors import StateError
from streamdetect.io.sources import load_views
from streamdetect.stream.records import Publication, encode_publication
from streamdetect.stream.service import FINGERPRINT_KEY, DetectorService, open_findings, pack_entries

ROOT = Path(__file__).resolve().parents[2]
WHEN = dt.datetime(2026, 11, 26, tzinfo=dt.UTC)


def _record(view: str, rows: pl.DataFrame, batch: str, op: str = "add") -> tuple[bytes, list[tuple[str, bytes]]]:
    return encode_publication(Publication(view, op, batch, WHEN, rows))  # type: ignore[arg-type]


def test_records_one_by_one_give_the_findings_of_check_and_a_table_that_restores_them() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    service = DetectorService(topology)
    service.restore({})
    table: dict[str, bytes] = {}
    events: list[bytes] = []
    for name, frame in views.items():
        for position in range(frame.height):
            outcome = service.handle(*_record(name, frame.slice(position, 1), f"{name}-{position}"), None)
            assert outcome.dead is None
            table.update(outcome.writes)
            events += [value for _, value in outcome.events]
    expected = {f.id for f in streamdetect.check(topology).findings}
    assert set(open_findings(events)) == expected
    assert len(table) == sum(frame.height for frame in views.values())  # one entry per record

    # A replacement rebuilt from the table skips what was folded in and goes on from there.
    again = DetectorService(topology)
    again.restore(table)
    assert {f.id for f in again.detector.findings()} == expected
    replay = again.handle(*_record("v2", views["v2"].head(1), "v2-0"), None)
    assert replay.replayed
    assert replay.writes == {}
    dan = views["v2"].filter(pl.col("Name") == "Dan")
    withdrawn = again.handle(*_record("v2", dan, "withdraw-dan", op="retract"), None)
    assert open_findings([value for _, value in withdrawn.events]) == {}  # the withdrawal only clears
    assert len(open_findings(events + [value for _, value in withdrawn.events])) == len(expected) - 1


def test_a_batch_the_detector_refuses_is_a_dead_letter_and_changes_nothing() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    service = DetectorService(topology)
    service.restore({})
    outcome = service.handle(*_record("v1", views["v1"].head(1), "w", op="retract"), None)
    assert outcome.dead is not None
    assert outcome.dead.reason == "refused"
    assert "387" not in outcome.dead.detail
    assert outcome.writes == {}
    assert service.detector.findings() == []


def test_a_table_written_under_another_threshold_is_refused() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    service = DetectorService(topology, None)
    with pytest.raises(StateError, match="another topology"):
        service.restore({"record/000000000000": pack_entries({FINGERPRINT_KEY: b"not this one"})})


def test_open_findings_fold_raised_and_cleared_events_in_order() -> None:
    def event(kind: str, finding_id: str) -> bytes:
        return f'{{"event": "{kind}", "id": "{finding_id}", "finding": {{"id": "{finding_id}"}}}}'.encode()

    folded = open_findings([event("raised", "a"), event("raised", "b"), event("raised", "a"), event("cleared", "b")])
    assert list(folded) == ["a"]
