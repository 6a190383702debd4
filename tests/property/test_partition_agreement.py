"""The work split into units (streamdetect/partitioning.py) finds what one Detector finds.

The streaming worker shares linkage between workers by routing the rows of a view holding identifier E
by the partition of their E value, broadcasting the other views, and running one Detector per (E,
partition) with E as the only identifier; k-anonymity by views runs one Detector per (identifier,
sensitive) pair, every other check one of its own. On random publications (the linkage reference's
strategy: small domains, nulls, empty views, one or two identifiers and sensitive attributes) with
linkage, k-anonymity or both, and on every shipped topology, fed in random batches with withdrawals,
the union of the units' findings after every batch must equal the findings of one Detector given the
same batches, ids included; so must the union of the raised and cleared events.
"""

from __future__ import annotations

import dataclasses
import random
import zlib
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamdetect.detector import Detector
from streamdetect.errors import TopologyError
from streamdetect.io.sources import load_data
from streamdetect.io.topology_file import load_topology
from streamdetect.model.batch import Batch
from streamdetect.model.predicates import Predicate, parse_predicate
from streamdetect.model.topology import CheckConfig, TableSchema, Topology, ViewDefinition
from streamdetect.partitioning import Unit, plan, value_partitions
from tests.property.test_check_conformance import TOPOLOGIES, _pieces, _with_withdrawals
from tests.property.test_linkage_reference import publications


def _agree(topology: Topology, batches: list[Batch], partitions: int) -> None:
    split = plan(topology, partitions)
    units = {unit: split.detector(unit) for unit in split.units()}
    one = Detector(topology)
    live: dict[str, Any] = {}
    for batch in batches:
        one.update(batch)
        for unit, routed in split.split_batch(batch).items():
            delta = units[unit].update(routed)
            for finding in delta.cleared:
                live.pop(finding.id, None)
            for finding in delta.raised:
                live[finding.id] = finding
        expected = sorted(f.id for f in one.findings())
        assert sorted(f.id for detector in units.values() for f in detector.findings()) == expected
        assert sorted(live) == expected


def _topology(publication: dict[str, Any], checks: tuple[str, ...] = ("linkage",)) -> Topology:
    table = TableSchema("T", publication["attributes"], publication["identifiers"], publication["sensitive"])
    views = tuple(ViewDefinition(name, schema) for name, schema in publication["views"].items())
    return Topology("random", table, views, tuple(CheckConfig(name, publication["k"]) for name in checks))


CHECK_SETS = [("linkage",), ("k-anonymity",), ("linkage", "k-anonymity")]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    publication=publications(),
    checks=st.sampled_from(CHECK_SETS),
    partitions=st.integers(2, 8),
    rng=st.randoms(use_true_random=False),
)
def test_units_agree_with_one_detector_on_random_publications(
    publication: dict[str, Any], checks: tuple[str, ...], partitions: int, rng: random.Random
) -> None:
    topology = _topology(publication, checks)
    views = {
        name: pl.DataFrame(rows, schema=dict.fromkeys(publication["views"][name], pl.Int64))
        for name, rows in publication["rows"].items()
        if rows
    }
    batches, _ = _with_withdrawals(_pieces(views, None, rng), rng)
    _agree(topology, batches, partitions)


@pytest.mark.parametrize("path", TOPOLOGIES, ids=[path.stem for path in TOPOLOGIES])
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_units_agree_with_one_detector_on_every_topology(path: Path, rng: random.Random) -> None:
    topology = load_topology(path)
    views, table = load_data(topology, with_table=topology.table.source is not None)
    batches, _ = _with_withdrawals(_pieces(views, table, rng), rng)
    _agree(topology, batches, rng.choice([2, 3]))


