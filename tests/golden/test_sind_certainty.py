"""SIND's "can take only one private value", decided over all views together (the two cases)."""

from __future__ import annotations

from pathlib import Path

import streamdetect

TABLE = """
table:
  attributes: {Zip: str, Age: int, Problem: str}
  sensitive: [Problem]
  source: table.csv
views:
"""


def _sind(tmp_path: Path, rows: str, views: str) -> list[tuple[list[tuple[str, int]], str, bool]]:
    (tmp_path / "table.csv").write_text("Zip,Age,Problem\n" + rows)
    path = tmp_path / "topology.yaml"
    path.write_text(TABLE + views + "checks:\n  sind: {k: 2}\n")
    report = streamdetect.check(streamdetect.load_topology(path))
    return [
        ([(dict(m)["Zip"], dict(m)["Age"]) for m in f.members], f.reason, f.to_dict()["exact"])  # type: ignore[union-attr]
        for f in report.findings
    ]


def test_two_views_together_force_a_class_to_one_value(tmp_path: Path) -> None:
    # The over-40 view pins (22030, 50) and (22030, 60) to Cold; the ZIP view shows two Colds and two
    # Flus for 22030, so its two other tuples must both have Flu. Neither view alone says so.
    rows = "22030,50,Cold\n22030,60,Cold\n22030,30,Flu\n22030,35,Flu\n22031,45,Flu\n22031,70,Cold\n"
    views = (
        "  - {name: over40, attributes: [Age, Problem], where: 'Age > 40'}\n"
        "  - {name: zip22030, attributes: [Zip, Problem], where: \"Zip = '22030'\"}\n"
    )
    findings = _sind(tmp_path, rows, views)
    sat = "every member can take only one private value (decided over all views by SAT)"
    # The over-40 tuples are pinned by their published ages. Tuples that can take only their one value
    # are SIND with every other such tuple of that value (swapping Flu for Flu changes nothing): one class
    # per value, whatever the views' signatures.
    assert findings == [
        ([("22030", 30), ("22030", 35), ("22031", 45)], sat, True),
        ([("22030", 50), ("22030", 60), ("22031", 70)], sat, True),
    ]


def test_tuples_no_view_constrains_are_not_certain(tmp_path: Path) -> None:
    # Only ZIP 22030 is published; the two 22031 tuples appear in no view and could have any problem,
    # even though both have Flu in the table (and Flu is the table's only value).
    rows = "22030,30,Flu\n22030,40,Flu\n22031,50,Flu\n22031,60,Flu\n"
    views = "  - {name: zip22030, attributes: [Age, Problem], where: \"Zip = '22030'\"}\n"
    findings = _sind(tmp_path, rows, views)
    assert all(("22031", 50) not in f[0] for f in findings)
    # The two published tuples are pinned to Flu by their ages: one certain class of two.
    assert [f[0] for f in findings] == [[("22030", 30), ("22030", 40)]]
