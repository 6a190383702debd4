"""Every class of bad input exits with code 2 and one clear message naming the file, key path and problem."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from streamdetect.cli.main import cli

GOOD_TABLE = """
table:
  name: Patient
  attributes: [SSN, Name, Job, Disease]
  identifiers: [SSN, Name]
  sensitive: [Disease]
"""


def _write(tmp_path: Path, topology: str, files: dict[str, str | bytes] | None = None) -> Path:
    for name, content in (files or {}).items():
        target = tmp_path / name
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    path = tmp_path / "topology.yaml"
    path.write_text(topology)
    return path


V1 = "SSN,Job,Disease\n1,Dancer,Flu\n"


def _run(path: Path, *extra: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["check", str(path), *extra])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("topology", "files", "expected"),
    [
        pytest.param(
            "table: [unclosed\n",
            {},
            ["topology.yaml", "line 2", "not valid YAML"],
            id="yaml-syntax",
        ),
        pytest.param("- just a list\n", {}, ["topology.yaml", "(top level)", "expected a mapping"], id="not-a-mapping"),
        pytest.param(
            GOOD_TABLE + "views: []\n",
            {},
            ["topology.yaml", "views", "non-empty list"],
            id="no-views",
        ),
        pytest.param(
            GOOD_TABLE + "viewz: []\n",
            {},
            ["viewz", "unknown key"],
            id="typo-top-key",
        ),
        pytest.param(
            GOOD_TABLE + "views:\n  - name: v1\n    attributes: [SSN, Zip]\n    source: v1.csv\n",
            {"v1.csv": V1},
            ["topology.yaml", "views[0].attributes[1]", "unknown attribute 'Zip'"],
            id="unknown-view-attribute",
        ),
        pytest.param(
            GOOD_TABLE.replace("identifiers: [SSN, Name]", "identifiers: [SSN, Nmae]")
            + "views:\n  - name: v1\n    attributes: [SSN]\n    source: v1.csv\n",
            {"v1.csv": V1},
            ["table.identifiers[1]", "unknown attribute 'Nmae'"],
            id="unknown-identifier",
        ),
        pytest.param(
            GOOD_TABLE
            + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    where: \"Jobb = 'x'\"\n"
            + "    source: v1.csv\n",
            {"v1.csv": V1},
            ["views[0].where", "unknown attribute 'Jobb'"],
            id="unknown-where-attribute",
        ),
        pytest.param(
            GOOD_TABLE
            + 'views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    where: "Job = "\n'
            + "    source: v1.csv\n",
            {"v1.csv": V1},
            ["views[0].where", "syntax error"],
            id="bad-where-syntax",
        ),
        pytest.param(
            GOOD_TABLE
            + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    where: \"Job = 'x'; DROP\"\n"
            + "    source: v1.csv\n",
            {"v1.csv": V1},
            ["views[0].where", "syntax error"],
            id="where-is-not-code",
        ),
        pytest.param(
            GOOD_TABLE
            + 'views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    where: "Job = 3"\n'
            + "    source: v1.csv\n",
            {"v1.csv": V1},
            ["views[0].where", "'Job' is text", "number 3"],
            id="where-type-mismatch",
        ),
        pytest.param(
            GOOD_TABLE + "views:\n  - name: v1\n    attributes: [SSN, Name, Disease]\n    source: v1.csv\n",
            {"v1.csv": V1},
            ["v1.csv", "'Name'", "missing from the file"],
            id="view-attribute-missing-from-file",
        ),
        pytest.param(
            GOOD_TABLE + "views:\n  - name: v1\n    attributes: [SSN, Disease]\n    source: v1.csv\n",
            {"v1.csv": V1},
            ["v1.csv", "'Job'", "does not list"],
            id="file-publishes-more-than-the-view",
        ),
        pytest.param(
            GOOD_TABLE + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    source: nowhere.csv\n",
            {},
            ["nowhere.csv", "no such file (named by views[0].source)"],
            id="missing-file",
        ),
        pytest.param(
            GOOD_TABLE + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    source: v1.parquet\n",
            {"v1.parquet": b"this is not parquet"},
            ["v1.parquet", "cannot read the file"],
            id="corrupt-parquet",
        ),
        pytest.param(
            GOOD_TABLE + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    source: v1.xlsx\n",
            {"v1.xlsx": "x"},
            ["v1.xlsx", "unsupported file type"],
            id="unsupported-file-type",
        ),
        pytest.param(
            GOOD_TABLE + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n",
            {},
            ["views[0].source", "no table.source"],
            id="no-source-at-all",
        ),
        pytest.param(
            GOOD_TABLE.replace(
                "attributes: [SSN, Name, Job, Disease]", "attributes: {SSN: int, Name: str, Job: str, Disease: str}"
            )
            + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    source: v1.csv\n",
            {"v1.csv": "SSN,Job,Disease\n1,Dancer,Flu\nabc,Clerk,HD\n"},
            ["v1.csv", "column 'SSN', row 2", "'abc'", "Int64"],
            id="value-of-wrong-type",
        ),
        pytest.param(
            GOOD_TABLE
            + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    source: v1.csv\n"
            + "checks:\n  linkage: {k: 1}\n",
            {"v1.csv": V1},
            ["checks.linkage.k", "from 2 to", "found the number 1"],
            id="bad-k",
        ),
        pytest.param(
            GOOD_TABLE
            + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    source: v1.csv\n"
            + "checks:\n  linkagee: {}\n",
            {"v1.csv": V1},
            ["checks.linkagee", "unknown check"],
            id="unknown-check",
        ),
        pytest.param(
            GOOD_TABLE.replace(
                "sensitive: [Disease]", "sensitive: [Disease]\n  functional_dependencies: ['SSN => Name']"
            )
            + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    source: v1.csv\n",
            {"v1.csv": V1},
            ["table.functional_dependencies[0]", "expected 'A, B -> C'"],
            id="bad-functional-dependency",
        ),
        pytest.param(
            GOOD_TABLE
            + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n"
            + "    where: \"Disease IN ('HIV', 'Cancer')\"\n    source: v1.csv\n",
            {"v1.csv": "SSN,Job,Disease\n1,Dancer,HIV\n2,Clerk,Flu\n3,Clerk,Cancer\n4,Cook,Cold\n"},
            ["v1.csv", "row(s) 2, 4 do not satisfy views[0].where", "Disease IN ('HIV', 'Cancer')"],
            id="rows-contradict-where",
        ),
        pytest.param(
            GOOD_TABLE
            + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n"
            + "    where: \"Job = 'Dancer' AND Name = 'Dan'\"\n    source: v1.csv\n",
            {"v1.csv": "SSN,Job,Disease\n1,Dancer,HIV\n" + "2,Clerk,Flu\n" * 7},
            ["v1.csv", "row(s) 2, 3, 4, 5, 6 and 2 more do not satisfy views[0].where"],
            id="rows-contradict-the-checkable-part-of-where",
        ),
        pytest.param(
            GOOD_TABLE.replace(
                "attributes: [SSN, Name, Job, Disease]", "attributes: {SSN: str, Name: date, Job: str, Disease: str}"
            )
            + "views:\n  - name: v1\n    attributes: [SSN, Name, Disease]\n    source: v1.csv\n",
            {"v1.csv": "SSN,Name,Disease\n1,1995-03-05,Flu\n2,05/03/1995,HIV\n"},
            ["v1.csv", "column 'Name', row 2", "'05/03/1995'", "ISO 8601"],
            id="date-value-not-iso",
        ),
        pytest.param(
            GOOD_TABLE.replace(
                "attributes: [SSN, Name, Job, Disease]", "attributes: {SSN: str, Name: date, Job: str, Disease: str}"
            )
            + "views:\n  - name: v1\n    attributes: [SSN, Name, Disease]\n    where: \"Name > '05/03/1995'\"\n"
            + "    source: v1.csv\n",
            {"v1.csv": "SSN,Name,Disease\n1,1995-03-05,Flu\n"},
            ["topology.yaml", "views[0].where", "'05/03/1995' is not an ISO 8601 date"],
            id="date-literal-not-iso",
        ),
        pytest.param(
            GOOD_TABLE.replace(
                "attributes: [SSN, Name, Job, Disease]", "attributes: {SSN: str, Name: date, Job: str, Disease: str}"
            )
            + "views:\n  - name: v1\n    attributes: [SSN, Name, Disease]\n"
            + "    where: \"Name NOT IN ('1990-13-45')\"\n    source: v1.csv\n",
            {"v1.csv": "SSN,Name,Disease\n1,1995-03-05,Flu\n"},
            ["topology.yaml", "views[0].where", "'1990-13-45' is not a valid date"],
            id="date-literal-impossible",
        ),
        pytest.param(
            GOOD_TABLE
            + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    source: v1.csv\n"
            + "checks:\n  linkage: {k: 1000000000000000000000000}\n",
            {"v1.csv": V1},
            ["checks.linkage.k", "from 2 to 2,147,483,647"],
            id="huge-k",
        ),
        *(
            pytest.param(
                GOOD_TABLE
                + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    source: v1.csv\n"
                + f"window: {window}\n",
                {"v1.csv": V1},
                ["topology.yaml", "window", "expected a duration such as 30d, 12h, 15m or 90s"],
                id=f"window-{window}",
            )
            for window in ("30 days", "0d", "-1d", "30", "[1]")
        ),
        pytest.param(
            GOOD_TABLE.replace("identifiers: [SSN, Name]", "identifiers: []")
            + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    source: v1.csv\n",
            {"v1.csv": V1},
            ["topology.yaml", "table.identifiers", "needed by the linkage check"],
            id="linkage-without-identifiers",
        ),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(
    tmp_path: Path, topology: str, files: dict[str, str | bytes], expected: list[str]
) -> None:
    code, stdout, stderr = _run(_write(tmp_path, topology, files))
    assert code == 2, stderr
    assert stdout == ""  # nothing half-run
    assert stderr.startswith("error: ")
    assert len(stderr.strip().splitlines()) == 1
    assert "Traceback" not in stderr
    for fragment in expected:
        assert fragment in stderr


def test_missing_topology_file(tmp_path: Path) -> None:
    code, _, stderr = _run(tmp_path / "absent.yaml")
    assert code == 2
    assert "absent.yaml: no such file" in stderr


def test_clean_views_exit_0(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        GOOD_TABLE + "views:\n  - name: v1\n    attributes: [Job, Disease]\n    source: v1.csv\n",
        {"v1.csv": "Job,Disease\nDancer,Flu\n"},
    )
    code, stdout, _ = _run(path)
    assert code == 0
    assert "no disclosure" in stdout


def test_huge_k_on_the_command_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        GOOD_TABLE + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    source: v1.csv\n",
        {"v1.csv": V1},
    )
    code, _, stderr = _run(path, "--k", str(10**24))
    assert code == 2
    assert "--k" in stderr
    assert "Traceback" not in stderr


def test_sind_needs_no_identifier(tmp_path: Path) -> None:
    topology = (
        "table:\n  attributes: [Zip, Age, Problem]\n  sensitive: [Problem]\n  source: t.csv\n"
        "views:\n  - name: v\n    attributes: [Age, Problem]\n    where: \"Zip = '22030'\"\n"
        "checks:\n  sind: {k: 2}\n  rsind: {k: 2}\n"
    )
    rows = "Zip,Age,Problem\n22030,50,Flu\n22030,60,Cold\n22031,40,Flu\n"
    path = _write(tmp_path, topology, {"t.csv": rows})
    code, _, stderr = _run(path)
    assert code in (0, 1), stderr
    code, _, stderr = _run(path, "--check", "linkage")
    assert code == 2
    assert "table.identifiers" in stderr


def test_a_window_reads_as_seconds(tmp_path: Path) -> None:
    from streamdetect.io.topology_file import load_topology

    base = GOOD_TABLE + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    source: v1.csv\n"
    for text, seconds in (("30d", 2_592_000.0), ("1.5h", 5_400.0), ("15m", 900.0), ("90s", 90.0), ("2w", 1_209_600.0)):
        path = _write(tmp_path, base + f"window: {text}\n", {"v1.csv": V1})
        assert load_topology(path).window == seconds
    assert load_topology(_write(tmp_path, base, {"v1.csv": V1})).window is None
    code, _, stderr = _run(_write(tmp_path, base + "window: 30d\n", {"v1.csv": V1}))
    assert code == 1, stderr  # `check` reads files as one publication: the window withdraws nothing


def _worker_refused(example: str, *options: str) -> str:
    """``streamdetect worker`` on a shipped topology with ``options`` and an unreachable broker: a usage
    error (exit 2) before it connects; its message."""
    path = Path(__file__).resolve().parents[2] / "topologies" / example
    result = CliRunner().invoke(cli, ["worker", str(path), *options, "--bootstrap-servers", "127.0.0.1:1"])
    assert result.exit_code == 2, result.output
    return result.stderr


def test_the_universal_stream_needs_the_linkage_check() -> None:
    stderr = _worker_refused("sind-figure2.yaml", "--universal-rows", "10")
    assert "follows the linkage check's closure, and this topology does not run linkage" in stderr


@pytest.mark.parametrize("retention", ["5x", "0s", "-1d"])
def test_a_replay_retention_that_is_not_a_duration_is_a_usage_error(retention: str) -> None:
    assert "expected a duration such as 7d" in _worker_refused("dou-patients.yaml", "--replay-retention", retention)


def test_a_store_the_worker_does_not_know_is_a_usage_error_that_names_those_it_does() -> None:
    stderr = _worker_refused("dou-patients.yaml", "--store", "aerospike://")
    assert "'aerospike://' is not one of 'memory://', 'rocksdb://'" in " ".join(stderr.split())


def test_bench_unit_without_proc_says_where_it_reads_memory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``bench unit`` reads the process's memory from /proc (Linux): elsewhere exit 2 saying so, before it
    reads any row."""
    from streamdetect.bench import unit_memory

    monkeypatch.setattr(unit_memory, "STATM", tmp_path / "no-statm")
    path = Path(__file__).resolve().parents[2] / "topologies" / "dou-patients.yaml"
    result = CliRunner().invoke(cli, ["bench", "unit", str(path), "--partitions", "2", "--unit", "SSN/0"])
    assert result.exit_code == 2, result.output
    assert f"reads the process's resident memory from {tmp_path / 'no-statm'}" in " ".join(result.stderr.split())


