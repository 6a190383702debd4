"""The examples of De Capitani di Vimercati et al. 2010 (HOSPITAL, Figures 1 and 7, Example A.1)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import polars as pl
from click.testing import CliRunner

from streamdetect.cli.main import cli
from streamdetect.io.topology_file import load_topology
from streamdetect.model.visibility import VisibilityRequirement, parse_visibility
from streamdetect.remediation.fragmentation import minimal_fragmentation, violations
from streamdetect.remediation.loose import Grouping, alike_keys, exposure, verify

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


# Figure 3: the 4-loose association induced by the (2,2)-grouping of Figure 2 (bz1..bz4, id1..id4).
FIGURE3_LEFT = (2, 1, 3, 1, 3, 2, 4, 4)
FIGURE3_RIGHT = (1, 1, 2, 2, 4, 3, 3, 4)


def _hospital_codes() -> tuple[list[int], list[int], list[int]]:
    """Per row: its code on (Birth, ZIP), on Illness and on Doctor (c3 and c4 of Figure 1(b))."""
    table = pl.read_csv(TOPOLOGIES / "data" / "decapitani" / "hospital.csv", infer_schema=False)

    def codes(columns: list[str]) -> list[int]:
        return table.select(pl.struct(columns).rank("dense")).to_series().to_list()

    return codes(["Birth", "ZIP"]), codes(["Illness"]), codes(["Doctor"])


def test_figure3_is_4_loose_and_not_5_loose() -> None:
    birth_zip, illness, doctor = _hospital_codes()
    left, right = alike_keys([birth_zip, birth_zip]), alike_keys([illness, doctor])
    grouping = Grouping(FIGURE3_LEFT, FIGURE3_RIGHT, 2, 2)
    assert verify(grouping, left, right, 4) == []
    assert any("fewer than k = 5" in problem for problem in verify(grouping, left, right, 5))
    # Pairing l1 and l5 (alike: same Birth and ZIP) into one left group breaks group heterogeneity.
    broken = Grouping((2, 1, 3, 1, 2, 3, 4, 4), FIGURE3_RIGHT, 2, 2)
    assert any("alike" in problem for problem in verify(broken, left, right, 4))


def test_figure5b_exposure_without_the_association() -> None:
    birth_zip, illness, _ = _hospital_codes()
    found = exposure(Grouping(FIGURE3_LEFT, FIGURE3_RIGHT, 2, 2), birth_zip, illness)
    assert found.left_classes == ((0, 4), (1,), (2,), (3,), (5,), (6,), (7,))
    assert found.right_classes == ((0, 7), (1, 4), (2,), (3,), (5,), (6,))
    half, eighth = Fraction(15, 64), Fraction(1, 8)
    assert found.without[0] == (Fraction(1695, 4096),) * 2 + (half,) * 4
    assert all(row == (half, half) + (eighth,) * 4 for row in found.without[1:])


def test_figure6b_exposure_with_the_4_loose_association() -> None:
    """Rows l1/l5, l2, l7 and l8 of Figure 6(b). Rows l3, l4 and l6 as transcribed cannot come from any
    (2,2)-grouping (l4's has five non-zero entries, more than the four halves its group is paired with):
    docs/remediation.md."""
    birth_zip, illness, _ = _hospital_codes()
    found = exposure(Grouping(FIGURE3_LEFT, FIGURE3_RIGHT, 2, 2), birth_zip, illness)
    quarter, none = Fraction(1, 4), Fraction(0)
    assert found.with_association[0] == (Fraction(7, 16), Fraction(7, 16), quarter, quarter, quarter, quarter)
    assert found.with_association[1] == (quarter,) * 4 + (none, none)  # l2
    assert found.with_association[5] == (quarter, quarter, none, none, quarter, quarter)  # l7
    assert found.with_association[6] == found.with_association[5]  # l8
    # The largest increase: a pair of single halves from 1/8 to 1/4 (the 7/16 entries rise from 1695/4096).
    assert found.increase == Fraction(1, 4) - Fraction(1, 8)


def test_loose_command_groups_hospital_4_loosely_and_verifies_it() -> None:
    outcome = CliRunner().invoke(
        cli, ["loose", str(HOSPITAL), "--left", "Birth,ZIP", "--right", "Illness,Doctor", "--k", "4", "--json"]
    )
    assert outcome.exit_code == 0, outcome.output
    body = json.loads(outcome.stdout)
    assert (body["k"], body["k_left"], body["k_right"], body["verified"]) == (4, 2, 2, True)
    assert body["suppressed"] == []
    groups = [tuple(pair) for pair in body["tuple_groups"]]
    assert len(groups) == 8
    assert len(set(groups)) == 8  # association heterogeneity: no pair twice
    birth_zip, illness, doctor = _hospital_codes()
    grouping = Grouping(tuple(g for g, _ in groups), tuple(h for _, h in groups), 2, 2)
    assert verify(grouping, alike_keys([birth_zip, birth_zip]), alike_keys([illness, doctor]), 4) == []
    # The published fragments are sorted by group, not in table order (which would give the association away).
    assert body["left"]["attributes"] == ["Birth", "ZIP", "G"]
    assert [row[-1] for row in body["left"]["rows"]] == sorted(row[-1] for row in body["left"]["rows"])


def test_delta_max_stops_a_release_that_exposes_too_much(tmp_path: Path) -> None:
    """Section 6: publish only when delta_max covers the largest increase of exposure (1/8 here)."""
    base = ["loose", str(HOSPITAL), "--left", "Birth,ZIP", "--right", "Illness,Doctor", "--k", "4"]
    refused = CliRunner().invoke(cli, [*base, "--delta-max", "1/16", "--out", str(tmp_path / "no")])
    assert refused.exit_code == 1
    assert "nothing written" in refused.stderr
    assert not (tmp_path / "no").exists()
    allowed = CliRunner().invoke(
        cli, [*base, "--delta-max", "0.125", "--exposure", "--json", "--out", str(tmp_path / "ok")]
    )
    assert allowed.exit_code == 0, allowed.output
    body = json.loads(allowed.stdout)
    assert body["published"] is True
    assert body["exposure"]["Birth+ZIP+Illness"]["without"][0][:2] == ["1695/4096", "1695/4096"]  # Figure 5(b)
    assert (tmp_path / "ok" / "association.csv").exists()
