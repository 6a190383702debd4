"""The two stages of a worker that shares its work, without Kafka: routing, units, handover, refusals."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

import streamdetect
from streamdetect.errors import StateError
from streamdetect.io.sources import load_views
from streamdetect.partitioning import plan
from streamdetect.stream.events import open_findings
from streamdetect.stream.metrics import WorkerMetrics
from streamdetect.stream.records import HEADER_VIEW, Publication, encode_publication
from streamdetect.stream.routing import HEADER_MARKER, HEADER_SOURCE, Router, Units
from streamdetect.stream.state_log import Source

ROOT = Path(__file__).resolve().parents[2]
WHEN = dt.datetime(2026, 11, 26, tzinfo=dt.UTC)


def _record(view: str, rows: pl.DataFrame, batch: str, op: str = "add") -> tuple[bytes, list[tuple[str, bytes]]]:
    return encode_publication(Publication(view, op, batch, WHEN, rows))  # type: ignore[arg-type]


class _Group:
    """Workers of one group, each holding some partitions; the table is shared, as its changelog is."""

    def __init__(self, partitions: int, path: Path = ROOT / "topologies" / "dou-patients.yaml") -> None:
        self.topology = streamdetect.load_topology(path)
        self.plan = plan(self.topology, partitions)
        self.table: dict[str, bytes] = {}
        self.events: list[bytes] = []
        self.router = Router(self.plan)
        self.units = Units(self.plan, lambda prefix: {k: v for k, v in self.table.items() if k.startswith(prefix)})

    def send(self, view: str, rows: pl.DataFrame, batch: str, op: str = "add") -> list[str]:
        """Route a record and fold it; the dead-letter reasons."""
        value, headers = _record(view, rows, batch, op)
        routed = self.router.handle(value, [h for h in headers if h[0] != HEADER_VIEW], view)  # topic tells
        if routed.dead is not None:
            return [routed.dead.reason]
        reasons = []
        for partition, body, named in routed.records:
            outcome = self.units.handle(body, named, partition)
            if outcome.dead is not None:
                reasons.append(outcome.dead.reason)
                continue
            self.table.update(outcome.written())
            self.events += [event for _, event in outcome.events]
        return reasons


@pytest.mark.parametrize("partitions", [2, 3])
def test_table1_row_by_row_through_two_stages_gives_the_findings_of_check(partitions: int) -> None:
    group = _Group(partitions)
    views = load_views(group.topology)
    for name, frame in views.items():
        for position in range(frame.height):
            assert group.send(name, frame.slice(position, 1), f"{name}-{position}") == []
    expected = {f.id for f in streamdetect.check(group.topology).findings}
    assert set(open_findings(group.events)) == expected
    assert {unit.name for unit in group.units.services} == {unit.name for unit in group.plan.units()}

    # Kafka moves partition 0 to another worker and back: its units are rebuilt from the table.
    group.units.revoke([0])
    assert all(group.plan.partition_of(unit) != 0 for unit in group.units.services)
    position = views["v2"].get_column("Name").to_list().index("Dan")
    dan = views["v2"].slice(position, 1)
    assert group.send("v2", dan, f"v2-{position}") == []  # a replay: changes nothing
    assert set(open_findings(group.events)) == expected
    assert group.send("v2", dan, "withdraw-dan", op="retract") == []
    assert len(set(open_findings(group.events))) == len(expected) - 1


def _open_gauge(metrics: WorkerMetrics) -> float:
    return sum(
        sample.value
        for family in metrics.registry.collect()
        if family.name == "streamdetect_open_findings"
        for sample in family.samples
    )


def test_the_open_findings_gauge_follows_the_units_a_worker_holds() -> None:
    """A worker that restores units from the table counts their open findings in the gauge (raised before,
    by another worker: not counted as raised), a withdrawal then clears one, and partitions given away
    leave the gauge with the findings of the units still held."""
    group = _Group(2)
    views = load_views(group.topology)
    for name, frame in views.items():
        for position in range(frame.height):
            assert group.send(name, frame.slice(position, 1), f"{name}-{position}") == []
    expected = {f.id for f in streamdetect.check(group.topology).findings}

    metrics = WorkerMetrics()
    taken = Units(group.plan, lambda prefix: {k: v for k, v in group.table.items() if k.startswith(prefix)})
    taken.on_restored, taken.on_revoked = metrics.reopened, metrics.reset_open
    group.units = taken  # the next worker: every unit restored from the table as its records come
    for partition in range(group.plan.partitions):
        taken.announce(partition)
    assert _open_gauge(metrics) == len(expected)
    assert metrics.registry.get_sample_value("streamdetect_findings_raised_total", {"check": "linkage"}) in (None, 0)

    position = views["v2"].get_column("Name").to_list().index("Dan")
    for partition, body, named in group.router.handle(
        *_record("v2", views["v2"].slice(position, 1), "gone", "retract"), "v2"
    ).records:
        outcome = taken.handle(body, named, partition)
        metrics.findings(outcome.raised, outcome.cleared, WHEN)
    assert _open_gauge(metrics) == len(expected) - 1

    held = [finding for service in taken.services.values() for finding in service.detector.findings()]
    taken.revoke([0])
    left = [finding for service in taken.services.values() for finding in service.detector.findings()]
    assert len(left) < len(held)
    assert _open_gauge(metrics) == len(left)
    taken.revoke(range(group.plan.partitions))
    assert _open_gauge(metrics) == 0


@pytest.mark.parametrize(
    ("topology", "partitions", "checks"),
    [("yao-figure2.yaml", 3, {"linkage", "k-anonymity"}), ("dou-patients.yaml", 1, {"linkage"})],
    ids=["a-unit-per-partition", "two-identifiers-in-one-partition"],
)
def test_the_time_in_each_check_is_counted_per_check_with_its_units_together(
    topology: str, partitions: int, checks: set[str]
) -> None:
    """A routed record's outcome carries the seconds each check took in the units that folded it, a check's
    units in one partition added together, and the worker's counter takes them per check."""
    group = _Group(partitions, ROOT / "topologies" / topology)
    metrics = WorkerMetrics()
    views = load_views(group.topology)
    spent: dict[str, float] = {}
    for name, frame in views.items():
        value, headers = _record(name, frame, f"{name}-all")
        routed = group.router.handle(value, [h for h in headers if h[0] != HEADER_VIEW], name)
        for partition, body, named in routed.records:
            timed = {unit: id(service.detector.check_seconds) for unit, service in group.units.services.items()}
            outcome = group.units.handle(body, named, partition)
            metrics.folded(outcome, 0.0)
            # The units that folded the record timed it anew: their checks' seconds, added up.
            expected: dict[str, float] = {}
            for unit, service in group.units.services.items():
                if timed.get(unit) != id(service.detector.check_seconds):
                    for check, seconds in service.detector.check_seconds.items():
                        expected[check] = expected.get(check, 0.0) + seconds
            assert outcome.check_seconds == pytest.approx(expected)
            for check, seconds in outcome.check_seconds.items():
                spent[check] = spent.get(check, 0.0) + seconds
    assert set(spent) == set(group.plan.checks) == checks
    for check, seconds in spent.items():
        assert seconds > 0
        counted = metrics.registry.get_sample_value("streamdetect_check_seconds_total", {"check": check})
        assert counted == pytest.approx(seconds)


