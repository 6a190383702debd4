"""The recomputed k-anonymity methods behind initialize/update/result: batches, merges and bytes."""

from __future__ import annotations

from pathlib import Path

import streamdetect
from streamdetect.checks.k_anonymity.adapter import KAnonymity
from streamdetect.checks.k_anonymity.methods import k_anonymity_check
from streamdetect.checks.k_anonymity.recomputed import RecomputedCheck, RowsState
from streamdetect.checks.k_anonymity.selection_covers import SelectionCoverCheck
from streamdetect.io.sources import load_data

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
