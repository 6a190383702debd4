"""Reading never changes a value: leading zeros, code-like text and Parquet string columns survive.

Integers inferred from ``07`` and ``7`` merged two patients and hid both disclosures;
ZIP ``02135`` read as 2135 joined a different ZIP.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from streamdetect.api import check, load_topology
from streamdetect.io.sources import load_views

TOPOLOGY = """
table:
  attributes: [pid, zip, diagnosis]
  identifiers: [pid]
  sensitive: [diagnosis]
views:
  - name: diagnoses
    attributes: [pid, diagnosis]
    source: diagnoses.{ext}
"""

ZIP_TOPOLOGY = """
table:
  attributes: [pid, zip, diagnosis]
  identifiers: [pid]
  sensitive: [diagnosis]
views:
  - name: residence
    attributes: [pid, zip]
    source: residence.{ext}
  - name: by_zip
    attributes: [zip, diagnosis]
    source: by_zip.{ext}
"""


def _write(tmp_path: Path, name: str, frame: pl.DataFrame, ext: str) -> None:
    if ext == "csv":
        frame.write_csv(tmp_path / f"{name}.csv")
    else:
        frame.write_parquet(tmp_path / f"{name}.parquet")


def _linked(tmp_path: Path, topology: str, ext: str) -> dict[str, tuple[str, ...]]:
    path = tmp_path / "topology.yaml"
    path.write_text(topology.format(ext=ext))
    report = check(load_topology(path))
    return {str(f.identifier_value): tuple(f.sensitive_values) for f in report.findings}  # type: ignore[union-attr]


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_leading_zero_identifiers_stay_apart(tmp_path: Path, ext: str) -> None:
    rows = pl.DataFrame({"pid": ["07", "7", "0042", "42"], "diagnosis": ["Flu", "HIV", "Cold", "Cold"]})
    _write(tmp_path, "diagnoses", rows, ext)
    assert _linked(tmp_path, TOPOLOGY, ext) == {"07": ("Flu",), "7": ("HIV",), "0042": ("Cold",), "42": ("Cold",)}


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_zip_codes_keep_their_leading_zero(tmp_path: Path, ext: str) -> None:
    _write(tmp_path, "residence", pl.DataFrame({"pid": ["a", "b"], "zip": ["02135", "2135"]}), ext)
    _write(tmp_path, "by_zip", pl.DataFrame({"zip": ["02135", "2135"], "diagnosis": ["Flu", "HIV"]}), ext)
    # As integers both ZIPs are 2135 and each patient is linked to {Flu, HIV}: no finding at all.
    assert _linked(tmp_path, ZIP_TOPOLOGY, ext) == {"a": ("Flu",), "b": ("HIV",)}


def test_values_that_round_trip_are_typed(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("pid,zip,diagnosis\n42,1.5,x\n-3,2.25,y\n")
    (tmp_path / "topology.yaml").write_text(
        "table:\n  attributes: [pid, zip, diagnosis]\n  identifiers: [pid]\n  sensitive: [diagnosis]\n"
        "views:\n  - name: t\n    attributes: [pid, zip, diagnosis]\n    source: t.csv\n"
    )
    frame = load_views(load_topology(tmp_path / "topology.yaml"))["t"]
    assert frame.schema == {"pid": pl.Int64, "zip": pl.Float64, "diagnosis": pl.String}
    assert frame.get_column("pid").to_list() == [42, -3]


@pytest.mark.parametrize(
    "values",
    [["07", "8"], ["1.50", "2"], ["1", "1.0"], ["+3", "4"], [" 4", "5"], ["1e3", "2"], ["nan", "1.5"]],
)
def test_values_that_do_not_round_trip_keep_the_column_text(tmp_path: Path, values: list[str]) -> None:
    pl.DataFrame({"pid": values, "diagnosis": ["x", "y"]}).write_csv(tmp_path / "diagnoses.csv")
    (tmp_path / "topology.yaml").write_text(TOPOLOGY.format(ext="csv"))
    frame = load_views(load_topology(tmp_path / "topology.yaml"))["diagnoses"]
    assert frame.get_column("pid").to_list() == values


def test_parquet_keeps_its_schema_types(tmp_path: Path) -> None:
    pl.DataFrame({"pid": ["42", "43"], "diagnosis": ["x", "y"]}).write_parquet(tmp_path / "diagnoses.parquet")
    (tmp_path / "topology.yaml").write_text(TOPOLOGY.format(ext="parquet"))
    frame = load_views(load_topology(tmp_path / "topology.yaml"))["diagnoses"]
    assert frame.schema["pid"] == pl.String


def test_an_attribute_compared_with_text_is_text(tmp_path: Path) -> None:
    pl.DataFrame({"zip": ["22030", "22031"], "diagnosis": ["x", "y"]}).write_csv(tmp_path / "by_zip.csv")
    (tmp_path / "topology.yaml").write_text(
        "table:\n  attributes: [pid, zip, diagnosis]\n  identifiers: [pid]\n  sensitive: [diagnosis]\n"
        "views:\n  - name: by_zip\n    attributes: [zip, diagnosis]\n    where: \"zip IN ('22030', '22031')\"\n"
        "    source: by_zip.csv\n"
    )
    frame = load_views(load_topology(tmp_path / "topology.yaml"))["by_zip"]
    assert frame.get_column("zip").to_list() == ["22030", "22031"]


@pytest.mark.parametrize(("where", "dtype"), [("age >= 65", pl.Int64), ("age > 64.5 OR age = 70", pl.Float64)])
def test_an_attribute_with_no_value_read_compared_with_a_number_is_numeric(
    tmp_path: Path, where: str, dtype: type[pl.DataType]
) -> None:
    """The selected view is empty (a header only) and no other file read holds the attribute: the numbers
    it is compared with give its type (text would refuse the selection, and with it the empty view)."""
    (tmp_path / "old.csv").write_text("pid,age,diagnosis\n")
    (tmp_path / "young.csv").write_text("pid,diagnosis\na,x\n")
    (tmp_path / "topology.yaml").write_text(
        "table:\n  attributes: [pid, age, diagnosis]\n  identifiers: [pid]\n  sensitive: [diagnosis]\n"
        f'views:\n  - {{name: old, attributes: [pid, age, diagnosis], where: "{where}", source: old.csv}}\n'
        f'  - {{name: young, attributes: [pid, diagnosis], where: "NOT ({where})", source: young.csv}}\n'
    )
    views = load_views(load_topology(tmp_path / "topology.yaml"))
    assert views["old"].schema["age"] == dtype
    assert views["old"].is_empty()
    assert views["young"].height == 1


def test_iso_dates_are_read_when_declared(tmp_path: Path) -> None:
    (tmp_path / "v.csv").write_text("pid,born,diagnosis\na,1995-03-05,x\n")
    (tmp_path / "topology.yaml").write_text(
        "table:\n  attributes: {pid: str, born: date, diagnosis: str}\n  identifiers: [pid]\n"
        "  sensitive: [diagnosis]\nviews:\n  - name: v\n    attributes: [pid, born, diagnosis]\n"
        "    where: \"born >= '1990-01-01' AND born IN ('1995-03-05', '1996-01-01')\"\n    source: v.csv\n"
    )
    frame = load_views(load_topology(tmp_path / "topology.yaml"))["v"]
    assert str(frame.get_column("born")[0]) == "1995-03-05"