def test_a_refused_batch_changes_no_unit() -> None:
    group = _Group(3)  # buckets: SSN's two buckets differ on v1, Name's units see v1 whole
    views = load_views(group.topology)
    assert group.send("v1", views["v1"], "v1-all") == []
    before = dict(group.table)
    withdrawn = pl.concat([views["v1"].head(1), views["v1"].head(1)])  # one occurrence published, two withdrawn
    reasons = group.send("v1", withdrawn, "too-many", op="retract")
    assert set(reasons) == {"refused"}
    assert group.table == before
    assert group.send("v1", views["v1"].head(1), "one", op="retract") == []  # the units agree it is there


def test_unreadable_records_are_dead_letters_of_the_router_once() -> None:
    group = _Group(2)
    _, headers = _record("v1", pl.DataFrame(), "x")
    assert group.router.handle(b"not arrow", headers, None).dead is not None
    assert group.router.handle(b"not arrow", headers, None).records == []


def test_a_table_written_under_another_partition_count_is_refused() -> None:
    two = _Group(2)
    views = load_views(two.topology)
    assert two.send("v1", views["v1"], "v1-all") == []
    four = _Group(4)  # four partitions: two buckets per identifier, and another placement
    four.table = dict(two.table)
    with pytest.raises(StateError, match="partition count"):
        four.units.service(four.plan.units()[0])


