"""Time windows (streamdetect/windowing.py) against a reference written from their definition.

A stream of timed records (additions and withdrawals, times out of order, some records late) is folded
into a Detector whose topology has a window. The reference keeps every published occurrence with its
time, lets those with ``time <= now - window`` go, takes a withdrawn row's oldest present occurrence, and
runs a Detector without window on what is present: after every record both must report the same
findings. Replicas rebuilt from the pieces and from a snapshot agree; the units of a split plan, each
given every record's time, agree with one Detector; the final findings do not depend on the order in
which additions arrive.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamdetect.detector import Detector
from streamdetect.errors import TopologyError
from streamdetect.model.batch import Batch
from streamdetect.model.topology import CheckConfig, TableSchema, Topology, ViewDefinition
from streamdetect.partitioning import plan
from tests.property.test_linkage_reference import publications

Record = tuple[str, str, float, list[dict[str, Any]]]  # op, view, time, rows


def _topology(publication: dict[str, Any], window: float | None) -> Topology:
    table = TableSchema("T", publication["attributes"], publication["identifiers"], publication["sensitive"])
    views = tuple(ViewDefinition(name, schema) for name, schema in publication["views"].items())
    return Topology("random", table, views, (CheckConfig("linkage", publication["k"]),), window=window)


def _frame(schema: tuple[str, ...], rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=dict.fromkeys(schema, pl.Int64))


def _records(publication: dict[str, Any], rng: random.Random) -> list[Record]:
    """Each view's rows in records of 1-3 rows at times 0-30 (out of order now and then), with
    withdrawals of rows published earlier in the stream (some already out of the window)."""
    records: list[Record] = []
    published: list[tuple[str, dict[str, Any]]] = []
    pending = [(view, row) for view, rows in publication["rows"].items() for row in rows]
    rng.shuffle(pending)
    clock = 0.0
    while pending:
        clock += rng.choice([0, 0, 1, 2, 5])
        time = max(clock - rng.choice([0, 0, 0, 3, 8]), 0.0)  # some records arrive late
        if published and rng.random() < 0.25:
            view, _ = rng.choice(published)
            chosen = [row for name, row in published if name == view][: rng.randint(1, 2)]
            records.append(("retract", view, time, chosen))
            continue
        view = pending[-1][0]
        take = [row for name, row in pending if name == view][: rng.randint(1, 3)]
        for row in take:
            pending.remove((view, row))
            published.append((view, row))
        records.append(("add", view, time, take))
    return records


def _batch(publication: dict[str, Any], record: Record) -> Batch:
    op, view, time, rows = record
    frame = _frame(publication["views"][view], rows)
    return Batch(retracted={view: frame}, published=time) if op == "retract" else Batch({view: frame}, published=time)


class Reference:
    """The window's definition, occurrence by occurrence."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.now: float | None = None
        self.present: list[tuple[float, int, str, tuple[Any, ...]]] = []  # time, arrival, view, row
        self.arrivals = 0

    def fold(self, publication: dict[str, Any], record: Record) -> None:
        op, view, time, rows = record
        self.now = time if self.now is None else max(self.now, time)
        horizon = self.now - self.window
        self.present = [item for item in self.present if item[0] > horizon]
        schema = publication["views"][view]
        for row in rows:
            values = tuple(row[a] for a in schema)
            if op == "add":
                if time > horizon:
                    self.present.append((time, self.arrivals, view, values))
                    self.arrivals += 1
                continue
            same = sorted(item for item in self.present if item[2] == view and item[3] == values)
            if same:
                self.present.remove(same[0])

    def findings(self, publication: dict[str, Any]) -> list[str]:
        detector = Detector(_topology(publication, None))
        views = {}
        for name, schema in publication["views"].items():
            rows = [dict(zip(schema, item[3], strict=True)) for item in self.present if item[2] == name]
            if rows:
                views[name] = _frame(schema, rows)
        if views:
            detector.update(Batch(views))
        return sorted(f.id for f in detector.findings())


