"""Huang et al. 2014 (semantic integrity and k-anonymity): Table 1 as released, and its 2-anonymized
Tables 7 and 10, through the table checks."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from click.testing import CliRunner

import streamdetect
from streamdetect.checks.table.anonymity import TableAnonymity
from streamdetect.cli.main import cli
from streamdetect.model.batch import Batch
from streamdetect.relational.dependencies import functional, k_multiset

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"
TABLE1 = TOPOLOGIES / "huang-table1.yaml"
COLUMNS = ["Country", "Sex", "Zip", "Department", "Phone", "Salary"]
SALARIES = ["1,5000K", "2,6000K", "1,8000K", "1,1000K", "3,4000K", "2,8000K", "1,6000K", "1,2000K"]
TABLE10 = pl.DataFrame(
    [
        ("USA", "Female", "021**", "Teaching", "8515***"),
        ("USA", "Female", "021**", "Teaching", "8515***"),
        ("Japan", "Male", "021**", "Physics", "851541*"),
        ("Japan", "Male", "021**", "Physics", "851541*"),
        ("Asia", "Female", "021**", "Computer", "851562*"),
        ("Asia", "Female", "021**", "Computer", "851562*"),
        ("Canada", "Male", "021**", "Teaching", "8515***"),
        ("Canada", "Male", "021**", "Teaching", "8515***"),
    ],
    schema=COLUMNS[:5],
    orient="row",
).with_columns(pl.Series("Salary", SALARIES))


def test_table1_released_as_is_singles_out_every_teacher() -> None:
    report = streamdetect.check(streamdetect.load_topology(TABLE1))
    table_groups = [f for f in report.findings if f.check == "table-k-anonymity" and f.views == ()]
    assert len(table_groups) == 8
    assert {f.count for f in table_groups} == {1}
    assert report.exit_code == 1
    # The view of Country and Sex alone: only (Japan, Female) and (Korea, Female) are single.
    demographics = [f for f in report.findings if f.check == "table-k-anonymity" and f.views == ("demographics",)]
    assert sorted(dict(f.group)["Country"] for f in demographics) == ["Japan", "Korea"]


def test_table10_is_2_anonymous_and_2_diverse() -> None:
    topology = streamdetect.load_topology(TABLE1)
    for criterion in ("table-k-anonymity", "l-diversity"):
        check = TableAnonymity(topology, criterion, 2)
        assert list(check.update(check.initialize(), Batch(table=TABLE10)).raised) == []
    # Department -> Phone still holds in Table 10 (K-MSD-AG's point): one Phone per Department.
    assert TABLE10.group_by("Department").agg(pl.col("Phone").n_unique()).get_column("Phone").max() == 1


def test_group_findings_in_json_and_back() -> None:
    outcome = CliRunner().invoke(cli, ["check", str(TABLE1), "--json"])
    assert outcome.exit_code == 1
    document = json.loads(outcome.stdout)
    first = document["findings"][0]
    assert set(first) == {"id", "check", "view", "group", "count", "k"}
    assert first["view"] is None
    diverse = next(f for f in document["findings"] if f["check"] == "l-diversity")
    assert set(diverse) == {"id", "check", "view", "group", "count", "sensitive", "distinct", "l"}
    assert document["summary"]["by_check"] == {"table-k-anonymity": 18, "l-diversity": 18}
    explained = CliRunner().invoke(cli, ["explain", str(TABLE1), "--finding", diverse["id"], "--json"])
    assert explained.exit_code == 0, explained.output
    rows = json.loads(explained.stdout)["explanation"][0]["rows"]
    assert len(rows) == diverse["count"]


def test_incognito_table2_loses_department_to_phone_and_table10_keeps_it() -> None:
    table2 = TABLE10.with_columns(
        pl.lit("Teaching").alias("Department"),
        pl.Series("Phone", ["85152**", "85152**", "85154**", "85154**", "85156**", "85156**", "85153**", "85153**"]),
    )
    assert not functional(table2, ["Department"], ["Phone"]).holds  # one Department, four Phones
    assert functional(TABLE10, ["Department"], ["Phone"]).holds
    # Theorem 2: X ->2 Y on a 2-anonymous table.
    assert k_multiset(TABLE10, ["Country", "Sex"], ["Zip", "Department", "Phone"], 2).holds


def test_table6_zip_is_2_multiset_dependent_on_race() -> None:
    """Section 4.2: Asian with {0213*, 0213*, 02141, 02141}, Black with 02138 four times."""
    table6 = pl.DataFrame(
        {"Race": ["Asian"] * 4 + ["Black"] * 4, "Zip": ["0213*", "0213*", "02141", "02141"] + ["02138"] * 4}
    )
    assert k_multiset(table6, ["Race"], ["Zip"], 2).holds
    assert not k_multiset(table6, ["Race"], ["Zip"], 3).holds


def test_dependencies_command_on_table1() -> None:
    outcome = CliRunner().invoke(cli, ["dependencies", str(TABLE1), "--kmsd", "Country -> Sex", "--json"])
    assert outcome.exit_code == 1  # the K-MSD does not hold in the raw table
    body = json.loads(outcome.stdout)["dependencies"]
    assert [(d["kind"], d["dependency"], d["holds"]) for d in body] == [
        ("functional", "Department -> Phone", True),
        ("k-multiset", "Country ->2 Sex", False),
    ]


TABLE7 = [
    ("USA", "Female", "021**", "Teaching", "85152**"),
    ("USA", "Female", "021**", "Teaching", "85152**"),
    ("Japan", "Male", "021**", "Physics", "851541*"),
    ("Japan", "Male", "021**", "Physics", "851541*"),
    ("Asia", "Female", "021**", "Computer", "851562*"),
    ("Asia", "Female", "021**", "Computer", "851562*"),
    ("Canada", "Male", "021**", "Teaching", "85153**"),
    ("Canada", "Male", "021**", "Teaching", "85153**"),
]


def test_k_msd_gives_table7_and_k_msd_ag_table10(tmp_path: Path) -> None:
    for algorithm, expected, fd_after in (
        ("k-msd", TABLE7, False),
        ("k-msd-ag", list(TABLE10.select(COLUMNS[:5]).iter_rows()), True),
    ):
        out = tmp_path / algorithm
        outcome = CliRunner().invoke(
            cli, ["anonymize", str(TABLE1), "--k", "2", "--algorithm", algorithm, "--out", str(out), "--json"]
        )
        assert outcome.exit_code == 0, outcome.output
        written = pl.read_csv(out / "anonymized.csv", infer_schema=False)
        assert list(written.select(COLUMNS[:5]).iter_rows()) == expected
        assert written.get_column("Salary").to_list() == SALARIES  # the sensitive attribute is untouched
        report = json.loads(outcome.stdout)
        assert report["functional_dependencies"]["Department -> Phone"] == {"before": True, "after": fd_after}
        assert report["discernibility"] == 16  # four groups of two rows