def test_value_partitions_are_stable_text_crcs() -> None:
    # Fixed expectations: a change of placement would strand every value's state (module docstring).
    placed = value_partitions(pl.Series(["Dan", "Ann", None, ""]), 7).to_list()
    assert placed == [placed[0], placed[1], placed[3], placed[3]]
    assert placed[:2] == [zlib.crc32(b"Dan") % 7, zlib.crc32(b"Ann") % 7]
    dates = pl.Series(["2020-01-02"]).str.to_date()
    assert value_partitions(dates, 5).to_list() == [zlib.crc32(b"2020-01-02") % 5]
    assert value_partitions(pl.Series([42]), 3).to_list() == [zlib.crc32(b"42") % 3]


def test_sind_splits_by_sensitive_attribute_and_runs_narrowed() -> None:
    topology = load_topology(next(path for path in TOPOLOGIES if path.stem == "sind-figure2"))
    split = plan(topology, 3)
    sind = Unit(check="sind", sensitive="Problem")
    assert split.units() == [sind]
    assert sind.name == "#sind/Problem"
    assert split.topology_of(sind) == (topology, ("sind",))
    assert split.check_plan(sind).checks["sind"].check.examined == ("Problem",)  # type: ignore[attr-defined]
    assert [split.units_in(p) for p in range(3)] == [[sind], [], []]
    assert split.reads_table(sind)
    assert split.stale_prefixes() == ("*/",)


def test_k_anonymity_splits_by_pair_and_each_check_has_its_unit() -> None:
    topology = load_topology(next(path for path in TOPOLOGIES if path.stem == "dou-patients"))
    with_checks = dataclasses.replace(
        topology, checks=(*topology.checks, CheckConfig("k-anonymity", 2), CheckConfig("table-k-anonymity", 2))
    )
    schema = dataclasses.replace(with_checks.table, quasi_identifiers=("DOB", "ZIP"))
    with_checks = dataclasses.replace(with_checks, table=schema)
    assert topology.table.identifiers == ("SSN", "Name")
    assert topology.table.sensitive == ("Disease",)
    pairs = [Unit(e, check="k-anonymity", sensitive="Disease") for e in ("SSN", "Name")]
    whole = Unit(check="table-k-anonymity")
    four = plan(with_checks, 4)
    assert four.buckets == 1  # three other units leave one partition for the two identifiers
    assert four.units() == [Unit("SSN"), Unit("Name"), *pairs, whole]
    assert [four.units_in(p) for p in range(4)] == [[Unit("SSN"), whole], [Unit("Name")], [pairs[0]], [pairs[1]]]
    pair_topology, checks = four.topology_of(pairs[1])
    assert checks == ("k-anonymity",)
    assert (pair_topology.table.identifiers, pair_topology.table.sensitive) == (("Name",), ("Disease",))
    assert pairs[1].name == "#k-anonymity/Name/Disease"
    assert [four.reads_table(unit) for unit in four.units()] == [False, False, False, False, True]
    seven = plan(with_checks, 7)
    assert seven.buckets == 2  # four partitions free: two buckets per identifier
    assert len(seven.units()) == 7
    assert {seven.partition_of(unit) for unit in seven.units()} == set(range(7))
    assert plan(topology, 3).stale_prefixes() == ()  # linkage alone: the layout it always had


def test_units_whose_state_keys_would_overlap_are_refused() -> None:
    topology = load_topology(next(path for path in TOPOLOGIES if path.stem == "sind-figure2"))
    table = dataclasses.replace(topology.table, identifiers=("#sind/Problem",))
    clash = dataclasses.replace(topology, table=table, checks=(*topology.checks, CheckConfig("linkage", 2)))
    with pytest.raises(TopologyError, match="share state keys"):
        plan(clash, 2)


