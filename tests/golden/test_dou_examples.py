"""The examples of Dou & Coulondre 2012, section 1 (Table 1 and views v1..v5), as shipped topologies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import streamdetect
from streamdetect.cli.main import cli

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


def _findings(name: str) -> list[streamdetect.LinkageFinding]:
    return list(streamdetect.check(streamdetect.load_topology(TOPOLOGIES / name)).findings)


def test_v1_v2_disclose_that_dan_has_flu_at_level_2() -> None:
    findings = _findings("dou-patients.yaml")
    by_name = [f for f in findings if f.identifier_attribute == "Name"]
    assert [(f.identifier_value, f.sensitive_values, f.views, f.channels, f.level) for f in by_name] == [
        ("Dan", ("Flu",), ("v1", "v2"), (("v1", "v2"),), 2)
    ]


def test_every_ssn_is_disclosed_by_v1_alone_which_the_paper_overlooks() -> None:
    findings = _findings("dou-patients.yaml")
    by_ssn = {f.identifier_value: f for f in findings if f.identifier_attribute == "SSN"}
    assert sorted(by_ssn) == ["387-200", "387-399", "387-486", "387-588", "387-665", "387-756"]
    assert all(f.level == 1 and f.views == ("v1",) for f in by_ssn.values())
    assert by_ssn["387-756"].sensitive_values == ("Flu",)


def test_v2_prime_without_dan_hides_his_name_but_not_the_ssns() -> None:
    findings = _findings("dou-patients-without-dan.yaml")
    assert [f for f in findings if f.identifier_attribute == "Name"] == []
    assert len([f for f in findings if f.identifier_attribute == "SSN" and f.level == 1]) == 6


def test_v3_v4_v5_disclose_every_ssn_at_level_3_and_no_earlier() -> None:
    findings = _findings("dou-chain.yaml")
    assert {f.level for f in findings} == {3}
    assert {f.views for f in findings} == {("v3", "v4", "v5")}
    by_ssn = {f.identifier_value: f.sensitive_values for f in findings if f.identifier_attribute == "SSN"}
    assert len(by_ssn) == 6
    assert by_ssn["387-756"] == ("Flu",)


def test_json_finding_has_the_documented_shape() -> None:
    result = CliRunner().invoke(cli, ["check", str(TOPOLOGIES / "dou-patients.yaml"), "--json"])
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    dan = next(f for f in document["findings"] if f["identifier"]["value"] == "Dan")
    expected = {
        "check": "linkage",
        "identifier": {"attribute": "Name", "value": "Dan"},
        "sensitive": {"attribute": "Disease", "values": ["Flu"]},
        "views": ["v1", "v2"],
        "channels": [["v1", "v2"]],
        "channel_values": [["Flu"]],
        "joined_on": ["Job"],
        "level": 2,
        "certain": True,
    }
    assert {key: dan[key] for key in expected} == expected
    assert document["summary"] == {
        "findings": 7,
        "certain": 7,
        "possible": 0,
        "by_check": {"linkage": 7},
        "by_level": {"1": 6, "2": 1},
    }


@pytest.mark.parametrize(
    ("k", "names"),
    [(2, {"Dan"}), (3, {"Alice", "Dan", "Jack"})],
)
def test_partial_disclosure_with_larger_k(k: int, names: set[str]) -> None:
    topology = streamdetect.load_topology(TOPOLOGIES / "dou-patients.yaml")
    report = streamdetect.check(topology, k=k)
    assert {f.identifier_value for f in report.findings if f.identifier_attribute == "Name"} == names


def test_human_output_and_exit_codes() -> None:
    runner = CliRunner()
    found = runner.invoke(cli, ["check", str(TOPOLOGIES / "dou-patients.yaml")])
    assert found.exit_code == 1
    assert "Dan" in found.stdout
    assert "7 disclosure(s)" in found.stdout


def test_closure_lists_channels_by_level_with_exact_counts() -> None:
    result = CliRunner().invoke(cli, ["closure", str(TOPOLOGIES / "dou-chain.yaml"), "--json"])
    assert result.exit_code == 0
    channels = json.loads(result.stdout)
    assert [(c["level"], c["views"], c["rows"], c["exact"]) for c in channels] == [
        (1, ["v3"], 6, True),
        (1, ["v4"], 6, True),
        (1, ["v5"], 6, True),
        (2, ["v3", "v4"], 6, True),
        (2, ["v4", "v5"], 6, True),
        (3, ["v3", "v4", "v5"], 6, True),
    ]
