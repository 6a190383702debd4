"""A view published with no rows: every check gives what its definition gives, never silence.

The minimal form of a k-anonymity check that went silent: table (ID, P, A, N), view v3 = (ID, P) with
rows (i0, p0), (i1, p1), which discloses both people at k = 2 and 3. A second view v2 = (P, A) whose
selection no row satisfies is published with zero rows (a header-only CSV). By Yao, Wang & Jajodia's
definition (section 3: I^v is every table whose views are the published ones) v2 only says that no row
satisfies its selection; the covers v3 forces stay covers, so the findings must be the same with and
without v2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from streamdetect.cli.main import cli

TABLE = "ID,P,A,N\ni0,p0,a0,1\ni1,p1,a1,2\n"
V3 = "ID,P\ni0,p0\ni1,p1\n"


def _topology(folder: Path, views: list[str], k: int, table: str = TABLE) -> Path:
    (folder / "t.csv").write_text(table)
    (folder / "v3.csv").write_text(V3)
    (folder / "v2.csv").write_text("P,A\n")  # published, legitimately, with no rows
    path = folder / "topology.yaml"
    path.write_text(
        "\n".join(
            [
                "name: empty-view",
                "table:",
                "  attributes: {ID: str, P: str, A: str, N: int}",
                "  identifiers: [ID]",
                "  sensitive: [P]",
                "  source: t.csv",
                "views:",
                *views,
                "checks:",
                f"  k-anonymity: {{k: {k}}}",
                f"  linkage: {{k: {k}}}",
            ]
        )
        + "\n"
    )
    return path


def _findings(path: Path) -> tuple[int, list[dict[str, Any]]]:
    result = CliRunner().invoke(cli, ["check", str(path), "--json"])
    assert result.exit_code in {0, 1}, result.output
    return result.exit_code, json.loads(result.stdout)["findings"]


def _cover(finding: dict[str, Any]) -> tuple[object, tuple[object, ...], tuple[str, ...]]:
    return finding["identifier"]["value"], tuple(finding["sensitive"]["values"]), tuple(finding["views"])


V3_VIEW = ["  - name: v3", "    attributes: [ID, P]", "    source: v3.csv"]


def _v2(where: str | None) -> list[str]:
    return [
        "  - name: v2",
        "    attributes: [P, A]",
        *([f'    where: "{where}"'] if where else []),
        "    source: v2.csv",
    ]


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("where", ["N >= 4", "A = 'a9'", "P IN ('p7', 'p8')", "N > 1 AND N < 1", "NOT N < 100"])
def test_an_empty_view_leaves_the_k_anonymity_findings_as_they_are(tmp_path: Path, where: str, k: int) -> None:
    alone = _topology(tmp_path, V3_VIEW, k)
    status, without = _findings(alone)
    assert status == 1
    assert sorted(_cover(f) for f in without if f["check"] == "k-anonymity") == [
        ("i0", ("p0",), ("v3",)),
        ("i1", ("p1",), ("v3",)),
    ]
    status, found = _findings(_topology(tmp_path, [*V3_VIEW, *_v2(where)], k))
    assert status == 1
    assert found == without  # the same findings, ids and forcing views ({v3}) included


def test_an_empty_view_without_selection_is_read_as_not_released(tmp_path: Path) -> None:
    """No table yields an empty projection beside v3's rows (the definition holds vacuously): the view is
    left out, as a view whose rows have not arrived, and v3's disclosures are reported."""
    _, without = _findings(_topology(tmp_path, V3_VIEW, 2))
    status, found = _findings(_topology(tmp_path, [*V3_VIEW, *_v2(None)], 2))
    assert status == 1
    assert found == without


def test_an_empty_view_constrains_the_table(tmp_path: Path) -> None:
    """v1 = (ID, Age) shows Dan 70 and Amy 30, v2 = (P) shows Flu and Cold: each could have either. A view
    (ID, P) of the people over 60 with Cold, published empty, says Dan (over 60) does not have Cold: Dan
    has Flu, and since someone has Cold, Amy has it. Two 1-covers only the empty view forces."""
    (tmp_path / "t.csv").write_text("ID,Age,P\nDan,70,Flu\nAmy,30,Cold\n")
    (tmp_path / "v1.csv").write_text("ID,Age\nDan,70\nAmy,30\n")
    (tmp_path / "v2.csv").write_text("P\nFlu\nCold\n")
    (tmp_path / "old.csv").write_text("ID,P\n")
    head = ["name: ages", "table:", "  attributes: {ID: str, Age: int, P: str}", "  identifiers: [ID]"]
    head += ["  sensitive: [P]", "  source: t.csv", "views:"]
    head += ["  - {name: v1, attributes: [ID, Age], source: v1.csv}", "  - {name: v2, attributes: [P], source: v2.csv}"]
    old = ["  - {name: old, attributes: [ID, P], where: \"Age > 60 AND P = 'Cold'\", source: old.csv}"]
    checks = ["checks:", "  k-anonymity: {k: 2}"]
    path = tmp_path / "topology.yaml"
    path.write_text("\n".join([*head, *checks]) + "\n")
    assert _findings(path) == (0, [])
    path.write_text("\n".join([*head, *old, *checks]) + "\n")
    status, found = _findings(path)
    assert status == 1
    assert sorted(_cover(f) for f in found) == [
        ("Amy", ("Cold",), ("old", "v1", "v2")),
        ("Dan", ("Flu",), ("old", "v1", "v2")),
    ]
