"""The recomputed k-anonymity methods behind initialize/update/result: batches, merges and bytes."""

from __future__ import annotations

from pathlib import Path

import streamdetect
from streamdetect.checks.k_anonymity import KAnonymity, k_anonymity_check
from streamdetect.checks.recomputed import RecomputedCheck, RowsState
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
