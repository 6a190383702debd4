"""Records folded together in runs (additions and withdrawals of the same view netted in order) leave the
worker where folding them one by one does: the same findings, and the same records refused; so do the
two-stage worker's route records folded together in each partition's units.

Reference: a service handling each record alone. Strategies draw withdrawals of rows the run added before
them, of rows published before the run, of rows never published (refused), views emptied and refilled,
and repeated rows; the k-anonymity check (association covers, recomputed on a withdrawal) and linkage.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import streamdetect
from streamdetect.io.sources import load_views
from streamdetect.partitioning import plan
from streamdetect.stream.events import open_findings
from streamdetect.stream.records import Publication, encode_publication
from streamdetect.stream.routing import Router, Units
from streamdetect.stream.service import DetectorService, Outcome
from streamdetect.stream.state_log import Source

ROOT = Path(__file__).resolve().parents[2]
WHEN = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
TOPOLOGY = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
VIEWS = load_views(TOPOLOGY)


@st.composite
def records(draw: st.DrawFn, prefix: str) -> list[tuple[bytes, list[tuple[str, bytes]], None]]:
    drawn = []
    for number in range(draw(st.integers(1, 10))):
        view = draw(st.sampled_from(sorted(VIEWS)))
        frame = VIEWS[view]
        positions = draw(st.lists(st.integers(0, frame.height - 1), min_size=1, max_size=3))
        op = draw(st.sampled_from(["add", "add", "retract"]))
        rows = frame[positions]
        value, headers = encode_publication(Publication(view, op, f"{prefix}{number}", WHEN, rows))  # type: ignore[arg-type]
        drawn.append((value, headers, None))
    return drawn


@settings(max_examples=150, deadline=None)
@given(first=records("a"), second=records("b"), checks=st.sampled_from([["linkage"], ["linkage", "k-anonymity"]]))
def test_runs_folded_together_equal_records_folded_one_by_one(
    first: list[tuple[bytes, list[tuple[str, bytes]], None]],
    second: list[tuple[bytes, list[tuple[str, bytes]], None]],
    checks: list[str],
) -> None:
    together, alone = DetectorService(TOPOLOGY, checks=checks), DetectorService(TOPOLOGY, checks=checks)
    together.restore({})
    alone.restore({})
    for chunk in (first, second):
        merged = together.handle_many(chunk)
        single = [alone.handle(value, headers, view) for value, headers, view in chunk]
        assert [outcome.dead is not None for outcome in merged] == [outcome.dead is not None for outcome in single]
        assert sorted(f.id for f in together.detector.findings()) == sorted(f.id for f in alone.detector.findings())


class _Stage:
    """Stage two of a worker holding every partition, its table kept as the changelog keeps it."""

    def __init__(self, partitions: int, checks: list[str]) -> None:
        self.plan = plan(TOPOLOGY, partitions, checks)
        self.table: dict[str, bytes] = {}
        self.events: list[bytes | None] = []
        self.units = Units(self.plan, lambda prefix: {k: v for k, v in self.table.items() if k.startswith(prefix)})

    def take(self, outcomes: list[Outcome]) -> list[bool]:
        for outcome in outcomes:
            self.table.update(outcome.written())
            self.events += [event for _, event in outcome.events]
        return [outcome.dead is not None for outcome in outcomes]


@settings(max_examples=100, deadline=None)
@given(
    first=records("a"),
    second=records("b"),
    checks=st.sampled_from([["linkage"], ["linkage", "k-anonymity"]]),
    partitions=st.integers(2, 4),
    rebuilt=st.booleans(),
    poisoned=st.sets(st.integers(0, 9), max_size=3),
)
def test_route_records_folded_together_equal_route_records_folded_one_by_one(
    first: list[tuple[bytes, list[tuple[str, bytes]], None]],
    second: list[tuple[bytes, list[tuple[str, bytes]], None]],
    checks: list[str],
    partitions: int,
    rebuilt: bool,
    poisoned: set[int],
) -> None:
    """The two-stage worker's units folding a partition's route records in runs end where folding them one
    by one does: the same dead letters, open findings, next offsets (view offsets included: the records at
    ``poisoned`` cannot be read and are routed as markers); also across a handover between the two chunks
    (``rebuilt``: every unit rebuilt from the table)."""
    together, alone = _Stage(partitions, checks), _Stage(partitions, checks)
    router = Router(together.plan)
    offsets = dict.fromkeys(range(partitions), 0)
    sources = 0
    for chunk in (first, second):
        routed: dict[int, list[tuple[bytes | None, list[tuple[str, bytes]], int]]] = {}
        for position, (value, headers, _) in enumerate(chunk):
            source = Source("views", 0, sources)
            sources += 1
            if position in poisoned:
                value = b"not arrow"  # noqa: PLW2901 -- a record stage one dead-letters: a marker goes on
            for partition, body, named in router.handle(value, headers, None, source).records:
                routed.setdefault(partition, []).append((body, named, offsets[partition]))
                offsets[partition] += 1
        for partition, records in routed.items():
            merged = together.take(together.units.handle_many(partition, records))
            single = alone.take([alone.units.handle(value, headers, partition, at) for value, headers, at in records])
            assert merged == single
            assert together.units.next_offset(partition) == alone.units.next_offset(partition)
            assert together.units.next_source_offsets(partition) == alone.units.next_source_offsets(partition)
        assert set(open_findings(together.events)) == set(open_findings(alone.events))
        if rebuilt:  # a handover: the units rebuilt from the table know where they stopped
            together.units.revoke(range(partitions))
            alone.units.revoke(range(partitions))
            for partition in range(partitions):
                assert together.units.next_offset(partition) == alone.units.next_offset(partition)
