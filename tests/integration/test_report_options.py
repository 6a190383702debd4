"""`streamdetect check`'s report options: gating on certain findings, output formats, baselines."""

from __future__ import annotations

import json
import re
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
    rows = [line.split() for line in out.splitlines() if re.match(r"\d+\s+[0-9a-f]{16}\s", line)]
    assert len(rows) == 3
    assert all(row[-1] == "possible" for row in rows)  # never "total"


def test_junit_xml_has_one_failed_case_per_finding() -> None:
    import xml.etree.ElementTree as ET

    code, out, _ = _check(str(TOPOLOGIES / "dou-patients.yaml"), "--format", "junit")
    assert code == 1
    root = ET.fromstring(out)
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == 7
    assert all(case.find("failure") is not None for case in cases)
    assert any("Name=Dan -> Disease {Flu} via {v1, v2}" in case.get("name", "") for case in cases)
    assert root.find("./testsuite").get("failures") == "7"  # type: ignore[union-attr]


def test_junit_xml_skips_findings_that_do_not_fail_the_run() -> None:
    import xml.etree.ElementTree as ET

    code, out, _ = _check(str(TOPOLOGIES / "yao-serious-possible.yaml"), "--format", "junit", "--fail-on", "certain")
    assert code == 0
    cases = ET.fromstring(out).findall("./testsuite/testcase")
    assert len(cases) == 3
    assert all(case.find("skipped") is not None and case.find("failure") is None for case in cases)


def test_markdown_renders_a_table() -> None:
    code, out, _ = _check(str(TOPOLOGIES / "dou-patients.yaml"), "--format", "markdown")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "## streamdetect: `dou-patients` fails"
    header = lines.index("| # | id | identifier | value | sensitive | linked values | disclosure | other channels |")
    assert lines[header + 1].startswith("| --- |")
    assert sum(1 for line in lines if line.startswith("| ") and "| total |" in line) == 7


def test_piped_report_is_plain_text_with_one_line_headers() -> None:
    code, out, _ = _check(str(TOPOLOGIES / "dou-patients.yaml"))
    assert code == 1
    assert "─" not in out
    assert "┃" not in out
    header = next(line for line in out.splitlines() if line.startswith("#  id"))
    assert header.split() == [
        "#",
        "id",
        "identifier",
        "value",
        "sensitive",
        "linked",
        "values",
        "disclosure",
        "other",
        "channels",
    ]
    assert "level: how many views are joined" in out


def test_output_writes_the_report_to_a_file(tmp_path: Path) -> None:
    target = tmp_path / "out" / "report.json"
    code, out, _ = _check(str(TOPOLOGIES / "dou-patients.yaml"), "--format", "json", "--output", str(target))
    assert code == 1
    assert out == ""
    assert json.loads(target.read_text())["summary"]["findings"] == 7


def test_baseline_suppresses_exactly_the_accepted_ids(tmp_path: Path) -> None:
    topology = str(TOPOLOGIES / "dou-patients.yaml")
    _, out, _ = _check(topology, "--format", "json")
    document = json.loads(out)
    dan = next(f for f in document["findings"] if f["identifier"]["value"] == "Dan")
    accepted = dict(document, findings=[f for f in document["findings"] if f["id"] != dan["id"]])
    baseline = tmp_path / "accepted.json"
    baseline.write_text(json.dumps(accepted))
    code, out, _ = _check(topology, "--format", "json", "--baseline", str(baseline))
    assert code == 1  # Dan's finding is new
    assert json.loads(out)["summary"]["accepted"] == 6
    _, out, _ = _check(topology, "--format", "junit", "--baseline", str(baseline))
    import xml.etree.ElementTree as ET

    failed = [c.get("name", "") for c in ET.fromstring(out).iter("testcase") if c.find("failure") is not None]
    assert failed == [next(c for c in failed if dan["id"] in c)]
    baseline.write_text(json.dumps(document))
    assert _check(topology, "--baseline", str(baseline))[0] == 0
    baseline.write_text("{}")
    code, _, err = _check(topology, "--baseline", str(baseline))
    assert code == 2
    assert "accepted.json" in err
    assert "not a streamdetect report" in err


def test_impact_equals_a_rerun_without_each_view() -> None:
    import dataclasses

    import streamdetect
    from streamdetect.io.sources import load_views

    path = TOPOLOGIES / "dou-chain.yaml"
    code, out, _ = _check(str(path), "--format", "json", "--impact")
    assert code == 1
    document = json.loads(out)
    topology = streamdetect.load_topology(path)
    frames = load_views(topology)
    full = {(f.identifier_attribute, f.identifier_value) for f in streamdetect.check(topology, frames).findings}
    for withdrawal in document["impact"]:
        rest = dataclasses.replace(topology, views=tuple(v for v in topology.views if v.name != withdrawal["view"]))
        left = streamdetect.check(rest, {n: f for n, f in frames.items() if n != withdrawal["view"]}).findings
        assert withdrawal["cleared"] == len(full - {(f.identifier_attribute, f.identifier_value) for f in left})
    assert max(w["cleared"] for w in document["impact"]) > 0
    code, out, _ = _check(str(path), "--impact")
    assert "what to withhold" in out


def test_closure_dot_parses_and_highlights_the_findings_channels() -> None:
    import networkx as nx
    import pydot

    result = CliRunner().invoke(cli, ["closure", str(TOPOLOGIES / "dou-patients.yaml"), "--format", "dot"])
    assert result.exit_code == 0
    graphs = pydot.graph_from_dot_data(result.stdout)
    assert graphs
    graph = nx.Graph(nx.nx_pydot.from_pydot(graphs[0]))
    assert set(graph.nodes) == {"v1", "v2"}
    assert graph.edges["v1", "v2"]["label"].strip('"') == "Job"
    assert graph.edges["v1", "v2"]["color"] == "red"


def test_explain_by_id_from_a_saved_report(tmp_path: Path) -> None:
    topology = str(TOPOLOGIES / "dou-patients.yaml")
    saved = tmp_path / "report.json"
    _check(topology, "--format", "json", "--output", str(saved))
    dan = next(f for f in json.loads(saved.read_text())["findings"] if f["identifier"]["value"] == "Dan")
    for extra in ([], ["--report", str(saved)]):
        result = CliRunner().invoke(cli, ["explain", topology, "--finding", dan["id"], "--json", *extra])
        assert result.exit_code == 0, result.stderr
        document = json.loads(result.stdout)
        assert document["finding"] == dan
        assert any("Dancer" in row for section in document["explanation"] for row in section["rows"])
    result = CliRunner().invoke(cli, ["explain", topology, "--finding", "0123456789abcdef"])
    assert result.exit_code == 2
    assert "no finding with this id" in result.stderr


def test_explain_refuses_a_report_of_another_topology(tmp_path: Path) -> None:
    saved = tmp_path / "report.json"
    _check(str(TOPOLOGIES / "yao-serious-possible.yaml"), "--format", "json", "--output", str(saved))
    result = CliRunner().invoke(
        cli, ["explain", str(TOPOLOGIES / "dou-patients.yaml"), "--finding", "1", "--report", str(saved)]
    )
    assert result.exit_code == 2
    assert "another topology" in result.stderr
