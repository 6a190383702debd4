"""The SIND paper's examples: Figure 4(c) partition and Figure 2's 2-SIND view."""

from __future__ import annotations

from pathlib import Path

import streamdetect
from streamdetect.checks.indistinguishability.sind import SindCheck
from streamdetect.io.sources import load_data

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"
# (Zip, Age) names t1..t12 of Figure 1.
T = {
    ("22030", 39): "t1", ("22030", 50): "t2", ("22030", 38): "t3", ("22030", 53): "t4",
    ("22031", 28): "t5", ("22031", 37): "t6", ("22031", 49): "t7", ("22031", 52): "t8",
    ("22032", 30): "t9", ("22032", 40): "t10", ("22033", 30): "t11", ("22033", 40): "t12",
}  # fmt: skip


def _partition(name: str) -> list[set[str]]:
    topology = streamdetect.load_topology(TOPOLOGIES / name)
    _, table = load_data(topology)
    assert table is not None
    check = SindCheck.from_topology(topology)
    state = check.initialize()
    check.update(state, table)
    return [{T[(dict(m)["Zip"], dict(m)["Age"])] for m in c.members} for c in check.partition(state, "Problem")]


def test_figure_4c_partition() -> None:
    assert sorted(map(sorted, _partition("sind-figure4.yaml"))) == sorted(
        map(sorted, [{"t1", "t2", "t3"}, {"t4"}, {"t5", "t7", "t9", "t10"}, {"t6"}, {"t8", "t11", "t12"}])
    )


def test_figure_4_violates_2_sind_through_t4_and_t6() -> None:
    report = streamdetect.check(streamdetect.load_topology(TOPOLOGIES / "sind-figure4.yaml"))
    alone = [{T[(dict(m)["Zip"], dict(m)["Age"])] for m in f.members} for f in report.findings]
    assert alone == [{"t4"}, {"t6"}]
    assert all(f.to_dict()["exact"] for f in report.findings)


def test_figure_2_provides_2_sind() -> None:
    assert {frozenset(c) for c in _partition("sind-figure2.yaml")} >= {
        frozenset({"t9", "t10"}),
        frozenset({"t11", "t12"}),
    }
    report = streamdetect.check(streamdetect.load_topology(TOPOLOGIES / "sind-figure2.yaml"))
    assert report.findings == ()


def test_figure_3_not_2_sind_but_2_rsind() -> None:
    report = streamdetect.check(streamdetect.load_topology(TOPOLOGIES / "sind-figure3.yaml"))
    sind = [f for f in report.findings if f.check == "sind"]
    rsind = [f for f in report.findings if f.check == "rsind"]
    assert [{T[(dict(m)["Zip"], dict(m)["Age"])] for m in f.members} for f in sind] == [{"t1"}]
    assert rsind == []
