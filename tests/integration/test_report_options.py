"""`streamdetect check`'s report options: gating on certain findings, output formats, baselines."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from streamdetect.cli.main import cli

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


def _check(*arguments: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["check", *arguments])
    return result.exit_code, result.stdout, result.stderr


def test_fail_on_certain_lets_possible_links_through() -> None:
    topology = str(TOPOLOGIES / "yao-serious-possible.yaml")
    code, out, _ = _check(topology, "--json")
    assert code == 1
    document = json.loads(out)
    assert document["summary"]["certain"] == 0
    assert document["summary"]["possible"] == 3
    assert _check(topology, "--fail-on", "certain")[0] == 0
    # A certain finding still fails the run under --fail-on certain.
    assert _check(str(TOPOLOGIES / "dou-patients.yaml"), "--fail-on", "certain")[0] == 1


def test_human_report_shows_certain_and_possible_apart() -> None:
    code, out, _ = _check(str(TOPOLOGIES / "yao-serious-possible.yaml"))
    assert code == 1
    assert "possible links" in out
    assert "0 certain and 3 possible" in out
    assert "total" not in out.split("possible links")[1].split("disclosure(s)")[0]
