"""The recomputed k-anonymity methods' forcing-view search kept across batches (``recomputed_search.py``):
fed row by row, it reruns no subset whose views kept their rows, and its findings with their views are a fresh
check's after every row."""

from __future__ import annotations

import random
from collections.abc import Collection
from pathlib import Path

import polars as pl
import pytest

import streamdetect
from streamdetect.checks.k_anonymity import methods
from streamdetect.checks.k_anonymity.adapter import KAnonymity
from streamdetect.io.sources import load_data
from streamdetect.model.batch import Batch
from streamdetect.model.topology import Topology

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


#: Four views of a table of ints, two under selections (the cell procedure): searches ask subsets without the
#: view a batch changed, which their kept runs answer.
FOUR_VIEWS = """
name: four-views
table:
  name: T
  attributes: {Name: int, Job: int, Zip: int, Salary: int, Problem: int}
  identifiers: [Name]
  sensitive: [Problem]
  source: table.csv
views:
  - {name: v1, attributes: [Name, Job], where: "Salary > 0"}
  - {name: v2, attributes: [Job, Problem]}
  - {name: v3, attributes: [Name, Zip]}
  - {name: v4, attributes: [Zip, Problem], where: "Salary < 2"}
checks:
  k-anonymity: {k: 2}
"""


@pytest.mark.parametrize("source", ["yao-figure2.yaml", "four views"])
def test_a_batch_reruns_no_subset_whose_views_kept_their_rows(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recomputed method's forcing-view search keeps each subset's run while the subset's views keep their
    rows: a batch never reruns a subset whose views kept their rows since it last ran, and the findings with
    their views stay those of a fresh check of the rows present."""
    if source == "four views":
        rng = random.Random(7)
        rows = [[i, *(rng.randint(0, 2) for _ in range(3)), rng.randint(0, 1)] for i in range(8)]
        (tmp_path / "table.csv").write_text(
            "Name,Job,Zip,Salary,Problem\n" + "".join(f"{','.join(map(str, row))}\n" for row in rows)
        )
        (tmp_path / "four.yaml").write_text(FOUR_VIEWS)
        topology = streamdetect.load_topology(tmp_path / "four.yaml")
    else:
        topology = streamdetect.load_topology(TOPOLOGIES / source)
    views, _ = load_data(topology, with_table=False)
    runs: list[frozenset[str]] = []
    restrict = methods.restricted

    def recorded(topology: Topology, subset: Collection[str], pairs: set[tuple[str, str]]) -> Topology:
        runs.append(frozenset(subset))
        return restrict(topology, subset, pairs)

    monkeypatch.setattr(methods, "restricted", recorded)
    check = KAnonymity(topology)
    state = check.initialize()
    present: dict[str, list[pl.DataFrame]] = {}
    singles = [(name, frame.slice(i, 1)) for name, frame in views.items() for i in range(frame.height)]
    last_run: dict[frozenset[str], int] = {}
    last_change: dict[str, int] = {}
    for step, (name, row) in enumerate([*singles[::2], *singles[1::2]]):
        runs.clear()
        check.update(state, Batch(views={name: row}))
        last_change[name] = step
        for subset in runs:
            since = last_run.get(subset)
            assert since is None or any(last_change.get(view, -1) > since for view in subset), subset
            last_run[subset] = step
        got = sorted((finding.id, finding.views) for finding in state.findings or [])
        present.setdefault(name, []).append(row)
        fresh = KAnonymity(topology)
        fresh_state = fresh.initialize()
        fresh.update(fresh_state, Batch(views={n: pl.concat(frames) for n, frames in present.items()}))
        assert got == sorted((finding.id, finding.views) for finding in fresh.result(fresh_state))
