"""The papers' views written as SQL give the findings of their YAML forms, and SQL outside what a view is
(a projection and a selection of the one table) is refused with exit code 2, naming the construct."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from streamdetect.cli.main import cli

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"

#: Every shipped topology's views written as SQL by hand, in the styles publishers write (PostgreSQL's
#: lower-case names, qualified and aliased columns, BETWEEN, constants on the left, ANY over an ARRAY as
#: pg_views stores IN).
SQL: dict[str, dict[str, str]] = {
    "decapitani-hospital.yaml": {
        "left": "SELECT birth, zip FROM hospital",
        "right": "SELECT h.illness, h.doctor FROM HOSPITAL AS h",
    },
    "dou-chain.yaml": {
        "v3": "SELECT ssn, dob, sex FROM patient",
        "v4": "SELECT zip, dob, job FROM patient",
        "v5": 'SELECT "ZIP", "Job", "Disease" FROM "Patient"',
    },
    "dou-patients-without-dan.yaml": {
        "v1": "SELECT SSN, DOB, Job, Disease FROM Patient",
        "v2prime": "SELECT patient.name, patient.zip, patient.job, patient.sex FROM patient WHERE 'Dan' <> name",
    },
    "dou-patients.yaml": {
        "v1": "SELECT ssn, dob, job, disease FROM patient;",
        "v2": "SELECT name, zip, job, sex FROM patient",
    },
    "huang-table1.yaml": {
        "release": "SELECT * FROM t",
        "demographics": "SELECT country, sex, salary FROM t",
    },
    "sind-figure2.yaml": {
        "zips": "SELECT zip, problem FROM tbl WHERE ((zip)::text = ANY ((ARRAY['22032'::character varying, "
        "'22033'::character varying])::text[]))",
    },
    "sind-figure3.yaml": {
        "zip_22030": "SELECT problem FROM tbl WHERE zip = '22030'",
        "t1_obesity": "SELECT problem FROM tbl WHERE zip = '22030' AND age = 39 AND race = 'White' "
        "AND gender = 'Male' AND charge = '1K' AND problem = 'Obesity'",
    },
    "sind-figure4.yaml": {
        "by_race": "SELECT race, problem FROM tbl WHERE (zip = '22030')",
        "by_gender": "SELECT gender, problem FROM tbl t WHERE t.race = 'White'::text",
    },
    "yao-figure1.yaml": {
        "v1": "SELECT name, job FROM p1",
        "v2": "SELECT job, problem FROM p1",
    },
    "yao-figure2.yaml": {
        "high_salaries": "SELECT name FROM p1 WHERE salary > 80000",
        # Salary is an integer: strictly between 80,000 and 100,000 is BETWEEN 80,001 AND 99,999.
        "middle_problems": "SELECT problem FROM p1 WHERE salary BETWEEN 80001 AND 99999",
        "below_105k": "SELECT name FROM p1 WHERE 105000 > salary",
    },
    "yao-figure3-without-fd.yaml": {
        "v1": "SELECT name, charge FROM p2",
        "v2": "SELECT charge, problem FROM p2",
    },
    "yao-figure3.yaml": {
        "v1": "SELECT name, charge FROM p2",
        "v2": "SELECT DISTINCT charge, problem FROM p2",
    },
    "yao-figure6.yaml": {
        "ab": 'SELECT a, b FROM "table"',
        "cd": 'SELECT c, d FROM "table"',
    },
    "yao-figure8.yaml": {
        "v1": "SELECT name, zip FROM t",
        "v2": "SELECT zip, job FROM t",
        "v3": "SELECT salary, problem FROM t",
    },
    "yao-pitfall.yaml": {
        "ids": 'SELECT id FROM "table"',
        "properties": 'SELECT p FROM "table"',
    },
    "yao-section631.yaml": {
        "v1": "SELECT name, job FROM p1",
        "v2": "SELECT job, salary FROM p1",
        "v3": "SELECT salary, problem FROM p1",
    },
    "yao-serious-possible.yaml": {
        "jobs": "SELECT name, job FROM p1",
        "serious": "SELECT job, problem FROM p1 WHERE problem IN ('HIV', 'Obesity')",
    },
}


def _check(path: Path) -> tuple[int, list[dict[str, Any]]]:
    result = CliRunner().invoke(cli, ["check", str(path), "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)["findings"]


def _as_sql(name: str, tmp_path: Path) -> Path:
    """The shipped topology ``name`` with each view's attributes and where replaced by its SQL."""
    document = yaml.safe_load((TOPOLOGIES / name).read_text())
    for key in ("source",):
        if key in document["table"]:
            document["table"][key] = str(TOPOLOGIES / document["table"][key])
    for view in document["views"]:
        view.pop("attributes")
        view.pop("where", None)
        view["sql"] = SQL[name][view["name"]]
        if "source" in view:
            view["source"] = str(TOPOLOGIES / view["source"])
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_every_shipped_topology_has_its_sql_form() -> None:
    declared_as_lists = {path.name for path in TOPOLOGIES.glob("*.yaml") if "sql:" not in path.read_text()}
    assert set(SQL) == declared_as_lists


@pytest.mark.parametrize("name", sorted(SQL))
def test_views_written_as_sql_give_the_findings_of_their_yaml_form(name: str, tmp_path: Path) -> None:
    status, findings = _check(TOPOLOGIES / name)
    assert _check(_as_sql(name, tmp_path)) == (status, findings)


