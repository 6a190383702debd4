"""Yao, Wang & Jajodia 2005 with functional dependencies: Figures 3 and 8, and section 6.1."""

from __future__ import annotations

from pathlib import Path

import streamdetect
from streamdetect.checks.k_anonymity.functional_dependencies import effective_dependencies
from streamdetect.model.topology import FunctionalDependency, ViewDefinition

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


def _covers(name: str) -> list[tuple[object, tuple[object, ...], bool]]:
    report = streamdetect.check(streamdetect.load_topology(TOPOLOGIES / name))
    return [(f.identifier_value, f.sensitive_values, f.to_dict()["exact"]) for f in report.findings]


def test_figure3_without_the_fd_nothing_is_certain() -> None:
    assert _covers("yao-figure3-without-fd.yaml") == []


def test_figure3_with_the_fd_john_has_obesity() -> None:
    covers = _covers("yao-figure3.yaml")
    assert ("John", ("Obesity",), False) in covers
    # With John's problem forced, (20K, Cold) and (30K, HIV) have a single possible source each: the
    # FD makes every association certain, and the conservative check reports each one.
    assert sorted(covers, key=str) == sorted(
        [("Bill", ("HIV",), False), ("George", ("Cold",), False), ("John", ("Obesity",), False)], key=str
    )


def test_figure8_only_hiv_is_unique_by_complete_signature() -> None:
    assert _covers("yao-figure8.yaml") == [("Bill", ("HIV",), False)]


def test_section_6_1_ineffective_fds() -> None:
    views = [ViewDefinition("v1", ("Name", "Job")), ViewDefinition("v2", ("Job", "Salary"))]
    fds = [
        FunctionalDependency(("Name",), ("Job",)),
        FunctionalDependency(("Job",), ("Salary",)),
        FunctionalDependency(("Name",), ("Salary",)),
    ]
    assert effective_dependencies(views, fds) == []
    figure3 = [ViewDefinition("v1", ("Name", "Charge")), ViewDefinition("v2", ("Charge", "Problem"))]
    assert effective_dependencies(figure3, [FunctionalDependency(("Name",), ("Problem",))]) == [
        FunctionalDependency(("Name",), ("Problem",))
    ]


def test_section_6_3_1_key_and_one_join_path_is_exact() -> None:
    assert _covers("yao-section631.yaml") == [("Bill", ("HIV",), True)]
    report = streamdetect.check(streamdetect.load_topology(TOPOLOGIES / "yao-section631.yaml"), k=3)
    assert {(f.identifier_value, f.sensitive_values) for f in report.findings} == {
        ("Bill", ("HIV",)),
        ("George", ("Cold", "Obesity")),
        ("John", ("Cold", "Obesity")),
    }


def test_figure3_reading_is_what_every_instance_shows() -> None:
    # Enumerating every instance that yields Figure 3's views and keeps Name -> Problem: all three
    # associations are certain, not only John's (docs/design.md, "Reading of Figure 3").
    from tests.reference import association_cover_reference

    views = {"v1": ("Name", "Charge"), "v2": ("Charge", "Problem")}
    rows = {
        "v1": [{"Name": n, "Charge": c} for n, c in [("George", 20), ("John", 20), ("John", 30), ("Bill", 30)]],
        "v2": [{"Charge": c, "Problem": p} for c, p in [(20, "Cold"), (20, "Obesity"), (30, "Obesity"), (30, "HIV")]],
    }
    covers = association_cover_reference(
        ("Name", "Charge", "Problem"), views, rows, ["Name"], ["Problem"], 2, [(("Name",), "Problem")]
    )
    expected = {(value, values) for value, values, _ in _covers("yao-figure3.yaml")}
    assert {(a, tuple(sorted(c))) for _, a, _, c in covers} == expected