FRAGMENT_TABLE = GOOD_TABLE + "  source: t.csv\nviews:\n  - {name: v1, attributes: [SSN, Job]}\n"


@pytest.mark.parametrize(
    ("fragmentation", "expected"),
    [
        pytest.param("", ["fragmentation", "missing", "constraints"], id="no-fragmentation"),
        pytest.param(
            "fragmentation: {visibility: ['NOT Job']}\n",
            ["fragmentation.visibility[0]", "NOT is not allowed", "monotonic"],
            id="negation",
        ),
        pytest.param(
            "fragmentation: {visibility: ['Job AND Salary']}\n",
            ["fragmentation.visibility[0]", "unknown attribute 'Salary'"],
            id="unknown-attribute",
        ),
        pytest.param(
            "fragmentation: {visibility: ['Job AND (Name']}\n",
            ["fragmentation.visibility[0]", "syntax error"],
            id="syntax",
        ),
        pytest.param(
            "fragmentation: {constraints: [[Name, Nme]], visibility: [Job]}\n",
            ["fragmentation.constraints[0][1]", "unknown attribute 'Nme'"],
            id="constraint-attribute",
        ),
        pytest.param(
            "fragmentation: {constraints: SSN, visibility: [Job]}\n",
            ["fragmentation.constraints", "list of attribute lists"],
            id="constraints-not-a-list",
        ),
    ],
)
def test_bad_fragmentation_exits_2_naming_the_key(tmp_path: Path, fragmentation: str, expected: list[str]) -> None:
    path = _write(tmp_path, FRAGMENT_TABLE + fragmentation, {"t.csv": "SSN,Name,Job,Disease\n1,Dan,Dancer,Flu\n"})
    result = CliRunner().invoke(cli, ["fragment", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for part in expected:
        assert part in result.stderr, result.stderr


HOSPITAL = Path(__file__).resolve().parents[2] / "topologies" / "decapitani-hospital.yaml"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param(["--left", "Birth,ZIP", "--right", "ZIP,Doctor"], ["share ZIP"], id="shared-attribute"),
        pytest.param(
            ["--left", "Birth,ZIP,Illness", "--right", "Doctor"],
            ["Birth, ZIP, Illness", "inside one fragment"],
            id="unsafe",
        ),
        pytest.param(
            ["--left", "Birth,Nme", "--right", "Illness"], ["--left", "unknown attribute(s) Nme"], id="unknown"
        ),
        pytest.param(["--left", "Birth", "--right", "Illness", "--kl", "2"], ["both --kl and --kr"], id="half-split"),
        pytest.param(
            ["--left", "Birth", "--right", "Illness", "--kl", "1", "--kr", "2"], ["less than --k 4"], id="small-split"
        ),
    ],
)
def test_bad_loose_options_exit_2(options: list[str], expected: list[str]) -> None:
    result = CliRunner().invoke(cli, ["loose", str(HOSPITAL), "--k", "4", *options])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for part in expected:
        assert part in result.stderr, result.stderr


