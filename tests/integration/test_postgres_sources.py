"""PostgreSQL as a source, against a real server: the table read in place with the database's types, views
run as SQL on it or read from its relations, views imported from pg_views, passwords kept out of topologies."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from click.testing import CliRunner

from streamdetect.cli.main import cli
from streamdetect.io.postgres import captured_table
from streamdetect.io.sources import load_data
from streamdetect.io.topology_file import load_topology
from tests.integration.postgres_helpers import PASSWORD, LocalPostgres

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


def _check(path: Path) -> tuple[int, list[dict[str, Any]]]:
    result = CliRunner().invoke(cli, ["check", str(path), "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)["findings"]


def _write(tmp_path: Path, document: dict[str, Any], name: str = "topology.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _load_csv(postgres: LocalPostgres, table: str, columns: str, csv: Path) -> None:
    """A table of the database filled from a CSV file of the shipped examples."""
    import psycopg

    postgres.execute(f"DROP TABLE IF EXISTS {table} CASCADE", f"CREATE TABLE {table} ({columns})")
    with psycopg.connect(postgres.uri, password=PASSWORD, autocommit=True) as connection:
        names = ", ".join(csv.read_text().splitlines()[0].split(","))
        with connection.cursor().copy(f"COPY {table} ({names}) FROM STDIN WITH (FORMAT csv, HEADER)") as copy:  # type: ignore[arg-type]
            copy.write(csv.read_bytes())


def test_values_type_inference_would_lose_survive(postgres: LocalPostgres, pg_password: str, tmp_path: Path) -> None:
    postgres.execute(
        "DROP TABLE IF EXISTS people CASCADE",
        "CREATE TABLE people (name text, zip char(5), code varchar(3), age int, income numeric, born date, note text)",
        "INSERT INTO people VALUES ('Ann', '02135', '007', 30, 1.50, '1990-01-02', ''),"
        " ('Bob', '10001', '42', NULL, NULL, NULL, NULL)",
    )
    document = {
        "table": {
            "name": "People",
            "attributes": ["Name", "Zip", "Code", "Age", "Income", "Born", "Note"],
            "identifiers": ["Name"],
            "sensitive": ["Code"],
            "source": postgres.uri,
        },
        "views": [{"name": "v", "sql": "SELECT name, zip, code, age, income, born, note FROM people"}],
    }
    views, table = load_data(load_topology(_write(tmp_path, document)))
    assert table is not None
    for frame in (table, views["v"]):
        assert frame.schema == pl.Schema(
            {
                "Name": pl.String,
                "Zip": pl.String,
                "Code": pl.String,
                "Age": pl.Int64,
                "Income": pl.Float64,
                "Born": pl.Date,
                "Note": pl.String,
            }
        )
        rows = {row["Name"]: row for row in frame.iter_rows(named=True)}
        assert rows["Ann"]["Zip"] == "02135"
        assert rows["Ann"]["Code"] == "007"
        assert rows["Ann"]["Income"] == 1.5
        assert rows["Ann"]["Note"] == ""  # an empty string stays one
        assert rows["Bob"]["Note"] is None  # and a null stays null
        assert rows["Bob"]["Age"] is None


def test_check_over_the_database_equals_check_over_the_files(
    postgres: LocalPostgres, pg_password: str, tmp_path: Path
) -> None:
    """Yao et al.'s Figure 2 (selections on an integer) and Dou & Coulondre's Table 1, their tables in the
    database and their views run there as SQL, or read from the database's own views by name."""
    data = TOPOLOGIES / "data"
    _load_csv(postgres, "p1", "name text, job text, salary int, problem text", data / "yao" / "p1.csv")
    _load_csv(
        postgres,
        "patient",
        "ssn text, name text, zip text, dob text, sex text, job text, disease text, id serial",
        data / "dou" / "patient.csv",
    )
    postgres.execute("CREATE VIEW v2 AS SELECT name, zip, job, sex FROM patient")
    figure2 = yaml.safe_load((TOPOLOGIES / "yao-figure2.yaml").read_text())
    figure2["table"]["source"] = postgres.uri
    sql = {
        "high_salaries": "SELECT name FROM p1 WHERE salary > 80000",
        "middle_problems": "SELECT problem FROM p1 WHERE salary > 80000 AND salary < 100000",
        "below_105k": "SELECT name FROM p1 WHERE salary < 105000",
    }
    figure2["views"] = [{"name": view["name"], "sql": sql[view["name"]]} for view in figure2["views"]]
    assert _check(_write(tmp_path, figure2, "figure2.yaml")) == _check(TOPOLOGIES / "yao-figure2.yaml")

    table1 = yaml.safe_load((TOPOLOGIES / "dou-patients.yaml").read_text())
    table1["table"]["source"] = postgres.uri
    table1["views"] = [
        {"name": "v1", "sql": "SELECT ssn, dob, job, disease FROM patient"},
        {"name": "v2", "attributes": ["Name", "ZIP", "Job", "Sex"], "source": postgres.uri},  # the database's v2
    ]
    status, findings = _check(_write(tmp_path, table1, "table1.yaml"))
    assert (status, findings) == _check(TOPOLOGIES / "dou-patients.yaml")
    assert any(f["identifier"]["value"] == "Dan" and f["level"] == 2 for f in findings)


