"""Every registered check on empty input gives what its definition gives, never silence (regressions).

One publication, T(ID, P, A, N) with views v3 = (ID, P) and v1 = (ID, A), where each check finds
something: v3 shows every person's P (linkage, k-anonymity), every person can take only one P value
(SIND) or sits alone in a block (RSIND), and A = a1 is one row (table k-anonymity, l-diversity). Then:
- a view whose selection no row satisfies (published with no rows) beside them changes no finding;
- an empty private table (every view empty) has no finding;
- a batch that withdraws every row of v3 leaves the findings ``check`` gives with v3 empty, which are,
  by each definition, none for the checks that read the views' rows (v1 alone shows no P), and the
  same as before for those that read the table (table rows are not withdrawn with a view's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamdetect.checks.registry import REGISTRY
from streamdetect.detector import Detector
from streamdetect.io.sources import load_data
from streamdetect.io.topology_file import load_topology
from streamdetect.model.batch import Batch

ROWS = ["i0,p0,a0,1", "i1,p1,a0,2", "i2,p1,a1,3"]
#: Each check's findings on ROWS, by what they are about (ids also name the views, which an empty view joins).
SUBJECTS: dict[str, int] = {
    "linkage": 3,
    "k-anonymity": 3,
    "sind": 2,
    "rsind": 3,
    "table-k-anonymity": 2,
    "l-diversity": 1,
}
#: After every row of v3 is withdrawn: the checks on the views' rows find nothing, those on the table
#: find what they found (the table is unchanged), minus what v3's rows gave the table checks (nothing).
AFTER_V3_WITHDRAWN = {"linkage": 0, "k-anonymity": 0, "sind": 2, "rsind": 3, "table-k-anonymity": 2, "l-diversity": 1}


def test_every_registered_check_is_covered() -> None:
    assert set(SUBJECTS) == set(REGISTRY) == set(AFTER_V3_WITHDRAWN)


def _topology(folder: Path, rows: list[str], extra: str | None = None) -> Path:
    (folder / "t.csv").write_text("ID,P,A,N\n" + "".join(f"{row}\n" for row in rows))
    views = ["  - {name: v3, attributes: [ID, P]}", "  - {name: v1, attributes: [ID, A]}"]
    checks = [f"  {name}: {{{'l' if name == 'l-diversity' else 'k'}: 2}}" for name in SUBJECTS]
    lines = ["name: edges", "table:", "  attributes: {ID: str, P: str, A: str, N: int}", "  identifiers: [ID]"]
    lines += ["  sensitive: [P]", "  quasi_identifiers: [A]", "  source: t.csv", "views:", *views]
    lines += [extra] if extra else []
    path = folder / "topology.yaml"
    path.write_text("\n".join([*lines, "checks:", *checks]) + "\n")
    return path


def _checked(path: Path) -> Detector:
    """What ``check`` does: every view's rows (computed from the table here) and the table, one batch."""
    topology = load_topology(path)
    views, table = load_data(topology, with_table=True)
    detector = Detector(topology)
    detector.update(Batch(views=views, table=table))
    return detector


def _subjects(detector: Detector, check: str) -> set[Any]:
    return {finding.subject for finding in detector.findings() if finding.check == check}


@pytest.mark.parametrize("check", sorted(SUBJECTS))
def test_a_view_no_row_satisfies_changes_no_finding(tmp_path: Path, check: str) -> None:
    before = _subjects(_checked(_topology(tmp_path, ROWS)), check)
    assert len(before) == SUBJECTS[check]
    for where in ("N >= 4", "P = 'p9'", "A = 'a0' AND N > 2"):
        extra = f'  - {{name: v2, attributes: [P, A], where: "{where}"}}'
        assert _subjects(_checked(_topology(tmp_path, ROWS, extra)), check) == before, where


@pytest.mark.parametrize("check", sorted(SUBJECTS))
def test_an_empty_private_table_has_no_finding(tmp_path: Path, check: str) -> None:
    extra = '  - {name: v2, attributes: [P, A], where: "N >= 4"}'
    assert _subjects(_checked(_topology(tmp_path, [], extra)), check) == set()


@pytest.mark.parametrize("check", sorted(SUBJECTS))
def test_withdrawals_that_empty_a_view(tmp_path: Path, check: str) -> None:
    path = _topology(tmp_path, ROWS)
    topology = load_topology(path)
    views, table = load_data(topology, with_table=True)
    detector = Detector(topology, [check])
    detector.update(Batch(views=views, table=table))
    assert len(_subjects(detector, check)) == SUBJECTS[check]
    detector.update(Batch(retracted={"v3": views["v3"]}))
    found = _subjects(detector, check)
    assert len(found) == AFTER_V3_WITHDRAWN[check]
    # ... which is what ``check`` gives with v3 published empty, and, for the checks reading views, with
    # v3 not published yet.
    fresh = Detector(topology, [check])
    fresh.update(Batch(views={**views, "v3": views["v3"].clear()}, table=table))
    assert _subjects(fresh, check) == found
    unpublished = Detector(topology, [check])
    unpublished.update(Batch(views={"v1": views["v1"]}, table=table))
    assert _subjects(unpublished, check) == found
    # Published again, the findings come back.
    detector.update(Batch(views={"v3": views["v3"]}))
    assert len(_subjects(detector, check)) == SUBJECTS[check]


def test_views_that_select_no_row_hide_every_value_from_the_conservative_check(tmp_path: Path) -> None:
    """With an effective FD and selections, k-anonymity is the conservative check (swap signatures). Views
    that select no row show no value of P: every value swaps with infinitely many that no row holds, so no
    association is at risk. (Figure 9 alone flagged every association of the table.)"""
    (tmp_path / "t.csv").write_text("A,B,C,D\n0,0,0,0\n1,0,0,0\n")
    views = [
        f'  - {{name: v{i}, attributes: [{pair}], where: "B < 0"}}' for i, pair in enumerate(["A, C", "C, D", "D, B"])
    ]
    head = ["name: hidden", "table:", "  attributes: {A: int, B: int, C: int, D: int}", "  identifiers: [A]"]
    head += ["  sensitive: [B]", "  functional_dependencies: ['A -> B, C, D']", "  source: t.csv", "views:"]
    path = tmp_path / "topology.yaml"
    path.write_text("\n".join([*head, *views, "checks:", "  k-anonymity: {k: 2}"]) + "\n")
    assert _checked(path).findings() == []
    # v2 published without selection shows (D, B) = (0, 0) for every row: B = 0 for everyone, a real
    # violation, which the conservative check flags (exact false).
    path.write_text(path.read_text().replace('[D, B], where: "B < 0"', "[D, B]"))
    found = _checked(path).findings()
    assert sorted((f.identifier_value, f.sensitive_values, f.exact) for f in found) == [
        (0, (0,), False),
        (1, (0,), False),
    ]