def test_rsind_refuses_value_classes_past_its_bound_naming_the_attribute(tmp_path: Path) -> None:
    """A selection on the private attribute makes RSIND evaluate it for every distinct row and value:
    past the bound, exit 2 naming the attribute and the sizes, not a run of minutes."""
    topology = (
        "table:\n  attributes: [Age, Problem]\n  sensitive: [Problem]\n  source: t.csv\n"
        "views:\n  - name: v\n    attributes: [Age, Problem]\n    where: \"Problem = 'p0' OR Age > 5\"\n"
        "checks:\n  rsind: {k: 2}\n"
    )
    rows = "Age,Problem\n" + "".join(f"{i},p{i}\n" for i in range(2_300))
    code, _, stderr = _run(_write(tmp_path, topology, {"t.csv": rows}))
    assert code == 2, stderr
    assert "'Problem'" in stderr
    assert "2,300" in stderr


def test_k_anonymity_refuses_cells_past_its_bound_naming_the_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two selections reading an attribute no view holds, one of them with an attribute of its view, need the
    cells of Yao et al.'s Figure 5 enumerated, a product of the views: past the bound, exit 2 naming the view
    where it stopped, not a run that fills the memory (the bound is lowered here; the product is 40 x 40)."""
    from streamdetect.checks.k_anonymity import selection_covers

    monkeypatch.setattr(selection_covers, "MAX_CELLS", 1_000)
    topology = (
        "table:\n  attributes: {Id: int, A: int, B: int, P: str}\n  identifiers: [Id]\n  sensitive: [P]\n"
        "views:\n"
        "  - {name: v1, attributes: [Id, A], where: 'B > 1 OR A > 3', source: v1.csv}\n"
        "  - {name: v2, attributes: [A, P], where: 'B < 5', source: v2.csv}\n"
        "checks:\n  k-anonymity: {k: 2}\n"
    )
    v1 = "Id,A\n" + "".join(f"{i},0\n" for i in range(40))
    v2 = "A,P\n" + "".join(f"0,p{i}\n" for i in range(40))
    code, _, stderr = _run(_write(tmp_path, topology, {"v1.csv": v1, "v2.csv": v2}))
    assert code == 2, stderr
    assert "1,000" in stderr
    assert "'v2'" in stderr
    assert "Traceback" not in stderr
