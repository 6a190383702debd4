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
            + "views:\n  - name: v1\n    attributes: [SSN, Job, Disease]\n    where: \"SSN = 'x'\"\n"
            + "    source: v1.csv\n",
            {"v1.csv": V1},
            ["views[0].where", "numeric", "'x'"],
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
            ["nowhere.csv", "no such file"],
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
            ["checks.linkage.k", "at least 2"],
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