def _ids(detector: Detector) -> list[str]:
    return sorted(f.id for f in detector.findings())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    publication=publications(),
    window=st.sampled_from([1.0, 3.0, 10.0]),
    rng=st.randoms(use_true_random=False),
)
def test_a_windowed_detector_reports_what_is_present_by_the_definition(
    publication: dict[str, Any], window: float, rng: random.Random
) -> None:
    records = _records(publication, rng)
    windowed = Detector(_topology(publication, window))
    replica = Detector(_topology(publication, window))
    reference = Reference(window)
    open_ids: set[str] = set()
    for record in records:
        delta = windowed.update(_batch(publication, record))
        open_ids -= {f.id for f in delta.cleared}
        open_ids |= {f.id for f in delta.raised}
        reference.fold(publication, record)
        assert _ids(windowed) == reference.findings(publication), record
        assert sorted(open_ids) == _ids(windowed)  # the deltas tell the same story
        replica.apply_changes(windowed.changes())
    assert _ids(replica) == _ids(windowed)
    restored = Detector(_topology(publication, window))
    restored.restore(windowed.snapshot())
    assert _ids(restored) == _ids(windowed)
    # Both go on as the original does.
    later = ("add", next(iter(publication["views"])), (reference.now or 0) + window, [])
    for detector in (windowed, replica, restored):
        detector.update(_batch(publication, later))
    assert _ids(replica) == _ids(windowed) == _ids(restored)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    publication=publications(),
    window=st.sampled_from([2.0, 6.0]),
    partitions=st.integers(2, 4),
    rng=st.randoms(use_true_random=False),
)
def test_units_given_every_records_time_agree_with_one_windowed_detector(
    publication: dict[str, Any], window: float, partitions: int, rng: random.Random
) -> None:
    topology = _topology(publication, window)
    split = plan(topology, partitions)
    units = {unit: split.detector(unit) for unit in split.units()}
    one = Detector(topology)
    for record in _records(publication, rng):
        batch = _batch(publication, record)
        one.update(batch)
        view, rows = next(iter({**batch.views, **batch.retracted}.items()))
        for unit, detector in units.items():
            share = split.rows_for(unit, view, rows)  # possibly none: the record still moves time on
            kind = "retracted" if batch.retracted else "views"
            detector.update(dataclasses.replace(batch, **{kind: {view: share}}))
        assert sorted(f.id for d in units.values() for f in d.findings()) == _ids(one)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(publication=publications(), window=st.sampled_from([2.0, 6.0]), rng=st.randoms(use_true_random=False))
def test_the_final_findings_do_not_depend_on_the_order_additions_arrive_in(
    publication: dict[str, Any], window: float, rng: random.Random
) -> None:
    additions = [record for record in _records(publication, rng) if record[0] == "add"]
    shuffled = list(additions)
    rng.shuffle(shuffled)
    ends = []
    for order in (additions, shuffled):
        detector = Detector(_topology(publication, window))
        for record in order:
            detector.update(_batch(publication, record))
        ends.append(_ids(detector))
    assert ends[0] == ends[1]


def test_a_window_refuses_checks_that_cannot_withdraw_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every check shipped takes withdrawn rows; one registered later might not.
    table = TableSchema("T", ("A", "B"), ("A",), ("B",))
    topology = Topology("t", table, (ViewDefinition("v", ("A", "B")),), (CheckConfig("linkage", 2),), window=60.0)
    check = type(Detector(topology).checks["linkage"])
    monkeypatch.setattr(check, "properties", dataclasses.replace(check.properties, retractions=False))
    with pytest.raises(TopologyError, match="window: a window withdraws the rows that leave it, and the linkage"):
        Detector(topology)


def test_a_late_record_adds_nothing_and_an_expired_withdrawal_is_ignored() -> None:
    table = TableSchema("T", ("Name", "Job", "Disease"), ("Name",), ("Disease",))
    views = (ViewDefinition("v1", ("Name", "Job")), ViewDefinition("v2", ("Job", "Disease")))
    detector = Detector(Topology("t", table, views, (CheckConfig("linkage", 2),), window=10.0))
    dan = pl.DataFrame({"Name": ["Dan"], "Job": ["Dancer"]})
    flu = pl.DataFrame({"Job": ["Dancer"], "Disease": ["Flu"]})
    assert detector.update(Batch({"v1": dan}, published=100.0)).raised == ()
    raised = detector.update(Batch({"v2": flu}, published=105.0)).raised
    assert [(f.identifier_value, f.sensitive_values) for f in raised] == [("Dan", ("Flu",))]
    cleared = detector.update(Batch({"v2": flu.clear()}, published=110.0)).cleared  # Dan's row leaves
    assert [f.identifier_value for f in cleared] == ["Dan"]
    assert detector.update(Batch({"v1": dan}, published=99.0)).raised == ()  # late: outside already
    assert detector.update(Batch(retracted={"v1": dan}, published=111.0)).cleared == ()  # gone: ignored
    assert detector.findings() == []