def test_import_views_reads_pg_views(postgres: LocalPostgres, pg_password: str, tmp_path: Path) -> None:
    _load_csv(
        postgres,
        "patient",
        "ssn text, name text, zip text, dob text, sex text, job text, disease text, seen timestamptz",
        TOPOLOGIES / "data" / "dou" / "patient.csv",
    )
    postgres.execute(
        "DROP TABLE IF EXISTS visits",
        "CREATE TABLE visits (name text, ward text)",
        "CREATE VIEW v1 AS SELECT ssn, dob, job, disease FROM patient WHERE job IN ('Dancer', 'Engineer', 'Manager')",
        "CREATE VIEW v2 AS SELECT name, zip, job, sex FROM patient WHERE zip BETWEEN '47000' AND '48000'",
        "CREATE VIEW wards AS SELECT p.name, v.ward FROM patient p JOIN visits v ON v.name = p.name",
        "CREATE VIEW per_job AS SELECT job, count(*) AS patients FROM patient GROUP BY job",
    )
    output = tmp_path / "hospital.yaml"
    result = CliRunner().invoke(
        cli,
        [
            "import-views",
            postgres.uri,
            "--table",
            "patient",
            "--identifier",
            "ssn",
            "--identifier",
            "name",
            "--sensitive",
            "disease",
            "-o",
            str(output),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "left out view public.wards: a join" in result.stderr
    assert "left out view public.per_job" in result.stderr
    assert "aggregate" in result.stderr
    assert "left out column seen: type timestamptz" in result.stderr
    topology = load_topology(output)
    assert [view.name for view in topology.views] == ["v1", "v2"]
    assert topology.views[1].where_text == "zip >= '47000' AND zip <= '48000'"
    # The same views, written by hand over the shipped files, find the same disclosures.
    by_hand = yaml.safe_load((TOPOLOGIES / "dou-patients.yaml").read_text())
    by_hand["table"]["source"] = str(TOPOLOGIES / "data" / "dou" / "patient.csv")
    by_hand["views"] = [
        {
            "name": "v1",
            "sql": "SELECT SSN, DOB, Job, Disease FROM patient WHERE job IN ('Dancer', 'Engineer', 'Manager')",
        },
        {"name": "v2", "sql": "SELECT Name, ZIP, Job, Sex FROM patient WHERE zip BETWEEN '47000' AND '48000'"},
    ]
    status, findings = _check(output)
    expected_status, expected = _check(_write(tmp_path, by_hand, "by-hand.yaml"))
    assert status == expected_status == 1
    assert [(f["identifier"]["value"], f["sensitive"]["values"]) for f in findings] == [
        (f["identifier"]["value"], f["sensitive"]["values"]) for f in expected
    ]


def test_a_password_comes_from_the_environment_or_pgpass_never_the_topology(
    postgres: LocalPostgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    postgres.execute("DROP TABLE IF EXISTS tiny CASCADE", "CREATE TABLE tiny (name text, job text)")
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "missing"))

    def run(uri: str) -> Any:
        document = {
            "table": {"name": "tiny", "attributes": ["name", "job"], "identifiers": ["name"], "sensitive": ["job"]},
            "views": [{"name": "v", "sql": "SELECT name, job FROM tiny"}],
        }
        document["table"]["source"] = uri
        return CliRunner().invoke(cli, ["check", str(_write(tmp_path, document))])

    with_password = postgres.uri.replace("publisher@", f"publisher:{PASSWORD}@")
    refused = run(with_password)
    assert refused.exit_code == 2
    assert "holds a password" in refused.stderr
    assert PASSWORD not in refused.output

    no_password = run(postgres.uri)
    assert no_password.exit_code == 2
    assert "cannot connect" in no_password.stderr
    assert "Traceback" not in no_password.output

    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"127.0.0.1:{postgres.port}:*:publisher:{PASSWORD}\n")
    os.chmod(pgpass, 0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    assert run(postgres.uri).exit_code == 0


def test_what_the_database_cannot_give_is_a_clear_error(
    postgres: LocalPostgres, pg_password: str, tmp_path: Path
) -> None:
    postgres.execute(
        "DROP TABLE IF EXISTS stamped CASCADE",
        "CREATE TABLE stamped (name text, job text, seen timestamptz)",
        "CREATE VIEW stamped_view AS SELECT name, job, seen FROM stamped",
    )

    def run(views: list[dict[str, Any]], table: str = "stamped") -> Any:
        document = {
            "table": {"name": table, "attributes": ["name", "job", "seen"], "identifiers": ["name"]},
            "views": views,
        }
        document["table"].update(sensitive=["job"], source=postgres.uri)
        return CliRunner().invoke(cli, ["check", str(_write(tmp_path, document))])

    typed = run([{"name": "v", "sql": "SELECT name, job, seen FROM stamped"}])
    assert typed.exit_code == 2
    assert "column 'seen'" in typed.stderr
    assert "timestamptz" in typed.stderr
    missing = run([{"name": "v", "sql": "SELECT name, job FROM nowhere"}], table="nowhere")
    assert missing.exit_code == 2
    assert 'relation "nowhere" does not exist' in missing.stderr
    extra = run([{"name": "stamped_view", "attributes": ["name", "job"], "source": postgres.uri}])
    assert extra.exit_code == 2
    assert "also has column(s) 'seen'" in extra.stderr


def _people(source: str) -> dict[str, Any]:
    """A topology of a database's ``people`` table (name, zip, disease) and two views of it in SQL."""
    return {
        "table": {
            "name": "People",
            "attributes": ["Name", "Zip", "Disease"],
            "identifiers": ["Name"],
            "sensitive": ["Disease"],
            "source": source,
        },
        "views": [
            {"name": "names", "sql": "SELECT name, zip FROM people"},
            {"name": "diseases", "sql": "SELECT zip, disease FROM people"},
        ],
        "checks": {"linkage": {"k": 2}},
    }


def _sql_ascii_people(postgres: LocalPostgres, database: str, rows: str) -> str:
    """A SQL_ASCII database (initdb's default under the C locale) of that name, its ``people`` table holding
    ``rows`` (SQL values); its URI."""
    import psycopg

    postgres.execute(
        f"DROP DATABASE IF EXISTS {database}",
        f"CREATE DATABASE {database} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0",
    )
    uri = postgres.uri.rsplit("/", 1)[0] + "/" + database
    with psycopg.connect(uri, password=PASSWORD, autocommit=True) as connection:
        connection.execute("CREATE TABLE people (name text, zip char(5), disease text)")
        connection.execute(f"INSERT INTO people VALUES {rows}")  # type: ignore[arg-type]  # a test's literal
    return uri


def test_a_sql_ascii_database_is_read_as_text(postgres: LocalPostgres, pg_password: str, tmp_path: Path) -> None:
    # initdb's default encoding under the C locale: psycopg hands its text over as bytes unless told.
    uri = _sql_ascii_people(postgres, "legacy", "('Ann', '02135', 'Flu'), ('Bob', '02135', 'Cold')")
    document = _people(uri)
    views, table = load_data(load_topology(_write(tmp_path, document)))
    assert table is not None
    assert sorted(table.get_column("Name").to_list()) == ["Ann", "Bob"]
    assert views["names"].get_column("Zip").to_list() == ["02135", "02135"]
    code, findings = _check(_write(tmp_path, document))
    # One ZIP code, two people, two diseases: nothing ties one to the other.
    assert code == 0
    assert findings == []


def test_a_sql_ascii_database_whose_text_is_not_utf8_is_read_in_the_encoding_its_uri_names(
    postgres: LocalPostgres, pg_password: str, tmp_path: Path
) -> None:
    # SQL_ASCII keeps any bytes: here LATIN1's. Read as UTF-8 the server refuses them: exit 2 saying what to
    # name; named on the URI, the rows come through COPY in LATIN1 and are decoded as such.
    jose = "convert_from('\\x4a6f73e9'::bytea, 'SQL_ASCII')"  # "Jos" and LATIN1's e acute, 0xe9
    uri = _sql_ascii_people(postgres, "latin", f"({jose}, '02135', 'Flu'), ('Bob', '02139', 'Cold')")
    document = _people(uri)
    refused = CliRunner().invoke(cli, ["check", str(_write(tmp_path, document))])
    assert refused.exit_code == 2
    assert 'invalid byte sequence for encoding "UTF8"' in refused.stderr
    assert "?client_encoding=LATIN1" in refused.stderr
    assert "Traceback" not in refused.output

    document["table"]["source"] = uri + "?client_encoding=LATIN1"
    views, table = load_data(load_topology(_write(tmp_path, document)))
    assert table is not None
    assert sorted(table.get_column("Name").to_list()) == ["Bob", "José"]
    assert sorted(views["names"].get_column("Name").to_list()) == ["Bob", "José"]
    code, findings = _check(_write(tmp_path, document))
    # Two ZIP codes, one person each: the names tie each to a disease.
    assert code == 1
    assert sorted((f["identifier"]["value"], *f["sensitive"]["values"]) for f in findings) == [
        ("Bob", "Cold"),
        ("José", "Flu"),
    ]


def test_change_capture_refuses_a_sql_ascii_table_whose_text_is_not_utf8(
    postgres: LocalPostgres, pg_password: str, tmp_path: Path
) -> None:
    # Debezium reads text as UTF-8 only: on LATIN1 bytes its snapshot fails and is retried without end while
    # the connector says it runs. `connect start` (and `capture`) refuse such a table up front, naming the
    # column; a SQL_ASCII table whose text is UTF-8 is taken.
    jose = "convert_from('\\x4a6f73e9'::bytea, 'SQL_ASCII')"
    uri = _sql_ascii_people(postgres, "latin_capture", f"('Bob', '02139', 'Cold'), ({jose}, '02135', 'Flu')")
    path = _write(tmp_path, {**_people(uri + "?client_encoding=LATIN1"), "name": "latin"})
    refused = CliRunner().invoke(cli, ["connect", "start", str(path)])
    assert refused.exit_code == 2
    assert "Name of public.people holds text that is not UTF-8" in refused.stderr
    assert "Traceback" not in refused.output

    jose = "convert_from('\\x4a6f73c3a9'::bytea, 'SQL_ASCII')"  # the same name in UTF-8
    utf8 = _sql_ascii_people(postgres, "latin_capture", f"('Bob', '02139', 'Cold'), ({jose}, '02135', 'Flu')")
    assert captured_table(utf8, "people", ["Name", "Zip", "Disease"]).not_utf8 is None
