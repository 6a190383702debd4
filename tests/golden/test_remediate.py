"""streamdetect remediate: proposals re-checked by every configured check; only clean ones are safe."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from streamdetect.cli.main import cli

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


def _remediate(path: Path, *extra: str) -> tuple[int, dict[str, object]]:
    outcome = CliRunner().invoke(cli, ["remediate", str(path), "--json", *extra])
    return outcome.exit_code, json.loads(outcome.stdout)


def _by_kind(body: dict[str, object]) -> dict[str, dict[str, object]]:
    proposals = body["proposals"]
    assert isinstance(proposals, list)
    return {p["kind"]: p for p in proposals}


def test_huang_table1_is_made_safe_by_k_msd_ag(tmp_path: Path) -> None:
    code, body = _remediate(TOPOLOGIES / "huang-table1.yaml", "--out", str(tmp_path))
    assert code == 0
    assert body["before"] == {"table-k-anonymity": 18, "l-diversity": 18}
    proposals = _by_kind(body)
    assert proposals["generalized"]["safe"] is True
    assert proposals["generalized"]["after"] == {"table-k-anonymity": 0, "l-diversity": 0}
    assert proposals["generalized"]["utility"]["functional_dependencies_kept"] is True  # type: ignore[index]
    assert proposals["fragmented"]["safe"] is False  # no fragmentation declared: not offered as safe
    assert (tmp_path / "generalized" / "release.csv").exists()


def test_views_that_link_patients_to_illnesses_get_two_safe_proposals(tmp_path: Path) -> None:
    text = (TOPOLOGIES / "decapitani-hospital.yaml").read_text()
    source = TOPOLOGIES / "data" / "decapitani" / "hospital.csv"
    text = text.replace("source: data/decapitani/hospital.csv", f"source: {source}")
    text = text.replace(
        "  - name: left\n    attributes: [Birth, ZIP]\n  - name: right\n    attributes: [Illness, Doctor]\n",
        "  - name: clinic\n    attributes: [Birth, ZIP, Illness]\n"
        "  - name: patients\n    attributes: [Patient, Birth, ZIP]\n",
    )
    path = tmp_path / "leaky.yaml"
    path.write_text(text)
    code, body = _remediate(path)
    assert code == 0
    assert body["before"] == {"linkage": 6}  # each patient tied to an illness through Birth and ZIP
    proposals = _by_kind(body)
    assert proposals["fragmented"]["safe"] is True
    assert proposals["fragmented"]["description"] == "fragments {Birth, ZIP}; {Illness, Doctor}"
    assert proposals["fragmented"]["utility"]["loose_association"]["verified"] is True  # type: ignore[index]
    assert proposals["generalized"]["after"] == {"linkage": 0}


def test_nothing_unsafe_is_proposed_as_safe() -> None:
    """Dou & Coulondre's Table 1: v1 alone pairs every SSN with its Disease; generalizing the
    quasi-identifiers cannot change that, and no fragmentation is declared: exit 1, none safe."""
    code, body = _remediate(TOPOLOGIES / "dou-patients.yaml")
    assert code == 1
    proposals = _by_kind(body)
    assert not any(p["safe"] for p in proposals.values())
    assert proposals["generalized"]["after"] == {"linkage": 7}
