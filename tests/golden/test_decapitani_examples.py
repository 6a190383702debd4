"""The examples of De Capitani di Vimercati et al. 2010 (HOSPITAL, Figures 1 and 7, Example A.1)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from streamdetect.cli.main import cli
from streamdetect.io.topology_file import load_topology
from streamdetect.model.visibility import VisibilityRequirement, parse_visibility
from streamdetect.remediation.fragmentation import minimal_fragmentation, violations

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"
HOSPITAL = TOPOLOGIES / "decapitani-hospital.yaml"


def test_hospital_gives_the_two_fragments_of_example_a1() -> None:
    topology = load_topology(HOSPITAL)
    assert topology.fragmentation is not None
    result = minimal_fragmentation(
        topology.table.attributes, topology.fragmentation.constraints, topology.fragmentation.visibility
    )
    # Figure 7: one fragment is unsatisfiable, two are not; either model of Example A.1 is right.
    assert result.tried == (1, 2)
    assert result.fragments in {
        (("Birth", "ZIP"), ("Illness", "Doctor")),
        (("Patient", "Birth", "ZIP"), ("Illness", "Doctor")),
    }


def test_hospital_fragment_command_prints_json_and_exits_0() -> None:
    outcome = CliRunner().invoke(cli, ["fragment", str(HOSPITAL), "--json"])
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(outcome.output)["fragments"][1] == ["Illness", "Doctor"]


def test_a_requirement_on_a_constrained_pair_has_no_fragmentation_and_says_why() -> None:
    topology = load_topology(HOSPITAL)
    assert topology.fragmentation is not None
    extra = VisibilityRequirement("Patient AND Doctor", parse_visibility("Patient AND Doctor"))
    result = minimal_fragmentation(
        topology.table.attributes,
        topology.fragmentation.constraints,
        (*topology.fragmentation.visibility, extra),
    )
    assert result.fragments is None
    assert result.clash is not None
    assert result.clash.requirements == ("Patient AND Doctor",)
    assert result.clash.constraints == (("Patient", "Doctor"),)
    assert result.reason is not None
    assert "{Patient, Doctor}" in result.reason


def test_the_figure_1d_fragmentation_is_correct_and_merging_it_is_not() -> None:
    topology = load_topology(HOSPITAL)
    spec = topology.fragmentation
    assert spec is not None
    assert violations([["Birth", "ZIP"], ["Illness", "Doctor"]], spec.constraints, spec.visibility) == []
    # Theorem A.2: merging two fragments of a minimal fragmentation covers a constraint.
    assert violations([["Birth", "ZIP", "Illness", "Doctor"]], spec.constraints, spec.visibility) == [
        "fragment 1 contains constraint {Birth, ZIP, Illness}",
        "fragment 1 contains constraint {Birth, ZIP, Doctor}",
    ]