def test_a_table_of_the_first_layout_of_whole_checks_is_refused() -> None:
    """A state table from a worker that kept the whole-state checks in one unit ("*"): the units of their
    own would start empty and miss every row before, so the worker refuses it and says what to do."""
    group = _Group(2, ROOT / "topologies" / "sind-figure2.yaml")
    group.table = {"*/record/0.0": b"\x00"}
    with pytest.raises(StateError, match="earlier version"):
        group.units.service(group.plan.units()[0])
    fresh = _Group(2, ROOT / "topologies" / "sind-figure2.yaml")
    fresh.table = {"#sind/record/0.0": b"\x00", "other": b""}
    fresh.units._refuse_stale()  # its own keys, and keys of no unit outside the first layout's prefix


def test_units_know_the_next_route_offset_across_a_handover() -> None:
    """A unit's state keeps the offset of the last route record it folded: a worker taking the
    partition over knows which offset comes next, so a record the consumer skipped shows as a jump."""
    group = _Group(2)
    views = load_views(group.topology)
    assert group.units.next_offset(0) is None  # nothing folded: no offset known
    offsets = {0: 0, 1: 0}
    for name, frame in views.items():
        value, headers = _record(name, frame, f"{name}-all")
        routed = group.router.handle(value, [h for h in headers if h[0] != HEADER_VIEW], name)
        for partition, body, named in routed.records:
            outcome = group.units.handle(body, named, partition, offsets[partition])
            group.table.update(outcome.written())
            offsets[partition] += 1
    for partition in (0, 1):
        assert group.units.next_offset(partition) == offsets[partition]
    group.units.revoke([0, 1])  # another worker: rebuilt from the table alone
    assert Units(group.plan, group.units.entries).next_offset(0) == offsets[0]


def test_units_see_a_jump_in_a_view_topics_offsets_across_a_handover() -> None:
    """Every routed record names where stage one read it; a unit's state keeps, per view topic
    partition, the offset after the last it folded. A view record stage one's consumer skipped (never
    routed) then shows as a jump, on the worker that holds the partition and on one taking it over; a
    dead-lettered view record is routed as a marker, so it is no jump."""
    group = _Group(2)
    views = load_views(group.topology)
    topic = "streamdetect.dou-patients.view.v2"
    rows = views["v2"]
    routed_at: list[int] = []
    for offset in (0, 1, 2, 4):  # offset 3: never routed
        source = Source(topic, 1, offset)
        if offset == 2:  # not a publication: a dead letter, routed as markers
            routed = group.router.handle(b"not arrow", [], "v2", source)
            assert routed.dead is not None
            assert {p for p, _, _ in routed.records} == {0, 1}
            assert all(body == b"" and dict(named)[HEADER_MARKER] for _, body, named in routed.records)
        else:
            value, headers = _record("v2", rows.slice(offset, 1), f"v2-{offset}")
            routed = group.router.handle(value, [h for h in headers if h[0] != HEADER_VIEW], "v2", source)
            assert all(dict(named)[HEADER_SOURCE] == source.encode() for _, _, named in routed.records)
        for partition, body, named in routed.records:
            if partition == 0:
                assert group.units.source_gap(0, source) == ((3, 4) if offset == 4 else None)
                routed_at.append(offset)
            outcome = group.units.handle(body, named, partition)
            assert (outcome.publication is None) == (offset == 2)  # a marker folds nothing
            group.table.update(outcome.written())
    assert routed_at == [0, 1, 2, 4]
    assert group.units.next_source_offsets(0) == {f"{topic}:1": 5}
    assert group.units.source_gap(0, Source(topic, 1, 5)) is None
    assert group.units.source_gap(0, Source(topic, 1, 3)) is None  # behind: a record routed again
    assert group.units.source_gap(0, Source(topic, 0, 7)) is None  # nothing known of partition 0 yet
    # Another worker, rebuilt from the table alone: the offsets are kept with the state (a marker's or a
    # replay's with the next fold).
    taken = Units(group.plan, group.units.entries)
    assert taken.source_gap(0, Source(topic, 1, 7)) == (5, 7)
    assert taken.next_source_offsets(0) == {f"{topic}:1": 5}
