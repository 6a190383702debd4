"""`streamdetect explain`: the rows behind a finding, for each kind of check."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from streamdetect.cli.main import cli

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


def _explain(*arguments: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["explain", *arguments])
    return result.exit_code, result.stdout, result.stderr


def test_linkage_finding_shows_the_join_path() -> None:
    code, out, _ = _explain(str(TOPOLOGIES / "dou-patients.yaml"), "--finding", "7")
    assert code == 0
    assert '"value": "Dan"' in out
    assert "rows of v1 on that path" in out
    assert "Dancer" in out


def test_cover_finding_shows_the_projection_facts() -> None:
    code, out, _ = _explain(str(TOPOLOGIES / "yao-figure1.yaml"), "--check", "k-anonymity", "--finding", "1")
    assert code == 0
    assert "projection facts of v1" in out
    assert "Lawyer" in out


def test_sind_finding_shows_how_each_view_sees_the_members() -> None:
    code, out, _ = _explain(str(TOPOLOGIES / "sind-figure4.yaml"), "--finding", "2")
    assert code == 0
    assert "as by_gender" in out
    assert "Female" in out


def test_a_finding_number_beyond_the_report_exits_2() -> None:
    code, out, err = _explain(str(TOPOLOGIES / "sind-figure4.yaml"), "--finding", "9")
    assert code == 2
    assert out == ""
    assert "the report has 2 finding(s)" in err