def test_identifiers_first_then_value_buckets_fill_the_partitions() -> None:
    topology = load_topology(next(path for path in TOPOLOGIES if path.stem == "dou-patients"))
    assert topology.table.identifiers == ("SSN", "Name")
    two = plan(topology, 2)
    assert two.buckets == 1
    assert [two.units_in(p) for p in range(2)] == [[Unit("SSN")], [Unit("Name")]]
    three = plan(topology, 3)  # two buckets per identifier, four units over three partitions
    assert three.buckets == 2
    assert [three.units_in(p) for p in range(3)] == [[Unit("SSN"), Unit("Name", 1)], [Unit("SSN", 1)], [Unit("Name")]]
    rows = pl.DataFrame({"SSN": ["387-200", "387-399", "387-486"], "DOB": ["a", "b", "c"]})
    rows = rows.with_columns(Job=pl.lit("Dancer"), Disease=pl.lit("Flu"))
    shares = [three.rows_for(Unit("SSN", b), "v1", rows) for b in range(2)]
    assert sorted(pl.concat(shares).get_column("SSN").to_list()) == rows.get_column("SSN").to_list()
    assert three.rows_for(Unit("Name", 0), "v1", rows).equals(rows)  # v1 lacks Name: every row


@st.composite
def private_tables(draw: st.DrawFn) -> tuple[Topology, pl.DataFrame]:
    """A table over a key (A, B) and two sensitive attributes P and Q (nulls too), one to three views
    projecting one or both of them, some with a selection on a public or a sensitive attribute (SIND's
    conservative case), and SIND, RSIND and the table checks configured (k 2 or 3)."""
    keys = draw(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3)), max_size=14, unique=True))
    values = st.integers(0, 2) | st.none()
    rows = [{"A": a, "B": b, "P": draw(values), "Q": draw(values)} for a, b in keys]
    views = []
    for i in range(draw(st.integers(1, 3))):
        chosen = draw(st.lists(st.sampled_from(["A", "B", "P", "Q"]), min_size=1, max_size=3, unique=True))
        if "P" not in chosen and "Q" not in chosen:
            chosen.append(draw(st.sampled_from(["P", "Q"])))
        where = draw(st.none() | st.sampled_from(["A = 1", "B != 0", "P = 1", "Q IN (0, 2)"]))
        views.append(ViewDefinition(f"v{i}", tuple(a for a in "ABPQ" if a in chosen), where=_parsed(where)))
    k = draw(st.sampled_from([2, 3]))
    table = TableSchema("T", ("A", "B", "P", "Q"), (), ("P", "Q"), quasi_identifiers=("A", "B"), source="t.parquet")
    checks = tuple(CheckConfig(name, k) for name in ("sind", "rsind", "table-k-anonymity", "l-diversity"))
    frame = pl.DataFrame(rows, schema=dict.fromkeys("ABPQ", pl.Int64))
    return Topology("private", table, tuple(views), checks), frame


def _parsed(text: str | None) -> Predicate | None:
    return None if text is None else parse_predicate(text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=private_tables(), partitions=st.integers(2, 6), rng=st.randoms(use_true_random=False))
def test_the_publisher_side_checks_split_by_sensitive_attribute_agree_with_one_detector(
    case: tuple[Topology, pl.DataFrame], partitions: int, rng: random.Random
) -> None:
    """SIND and RSIND narrowed to each sensitive attribute (units of their own), the table checks whole:
    fed the table in random batches, some withdrawing rows (an emptied table too), their findings together
    are one Detector's, ids included."""
    topology, table = case
    split = plan(topology, partitions)
    assert {unit.name for unit in split.units()} >= {"#sind/P", "#sind/Q", "#rsind/P", "#rsind/Q"}
    batches, present = [], table.clear()
    cuts = sorted(rng.sample(range(table.height + 1), k=min(3, table.height + 1)))
    for start, end in zip([0, *cuts], [*cuts, table.height], strict=True):
        withdrawn = None
        if present.height and rng.random() < 0.4:
            withdrawn = present.sample(rng.randint(1, present.height), seed=rng.randrange(1 << 16))
            present = present.join(withdrawn, on=["A", "B"], how="anti")
        added = table.slice(start, end - start)
        present = pl.concat([present, added])
        batches.append(Batch(table=added, retracted_table=withdrawn))
    _agree(topology, batches, partitions)