def test_the_shipped_sql_topology_finds_the_dancer_as_its_yaml_form_does() -> None:
    status, findings = _check(TOPOLOGIES / "dou-patients-sql.yaml")
    assert status == 1
    assert any(f["check"] == "linkage" and f["identifier"]["value"] == "Dan" for f in findings)
    assert (status, findings) == _check(TOPOLOGIES / "dou-patients.yaml")


def _topology(tmp_path: Path, sql: str, **extra: str) -> Path:
    (tmp_path / "patients.csv").write_text("Name,Zip,Job,Age\nAnn,02135,Dancer,30\nBob,02139,Cook,41\n")
    document = {
        "table": {
            "name": "patients",
            "attributes": {"Name": "str", "Zip": "str", "Job": "str", "Age": "int"},
            "identifiers": ["Name"],
            "sensitive": ["Job"],
            "source": "patients.csv",
        },
        "views": [{"name": "released", "sql": sql, **extra}, {"name": "jobs", "sql": "SELECT zip, job FROM patients"}],
    }
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("SELECT name, zip FROM patients JOIN visits ON visits.name = patients.name", "a join"),
        ("SELECT name, zip FROM patients, visits", "a join"),
        ("SELECT count(*) FROM patients", "an aggregate (COUNT(*))"),
        ("SELECT zip FROM patients GROUP BY zip", "GROUP BY"),
        ("SELECT name FROM patients WHERE lower(job) = 'dancer'", "a function (LOWER(job))"),
        ("SELECT upper(name) FROM patients", "a function (UPPER(name))"),
        ("SELECT name FROM (SELECT name FROM patients) AS p", "a subquery in FROM"),
        ("SELECT name FROM patients WHERE age IN (SELECT age FROM visits)", "a subquery in IN"),
        ("SELECT name FROM patients WHERE EXISTS (SELECT 1 FROM visits)", "a subquery"),
        ("SELECT name, zip FROM visits", "another table 'visits'"),
        ("SELECT name FROM patients UNION SELECT name FROM visits", "UNION (a set operation)"),
        ("SELECT name FROM patients LIMIT 10", "LIMIT"),
        ("WITH p AS (SELECT name FROM patients) SELECT name FROM p", "WITH (a common table expression)"),
        ("SELECT name FROM patients WHERE age + 1 > 30", "an arithmetic expression (age + 1)"),
        ("SELECT name FROM patients WHERE name = zip", "a comparison of two columns"),
        ("SELECT name FROM patients WHERE zip IS NULL", "a null test"),
        ("SELECT name FROM patients WHERE name LIKE 'A%'", "pattern matching"),
        ("SELECT name AS patient FROM patients", "renaming a column"),
        ("SELECT DISTINCT ON (zip) name, zip FROM patients", "DISTINCT ON"),
        ("SELECT row_number() OVER () FROM patients", "a window function"),
        ("SELECT name FROM patients WHERE CASE WHEN age > 30 THEN true ELSE false END", "a CASE expression"),
        ("SELECT name FROM patients WHERE (age)::text = '30'", "a cast of column 'Age'"),
        ("DELETE FROM patients", "expected a SELECT statement, found DELETE"),
        ("SELECT name FROM patients; SELECT zip FROM patients", "expected one SELECT statement, found 2"),
        ("SELECT name FROM patients WHERE", "not valid SQL"),
        ("SELECT surname FROM patients", "unknown column 'surname'"),
    ],
)
def test_sql_outside_a_view_is_refused_naming_the_construct(tmp_path: Path, sql: str, named: str) -> None:
    result = CliRunner().invoke(cli, ["check", str(_topology(tmp_path, sql))])
    assert result.exit_code == 2, result.output
    assert "views[0].sql" in result.stderr
    assert named in result.stderr
    assert "Traceback" not in result.output


def test_sql_and_attributes_together_are_refused(tmp_path: Path) -> None:
    path = _topology(tmp_path, "SELECT name FROM patients", attributes="[Name]")
    result = CliRunner().invoke(cli, ["check", str(path)])
    assert result.exit_code == 2
    assert "views[0].attributes" in result.stderr
    assert "sql" in result.stderr


def test_distinct_makes_the_view_computed_from_the_table_a_set(tmp_path: Path) -> None:
    from streamdetect.io.sources import load_views
    from streamdetect.io.topology_file import load_topology

    path = _topology(tmp_path, "SELECT DISTINCT job FROM patients WHERE age > 0 OR job = 'Dancer'")
    (tmp_path / "patients.csv").write_text("Name,Zip,Job,Age\nAnn,02135,Dancer,30\nBob,02139,Dancer,41\n")
    topology = load_topology(path)
    assert topology.views[0].distinct
    assert topology.views[0].where_text == "Age > 0 OR Job = 'Dancer'"
    views = load_views(topology)
    assert views["released"].rows() == [("Dancer",)]
    assert views["jobs"].height == 2  # no DISTINCT: a bag, as SQL computes it


def test_a_distinct_view_whose_file_repeats_a_row_is_not_that_view(tmp_path: Path) -> None:
    (tmp_path / "released.csv").write_text("Job\nDancer\nCook\nDancer\n")
    path = _topology(tmp_path, "SELECT DISTINCT job FROM patients", source="released.csv")
    result = CliRunner().invoke(cli, ["check", str(path)])
    assert result.exit_code == 2, result.output
    assert "row(s) 3 repeat earlier rows" in result.stderr
    assert "released.csv" in result.stderr
