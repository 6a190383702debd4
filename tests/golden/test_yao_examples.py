"""Yao, Wang & Jajodia 2005: Figure 1 and the section 5.2 pitfall, as shipped topologies."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import streamdetect
from streamdetect.checks.findings import AssociationCoverFinding
from streamdetect.cli.main import cli

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


def _covers(name: str, k: int) -> set[tuple[object, tuple[object, ...]]]:
    report = streamdetect.check(streamdetect.load_topology(TOPOLOGIES / name), checks=["k-anonymity"], k=k)
    return {(f.identifier_value, f.sensitive_values) for f in report.findings if isinstance(f, AssociationCoverFinding)}


def test_figure1_k2_only_bill_hiv() -> None:
    assert _covers("yao-figure1.yaml", 2) == {("Bill", ("HIV",))}


def test_figure1_k3_adds_george_and_john_two_covers() -> None:
    assert _covers("yao-figure1.yaml", 3) == {
        ("Bill", ("HIV",)),
        ("George", ("Cold", "Obesity")),
        ("John", ("Cold", "Obesity")),
    }


def test_section_5_2_pitfall_is_caught_by_projection_facts_not_by_identifier_counts() -> None:
    report = streamdetect.check(streamdetect.load_topology(TOPOLOGIES / "yao-pitfall.yaml"))
    covers = {(f.identifier_value, f.sensitive_values) for f in report.findings if f.check == "k-anonymity"}
    linkage = [f for f in report.findings if f.check == "linkage"]
    assert covers == {("a1", ("b1",)), ("a1", ("b2",))}
    assert linkage == []  # the identifier-based count sees a1 linked to two values


def test_selections_with_an_effective_fd_get_the_conservative_check(tmp_path: Path) -> None:
    data = str(TOPOLOGIES / "data" / "yao") + "/"
    text = (TOPOLOGIES / "yao-figure1.yaml").read_text().replace("data/yao/", data)
    text = text.replace(
        f"    source: {data}fig1-v1.csv\n", f"    source: {data}fig1-v1.csv\n    where: \"Job = 'Manager'\"\n"
    )
    text = text.replace(
        "  sensitive: [Problem]\n", "  sensitive: [Problem]\n  functional_dependencies: ['Name -> Problem']\n"
    )
    path = tmp_path / "topology.yaml"
    path.write_text(text.replace("fig1-v1.csv", "fig1-v1-managers.csv"))
    (tmp_path / "fig1-v1-managers.csv").write_text("Name,Job\nGeorge,Manager\nJohn,Manager\n")
    text = path.read_text().replace(f"{data}fig1-v1-managers.csv", str(tmp_path / "fig1-v1-managers.csv"))
    path.write_text(text)
    result = CliRunner().invoke(cli, ["check", str(path), "--check", "k-anonymity", "--json"])
    assert result.exit_code == 1, result.stderr
    findings = json.loads(result.stdout)["findings"]
    assert findings
    assert all(f["exact"] is False for f in findings)


def test_figure2_john_obesity_through_selections() -> None:
    assert _covers("yao-figure2.yaml", 2) == {("John", ("Obesity",))}


def test_linkage_tells_certain_links_from_possible_ones(tmp_path: Path) -> None:
    data = TOPOLOGIES / "data" / "yao" / "p1.csv"
    table = (
        "table:\n"
        "  attributes: {Name: str, Job: str, Salary: int, Problem: str}\n"
        "  identifiers: [Name]\n"
        "  sensitive: [Problem]\n"
        f"  source: {data}\n"
    )
    # Bill is the only high earner who is a lawyer, every lawyer's problem is published: certain.
    path = tmp_path / "high.yaml"
    path.write_text(
        table + "views:\n"
        "  - {name: high, attributes: [Name, Job], where: 'Salary > 80000'}\n"
        "  - {name: problems, attributes: [Job, Problem]}\n"
    )
    report = streamdetect.check(streamdetect.load_topology(path), checks=["linkage"])
    assert [(f.identifier_value, f.views, f.certain, f.total) for f in report.findings] == [
        ("Bill", ("high", "problems"), True, True)
    ]
    # Only serious problems are published: George, a manager like John, is linked to Obesity but has a
    # Cold. Every link through the selected view is possible, none total.
    path = tmp_path / "serious.yaml"
    path.write_text(
        table + "views:\n"
        "  - {name: jobs, attributes: [Name, Job]}\n"
        "  - {name: serious, attributes: [Job, Problem], where: \"Problem IN ('HIV', 'Obesity')\"}\n"
    )
    report = streamdetect.check(streamdetect.load_topology(path), checks=["linkage"])
    assert [(f.identifier_value, f.sensitive_values, f.certain, f.total) for f in report.findings] == [
        ("Bill", ("HIV",), False, False),
        ("George", ("Obesity",), False, False),
        ("John", ("Obesity",), False, False),
    ]
    assert report.findings[0].to_dict()["joined_on"] == ["Job"]
    figure1 = streamdetect.check(streamdetect.load_topology(TOPOLOGIES / "yao-figure1.yaml"), checks=["linkage"])
    assert figure1.findings
    assert all(f.certain for f in figure1.findings)
