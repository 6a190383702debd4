"""The recomputed k-anonymity methods behind initialize/update/result: batches, merges and bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

import streamdetect
from streamdetect.checks.findings import AssociationCoverFinding
from streamdetect.checks.k_anonymity import methods
from streamdetect.checks.k_anonymity.adapter import KAnonymity
from streamdetect.checks.k_anonymity.methods import k_anonymity_check
from streamdetect.checks.k_anonymity.recomputed import RecomputedCheck, RowsState
from streamdetect.checks.k_anonymity.selection_covers import SelectionCoverCheck
from streamdetect.io.sources import load_data
from streamdetect.model.batch import Batch

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


def test_cell_procedure_row_by_row_equals_one_batch() -> None:
    topology = streamdetect.load_topology(TOPOLOGIES / "yao-figure2.yaml")
    views, _ = load_data(topology, with_table=False)
    check = k_anonymity_check(topology)
    assert isinstance(check, RecomputedCheck)
    once = sorted(f.id for f in check.update(check.initialize(), views).raised)
    state = check.initialize()
    live: dict[str, object] = {}
    for name, frame in views.items():
        for i in range(frame.height):
            delta = check.update(state, {name: frame.slice(i, 1)})
            for finding in delta.cleared:
                live.pop(finding.id)
            live.update({finding.id: finding for finding in delta.raised})
    assert sorted(live) == once
    restored = RowsState.from_bytes(state.to_bytes())
    assert sorted(f.id for f in check.result(restored)) == once


def test_conservative_method_keeps_the_table_in_its_state_and_merges() -> None:
    topology = streamdetect.load_topology(TOPOLOGIES / "yao-figure3.yaml")
    assert KAnonymity(topology).properties.needs_table
    views, table = load_data(topology)
    assert table is not None
    check = k_anonymity_check(topology)
    assert isinstance(check, RecomputedCheck)
    once = sorted(f.id for f in check.update(check.initialize(), views, table).raised)
    left, right = check.initialize(), check.initialize()
    check.update(left, {"v1": views["v1"]}, table.head(2))
    check.update(right, {"v2": views["v2"]}, table.tail(table.height - 2))
    check.merge(left, right)
    assert sorted(f.id for f in check.result(left)) == once
    assert not KAnonymity(streamdetect.load_topology(TOPOLOGIES / "yao-section631.yaml")).properties.needs_table


def test_aggregated_cells_equal_enumerated_cells_on_the_paper_figures() -> None:
    """Yao et al.'s figures with selections: aggregating the cells per pattern finds what enumerating
    them finds, and (selections on the views' own attributes) needs no enumeration at all."""
    compared = 0
    for path in sorted(TOPOLOGIES.glob("yao-*.yaml")):
        topology = streamdetect.load_topology(path)
        if all(view.where is None for view in topology.views):
            continue
        views, _ = load_data(topology, with_table=False)
        schema = topology.table
        runs = {
            method: sorted(
                (str(f.identifier_value), f.sensitive_values, f.views)
                for f in SelectionCoverCheck(topology.views, schema.identifiers, schema.sensitive, 2, method).run(views)
            )
            for method in ("enumerate", "aggregate")
        }
        assert runs["aggregate"] == runs["enumerate"], path.name
        compared += 1
    assert compared >= 2


def test_a_selection_on_a_date_ties_the_only_person_born_that_day_to_the_value(tmp_path: Path) -> None:
    """v2 releases (Born, P) for people born after 1970: Ann, the only one born on 1980-05-01, had flu. A date
    once never equalled its ISO literal in the cell procedure, every row failed the selection both ways,
    and the check said no disclosure."""
    (tmp_path / "t.yaml").write_text(
        "table:\n  attributes: {Id: str, Born: date, P: str}\n  identifiers: [Id]\n  sensitive: [P]\n"
        "views:\n  - {name: v1, attributes: [Id, Born], source: v1.csv}\n"
        "  - {name: v2, attributes: [Born, P], where: \"Born > '1970-01-01'\", source: v2.csv}\n"
        "checks:\n  k-anonymity: {k: 2}\n"
    )
    (tmp_path / "v1.csv").write_text("Id,Born\nann,1980-05-01\nbob,1960-02-02\ncid,1960-02-02\n")
    (tmp_path / "v2.csv").write_text("Born,P\n1980-05-01,flu\n")
    topology = streamdetect.load_topology(tmp_path / "t.yaml")
    views, _ = load_data(topology, with_table=False)
    check = KAnonymity.from_topology(topology)
    state = check.initialize()
    check.update(state, Batch(views=views))
    found = [(f.identifier_value, f.sensitive_values, f.views) for f in check.result(state)]
    assert found == [("ann", ("flu",), ("v1", "v2"))]


def test_the_findings_are_found_once_per_change_of_the_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A recomputed method finds its covers once per change of the rows: readers after an update (a worker
    counting its units' open findings after a rebalance) get the update's findings, a restored state finds
    them once, and the next batch's update finds the new ones."""
    topology = streamdetect.load_topology(TOPOLOGIES / "yao-figure2.yaml")
    views, _ = load_data(topology, with_table=False)
    calls: list[int] = []
    covers = methods.RecomputedMethod.covers

    def counted(self: methods.RecomputedMethod, state: RowsState) -> list[AssociationCoverFinding]:
        calls.append(1)
        return covers(self, state)

    monkeypatch.setattr(methods.RecomputedMethod, "covers", counted)
    check = KAnonymity(topology)
    state = check.initialize()
    first = {name: frame.head(frame.height - 1) for name, frame in views.items()}
    check.update(state, Batch(views=first))
    assert len(calls) == 1
    found = check.result(state)
    assert check.result(state) is found
    assert len(calls) == 1
    restored = check.decode(bytes(check.encode(state)))
    assert [f.id for f in check.result(restored)] == [f.id for f in found]
    assert len(calls) == 2
    check.result(restored)
    assert len(calls) == 2
    check.update(restored, Batch(views={name: frame.tail(1) for name, frame in views.items()}))
    assert len(calls) == 3
    fresh = KAnonymity(topology)
    whole = fresh.initialize()
    fresh.update(whole, Batch(views=views))
    assert sorted(f.id for f in check.result(restored)) == sorted(f.id for f in fresh.result(whole))
